package sdkcheck

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/detour-proxy/detour/rewrite/ir"
	"github.com/detour-proxy/detour/rewrite/openai"
)

// testCreated is the created time of the codecs' test answers and streams,
// as in their packages' goldens.
const testCreated = 1735689600

// The codecs' testdata, whose files seed the fuzz targets here as they seed
// the fuzz targets beside the codecs.
const (
	openaiTestdata = "../../rewrite/openai/testdata"
)

// addSeeds adds every file of dir matching pattern to f's corpus. A pattern
// that matches nothing fails: the seeds are in another package's testdata,
// and a moved file must not silently empty the corpus.
func addSeeds(f *testing.F, dir, pattern string) {
	f.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, pattern))
	if len(files) == 0 {
		f.Fatalf("no seed files %s in %s", pattern, dir)
	}
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}

// marshalIndent renders an IR value as indented JSON for diffs, without
// HTML escaping so that text reads as sent.
func marshalIndent(t testing.TB, v any) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func ptr[T any](v T) *T { return &v }

// normalizeRequest round-trips r through JSON so that equal requests
// compare equal whatever the spacing of their raw JSON fields.
func normalizeRequest(t *testing.T, r *ir.Request) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(marshalIndent(t, r), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// openaiEncodeEvents runs evs through rewrite/openai's StreamEncoder and
// closes it.
func openaiEncodeEvents(evs []ir.StreamEvent, o ir.StreamOptions) []byte {
	e := openai.NewStreamEncoder(o)
	var out []byte
	for _, ev := range evs {
		out = e.Encode(out, ev)
	}
	return e.Close(out)
}
