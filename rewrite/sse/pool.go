package sse

import "sync"

// The Readers' buffers of the two usual sizes are pooled: a stream's
// buffer is two allocations (the first and, for a stream that comes in
// bursts, the bigger one) that a forwarder serving many streams one after
// the other need not make for each. A buffer goes back only through
// Release; one that is dropped is collected as any other.
var (
	smallBuffers = sync.Pool{New: func() any { return new([initialBufferSize]byte) }}
	burstBuffers = sync.Pool{New: func() any { return new([burstBufferSize]byte) }}
)

// newBuffer returns a buffer of n bytes, from a pool for the two sizes
// fill uses.
func newBuffer(n int) []byte {
	switch n {
	case initialBufferSize:
		return smallBuffers.Get().(*[initialBufferSize]byte)[:]
	case burstBufferSize:
		return burstBuffers.Get().(*[burstBufferSize]byte)[:]
	}
	return make([]byte, n)
}

// pooled reports whether a buffer of n bytes has a pool: one of another
// size is made anew each time, so it is kept while the Reader waits.
func pooled(n int) bool { return n == initialBufferSize || n == burstBufferSize }

// putBuffer gives b back to its pool, when it is of a pooled size.
func putBuffer(b []byte) {
	switch len(b) {
	case initialBufferSize:
		smallBuffers.Put((*[initialBufferSize]byte)(b))
	case burstBufferSize:
		burstBuffers.Put((*[burstBufferSize]byte)(b))
	}
}

// Release gives the Reader's buffer back for other Readers to use. The
// events it returned, and what Marked returned, become invalid: they point
// into that buffer, which another stream will overwrite. After Release, r
// may be Reset and used again (it gets a buffer again on its first read).
func (r *Reader) Release() {
	if r.buf == nil {
		return
	}
	putBuffer(r.buf)
	r.buf = nil
	r.r, r.w = 0, 0
	r.mark = 0
}
