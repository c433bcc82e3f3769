package chain

import "sync"

// firstWrite is the commit point's write: the held-back events and the
// first content, with the response headers in front of them.
//
// It runs on a goroutine of its own, which the stream's goroutine waits
// for. The first flush writes the response headers, net/http's deepest
// path (chunkWriter.writeHeader alone has a frame of nearly 3 KiB): from
// under the handler's frames it needs more than the 8 KiB stack a
// goroutine starts the stream with, and a goroutine's stack, once grown,
// stays at its new size for as long as the goroutine does not shrink it,
// which the garbage collector does only for a stack less than a quarter
// used, and a parked stream's stack is more than that. A stream may stay
// open for minutes: every open stream kept 16 KiB of stack where 8 KiB
// would do. The helper's stack is given back when it returns, a few
// microseconds later, and reused by the next.
type firstWrite struct {
	wg  sync.WaitGroup
	b   []byte
	ok  bool
	err any // a panic of the write, raised again on the stream's goroutine
}

// writeFirst writes b and flushes it, from a goroutine of its own (see
// firstWrite), and reports whether both succeeded.
func (o *streamOut) writeFirst(b []byte) bool {
	f := &o.first
	f.b = b
	f.wg.Add(1)
	// The helper takes o from a channel: a go statement that passed it
	// would allocate a closure per stream.
	go takeFirst()
	firstWrites <- o
	f.wg.Wait()
	f.b = nil
	if f.err != nil {
		// As if the write had panicked here: net/http recovers a
		// handler's panic (http.ErrAbortHandler among them) only on the
		// handler's own goroutine.
		panic(f.err)
	}
	return f.ok
}

// firstWrites hands each helper started by writeFirst the stream it
// writes for; every helper takes exactly one, whichever it is.
var firstWrites = make(chan *streamOut)

func takeFirst() { (<-firstWrites).runFirst() }

func (o *streamOut) runFirst() {
	f := &o.first
	defer f.wg.Done()
	defer func() { f.err = recover() }()
	f.ok = o.put(f.b) && o.rc.Flush() == nil
}

// heldBuffers are the buffers of the events a stream holds back until its
// commit point (untilCommit's pending): needed only until the first write,
// so one serves stream after stream.
var heldBuffers = sync.Pool{New: func() any { return new([firstHeld]byte) }}

// heldBuffer returns an empty buffer for the events held back, with room
// for twice an opening event of n bytes and the first content.
func (a *attempt) heldBuffer(n int) []byte {
	if 2*n > firstHeld {
		return make([]byte, 0, 2*n)
	}
	a.held = heldBuffers.Get().(*[firstHeld]byte)
	return a.held[:0]
}

// releaseHeld gives back the held-back events' buffer once nothing points
// into it (the first write is done, or the attempt is over: a failure
// keeps its own copy).
func (a *attempt) releaseHeld() {
	if a.held != nil {
		heldBuffers.Put(a.held)
		a.held = nil
	}
}

// releaseStream gives back a stream's buffers when its attempt is done
// with it.
func (a *attempt) releaseStream() {
	a.releaseHeld()
	a.rd.Release()
}
