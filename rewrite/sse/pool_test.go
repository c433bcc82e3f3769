package sse

import (
	"io"
	"strings"
	"testing"
)

// TestReleasedReaderReadsAgain: after Release a Reader may be Reset and
// read a new stream whole, and a Reader that got the released buffer
// reads its own stream, not the old one's bytes.
func TestReleasedReaderReadsAgain(t *testing.T) {
	t.Parallel()
	read := func(r *Reader) []string {
		var got []string
		for {
			ev, err := r.Next()
			if err == io.EOF {
				return got
			}
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, string(ev.Data))
		}
	}
	r := NewReader(strings.NewReader("data: a\n\ndata: b\n\n"))
	if got := read(r); strings.Join(got, ",") != "a,b" {
		t.Fatalf("first stream: got %q; want [a b]", got)
	}
	r.Release()
	r.Release() // a second Release is harmless
	other := NewReader(strings.NewReader("data: x\n\n"))
	r.Reset(strings.NewReader("data: c\n\n"))
	if got := read(other); strings.Join(got, ",") != "x" {
		t.Errorf("other stream: got %q; want [x]", got)
	}
	if got := read(r); strings.Join(got, ",") != "c" {
		t.Errorf("stream after Release and Reset: got %q; want [c]", got)
	}
}
