package sse

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// TestMarkedIsTheRawOfTheRun: Marked returns the events' Raw since Mark,
// concatenated, also when the buffer moved or grew under the run (a reader
// that returns one byte a time makes it fill for every byte).
func TestMarkedIsTheRawOfTheRun(t *testing.T) {
	t.Parallel()
	var stream strings.Builder
	for i := range 200 {
		stream.WriteString("event: e\ndata: {\"i\":" + strings.Repeat("7", i%40) + "}\n\n")
	}
	for _, name := range []string{"whole", "one byte at a time"} {
		var src io.Reader = strings.NewReader(stream.String())
		if name != "whole" {
			src = iotest.OneByteReader(src)
		}
		r := NewReader(src)
		var got, want []byte
		n := 0
		for {
			if n%7 == 0 {
				got = append(got, r.Marked()...)
				r.Unmark()
				r.Mark()
			}
			ev, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			want = append(want, ev.Raw...)
			n++
		}
		got = append(got, r.Marked()...)
		if !bytes.Equal(got, want) {
			t.Errorf("%s: the runs' Marked bytes are not the events' Raw:\ngot  %q\nwant %q", name, got, want)
		}
		if !bytes.Equal(want, []byte(stream.String())) {
			t.Errorf("%s: Raw of all events is not the stream", name)
		}
	}
}

func TestMarkedWithoutMarkIsNil(t *testing.T) {
	t.Parallel()
	r := NewReader(strings.NewReader("data: 1\n\n"))
	if _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	if b := r.Marked(); b != nil {
		t.Errorf("Marked() = %q without Mark; want nil", b)
	}
	r.Mark()
	r.Reset(strings.NewReader("data: 2\n\n"))
	if b := r.Marked(); b != nil {
		t.Errorf("Marked() = %q after Reset; want nil", b)
	}
}
