//go:build !race

// Under the race detector sync.Pool drops what it is given at random, so
// a pooled buffer is sometimes made anew: the count below holds without it.

package sse

import (
	"io"
	"testing"
)

// TestIdleReleaseDoesNotAllocatePerEvent: the buffer given back while
// waiting is taken again from its pool.
func TestIdleReleaseDoesNotAllocatePerEvent(t *testing.T) {
	stream := string(openAIStream(200))
	r := NewReader(nil)
	r.SetIdleRelease(true)
	src := &chunkReader{n: 1 << 20}
	var rd io.Reader = eventReader{src}
	run := func() {
		src.s = stream
		r.Reset(rd)
		for {
			if _, err := r.Next(); err != nil {
				break
			}
		}
	}
	run()
	if allocs := testing.AllocsPerRun(20, run); allocs > 0 {
		t.Errorf("%v allocations per 200-event stream", allocs)
	}
}
