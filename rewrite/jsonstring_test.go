package rewrite

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"
)

// TestAppendJSONStringIsTheCacheKeyEscaper: the vendor encoders and the
// cache key's canonical form escape text the same way, json.Encoder's way
// without HTML escaping; \b and \f used to come out as \u0008 and \u000c
// here and as \b and \f in the cache key.
func TestAppendJSONStringIsTheCacheKeyEscaper(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"\b\f", "ctl \x00\x01\x1f\t\r\n", "q\" b\\ /", "<>&", "\u2028\u2029", "é😀", "bad\xffutf8"} {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(s); err != nil {
			t.Fatal(err)
		}
		want := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
		if got := AppendJSONString(nil, s); !bytes.Equal(got, want) {
			t.Errorf("AppendJSONString(%q) = %s; encoding/json writes %s", s, got, want)
		}
		// The cache key's canonical form of the same text, as a body's
		// value. (It never sees invalid UTF-8: it writes decoded text, in
		// which that is already U+FFFD.)
		if !utf8.ValidString(s) {
			continue
		}
		c := new(canonicalizer)
		body := append(append([]byte(`{"s":`), want...), '}')
		if err := c.canonicalize(body); err != nil {
			t.Fatal(err)
		}
		if got := c.out[len(`{"s":`) : len(c.out)-1]; !bytes.Equal(got, want) {
			t.Errorf("canonical form of %q = %s; AppendJSONString writes %s", s, got, want)
		}
	}
}
