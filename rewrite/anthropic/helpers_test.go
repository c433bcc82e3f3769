package anthropic

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/detour-proxy/detour/internal/testsupport"
	"github.com/detour-proxy/detour/rewrite/ir"
)

// golden compares got with testdata/name, rewriting the file under -update.
// JSON is compared indented, so the files can be read and reviewed.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	if json.Valid(got) {
		var buf bytes.Buffer
		if err := json.Indent(&buf, got, "", "  "); err != nil {
			t.Fatal(err)
		}
		buf.WriteByte('\n')
		got = buf.Bytes()
	}
	testsupport.Golden(t, filepath.Join("testdata", name), got)
}

// noteList collects EncodeOptions.Notes.
type noteList []string

func (n *noteList) add(s string) { *n = append(*n, s) }

// encodeStream runs events through a StreamEncoder and closes it.
func encodeStream(o ir.StreamOptions, events ...ir.StreamEvent) []byte {
	e := NewStreamEncoder(o)
	var out []byte
	for _, ev := range events {
		out = e.Encode(out, ev)
	}
	return e.Close(out)
}

func ptr[T any](v T) *T { return &v }
