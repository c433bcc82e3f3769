package gemini

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/detour-proxy/detour/internal/testsupport"
	"github.com/detour-proxy/detour/rewrite/ir"
)

// golden compares got with testdata/name, rewriting the file first with
// -update. Review the diff of a rewritten file against docs/vendors.md.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	testsupport.Golden(t, filepath.Join("testdata", name), got)
}

// readTestdata returns testdata/name.
func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// reindent re-indents a JSON document so golden files diff by line.
func reindent(t testing.TB, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := json.Indent(&buf, b, "", "  "); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, b)
	}
	buf.WriteByte('\n')
	return buf.Bytes()
}

// irRequest reads an ir.Request fixture.
func irRequest(t testing.TB, name string) *ir.Request {
	t.Helper()
	var r ir.Request
	if err := json.Unmarshal(readTestdata(t, name), &r); err != nil {
		t.Fatal(err)
	}
	return &r
}

// mustDecodeRequest decodes a Gemini request body or fails the test.
func mustDecodeRequest(t testing.TB, body string) *ir.Request {
	t.Helper()
	r, err := DecodeRequest([]byte(body), "gemini-2.5-flash", false)
	if err != nil {
		t.Fatalf("DecodeRequest: %v", err)
	}
	return r
}

// mustEncodeRequest encodes r or fails the test, returning the body as a
// generic JSON value for field checks.
func mustEncodeRequest(t testing.TB, r *ir.Request, notes *[]string) map[string]any {
	t.Helper()
	o := ir.EncodeOptions{Model: "gemini-2.5-flash"}
	if notes != nil {
		o.Notes = func(n string) { *notes = append(*notes, n) }
	}
	b, err := EncodeRequest(r, o)
	if err != nil {
		t.Fatalf("EncodeRequest: %v", err)
	}
	var v map[string]any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("EncodeRequest wrote invalid JSON: %v\n%s", err, b)
	}
	return v
}

// jsonString renders v compactly, for comparing parts of decoded JSON.
func jsonString(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func ptr[T any](v T) *T { return &v }
