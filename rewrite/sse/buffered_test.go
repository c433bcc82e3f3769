package sse_test

import (
	"io"
	"strings"
	"testing"

	"github.com/detour-proxy/detour/rewrite/sse"
)

// oneRead hands out its chunks one Read at a time, as a network stream
// delivers events in bursts.
type oneRead struct{ chunks []string }

func (o *oneRead) Read(p []byte) (int, error) {
	if len(o.chunks) == 0 {
		return 0, io.EOF
	}
	n := copy(p, o.chunks[0])
	o.chunks[0] = o.chunks[0][n:]
	if o.chunks[0] == "" {
		o.chunks = o.chunks[1:]
	}
	return n, nil
}

// TestEventBuffered: after a burst of events arrives in one read, every
// event but the burst's last one is followed by another already buffered;
// a half event does not count.
func TestEventBuffered(t *testing.T) {
	r := sse.NewReader(&oneRead{chunks: []string{
		"data: 1\n\ndata: 2\r\n\r\ndata: 3\n\n",
		"data: 4\n\ndata: 5",
		"\n\n",
	}})
	if r.EventBuffered() {
		t.Fatal("EventBuffered before anything was read = true")
	}
	want := []bool{true, true, false, false, false}
	for i, w := range want {
		ev, err := r.Next()
		if err != nil {
			t.Fatalf("event %d: %v", i+1, err)
		}
		if got := r.EventBuffered(); got != w {
			t.Errorf("after event %d (%q): EventBuffered = %v; want %v", i+1, strings.TrimSpace(string(ev.Raw)), got, w)
		}
	}
	if _, err := r.Next(); err != io.EOF {
		t.Fatalf("after the last event: %v; want EOF", err)
	}
}
