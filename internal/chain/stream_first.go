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
	go o.runFirst()
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

func (o *streamOut) runFirst() {
	f := &o.first
	defer f.wg.Done()
	defer func() { f.err = recover() }()
	f.ok = o.put(f.b) && o.rc.Flush() == nil
}
