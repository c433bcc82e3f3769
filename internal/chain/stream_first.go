package chain

import (
	"sync"
	"sync/atomic"
)

// writeFirst writes b, the held-back events and the first content, with
// the response headers in front of them, and flushes it; it reports whether
// both succeeded.
//
// The write runs on a helper goroutine, which the stream's goroutine waits
// for. The first flush writes the response headers, net/http's deepest
// path (chunkWriter.writeHeader alone has a frame of nearly 3 KiB): from
// under the handler's frames it needs more than the 8 KiB stack a
// goroutine starts the stream with, and a goroutine's stack, once grown,
// stays at its new size for as long as the goroutine does not shrink it,
// which the garbage collector does only for a stack less than a quarter
// used, and a parked stream's stack is more than that. A stream may stay
// open for minutes: every open stream kept 16 KiB of stack where 8 KiB
// would do.
//
// The helpers outlive their write: a few of them wait, parked, for the
// next commit point (firstWriter). A helper started for each write cost
// the time to first token some 20 µs on a proxy that had been idle (the
// goroutine's creation, its stack grown from 8 KiB by copying, on memory
// no cache held); a parked helper already has the stack the write needs.
// A commit point that finds none parked starts one; without park (a
// Runner that does not keep them), that helper ends after its write.
//
// The helper takes o and the bytes from a channel (a go statement that
// passed them would allocate a closure per stream), and what it leaves in
// the stream's streamOut is kept small: streamOut lives in the attempt,
// which lives in the request's one allocation.
func (o *streamOut) writeFirst(b []byte) bool {
	o.firstDone.Add(1)
	j := firstJob{o, b}
	if !o.park {
		go firstWriter(j)
	} else {
		select {
		case firstWrites <- j:
		default:
			go firstWriter(j)
		}
	}
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

// firstWrites hands a commit point's write to a parked helper.
var firstWrites = make(chan firstJob)

// maxParkedFirstWriters bounds the helpers parked between writes: more
// commit points at the same instant than cores are rare, and one that
// finds none parked only pays for starting its own. Each parked helper
// keeps the stack the write grew (16 KiB), until a GC cycle shrinks it.
const maxParkedFirstWriters = 4

// parkedFirstWriters counts the helpers parked, or about to park, on
// firstWrites.
var parkedFirstWriters atomic.Int32

// firstWriter does j, then waits for the next write, unless its stream
// does not park helpers or enough of them wait already.
func firstWriter(j firstJob) {
	for {
		park := j.o.park
		j.o.runFirst(j.b)
		if !park {
			return
		}
		// Nothing of the stream it wrote is kept while parked.
		j = firstJob{}
		if parkedFirstWriters.Add(1) > maxParkedFirstWriters {
			parkedFirstWriters.Add(-1)
			return
		}
		j = <-firstWrites
		parkedFirstWriters.Add(-1)
	}
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
