package sdkcheck

import (
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

func ptr[T any](v T) *T { return &v }

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
