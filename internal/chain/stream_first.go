package chain

import "sync"

// writeFirst writes b, the held-back events and the first content, with
// the response headers in front of them, and flushes it; it reports whether
// both succeeded.
//
// The write runs on a goroutine of its own, which the stream's goroutine waits
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
//
// The helper takes o and the bytes from a channel (a go statement that
// passed them would allocate a closure per stream), and what it leaves in
// the stream's streamOut is kept small: streamOut lives in the attempt,
// which lives in the request's one allocation.
func (o *streamOut) writeFirst(b []byte) bool {
	o.firstDone.Add(1)
	go takeFirst()
	firstWrites <- firstJob{o, b}
	o.firstDone.Wait()
	if p := o.firstPanic; p != nil {
		// As if the write had panicked here: net/http recovers a
		// handler's panic (http.ErrAbortHandler among them) only on the
		// handler's own goroutine.
		o.firstPanic = nil
		panic(*p)
	}
	return o.firstOK
}

// firstJob is one commit point's write, handed to its helper.
type firstJob struct {
	o *streamOut
	b []byte
}

// firstWrites hands each helper started by writeFirst the write it does;
// every helper takes exactly one, whichever it is.
var firstWrites = make(chan firstJob)

func takeFirst() {
	j := <-firstWrites
	j.o.runFirst(j.b)
}

func (o *streamOut) runFirst(b []byte) {
	defer o.firstDone.Done()
	defer func() {
		if r := recover(); r != nil {
			// A copy on the heap: taking r's address would put r there
			// on every call.
			p := new(any)
			*p = r
			o.firstPanic = p
		}
	}()
	o.firstOK = o.put(b) && o.rc.Flush() == nil
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
