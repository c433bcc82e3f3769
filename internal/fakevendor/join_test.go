package fakevendor

import (
	"bytes"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/detour-proxy/detour/rewrite"
)

// flushRecorder keeps what was written between flushes.
type flushRecorder struct {
	*httptest.ResponseRecorder
	flushes [][]byte
	at      int
}

func (f *flushRecorder) Flush() {
	b := f.Body.Bytes()
	f.flushes = append(f.flushes, bytes.Clone(b[f.at:]))
	f.at = len(b)
}

// streamFlushes serves one streaming request of shape from a new vendor
// and returns what each flush wrote.
func streamFlushes(t *testing.T, shape rewrite.Shape, opts Options, f Fault) [][]byte {
	t.Helper()
	opts.Now = fixedNow
	v := New(shape, opts)
	if f.Kind != "" {
		v.SetDefault(f)
	}
	path, body := pathAndBody(shape, true)
	rec := &flushRecorder{ResponseRecorder: httptest.NewRecorder()}
	v.ServeHTTP(rec, httptest.NewRequest("POST", path, strings.NewReader(body)))
	if rec.at != rec.Body.Len() {
		t.Fatalf("%s: %d bytes written after the last flush", shape, rec.Body.Len()-rec.at)
	}
	return rec.flushes
}

func TestJoinFirstFlushesOpeningWithFirstContent(t *testing.T) {
	opts := Options{Text: "alpha beta gamma", Chunks: 3}
	join := opts
	join.JoinFirst = true
	for _, shape := range []rewrite.Shape{rewrite.OpenAI, rewrite.Anthropic, rewrite.Gemini} {
		plain := streamFlushes(t, shape, opts, Fault{})
		joined := streamFlushes(t, shape, join, Fault{})
		// k: the opening events, flushed one by one without JoinFirst
		// (Gemini has none).
		k := 0
		for k < len(plain) && !bytes.Contains(plain[k], []byte("alpha")) {
			k++
		}
		if k == len(plain) {
			t.Fatalf("%s: no flush has the first content", shape)
		}
		if !bytes.Contains(joined[0], []byte("alpha")) || bytes.Contains(joined[0], []byte("beta")) {
			t.Errorf("%s: JoinFirst's first flush is not the opening and the first content: %q", shape, joined[0])
		}
		// The same stream, the opening events flushed with the first
		// content.
		if !bytes.Equal(bytes.Join(plain, nil), bytes.Join(joined, nil)) {
			t.Errorf("%s: JoinFirst changed the stream's bytes", shape)
		}
		if len(joined) != len(plain)-k || !bytes.Equal(joined[0], bytes.Join(plain[:k+1], nil)) {
			t.Fatalf("%s: JoinFirst's first flush is not the first %d of the plain stream's", shape, k+1)
		}
		for i := 1; i < len(joined); i++ {
			if !bytes.Equal(joined[i], plain[k+i]) {
				t.Errorf("%s: flush %d differs: %q, want %q", shape, i, joined[i], plain[k+i])
			}
		}
	}
}

// With JoinFirst a stream fault still gets every byte it writes flushed,
// the opening events too (streamFlushes fails on any left unflushed).
func TestJoinFirstStreamFaultsAreFlushed(t *testing.T) {
	for _, f := range []Fault{{Kind: StreamErrorEarly}, {Kind: StreamErrorMid}, {Kind: StreamEOF}, {Kind: StreamStall, Delay: 1}} {
		for _, shape := range []rewrite.Shape{rewrite.OpenAI, rewrite.Anthropic} {
			got := streamFlushes(t, shape, Options{JoinFirst: true}, f)
			if len(got) == 0 {
				t.Fatalf("%s %s: nothing flushed", shape, f.Kind)
			}
		}
	}
}
