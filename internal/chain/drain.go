package chain

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/detour-proxy/detour/policy"
	"github.com/detour-proxy/detour/rewrite"
)

// errDrained is the cause of a context cancelled because detour's drain
// timeout ran out (Runner.Drain), as opposed to the app going away.
var errDrained = errors.New("detour is shutting down: the drain timeout ran out")

// drainedMessage is what the app is told, in its vendor's error shape, when
// its request or stream is ended by the drain.
const drainedMessage = "detour is shutting down and its drain timeout (drain_timeout) ran out while this request was still running; retry the request"

// drained reports whether the request was ended by the drain.
func (s *session) drained() bool {
	return s.cutByDrain.Load()
}

// drainList is what the drain ends when Runner.Drain is done: every
// upstream attempt in flight, every wait before a retry, every passthrough.
// Each registers while it runs, in an intrusive list (no allocation per
// request), rather than every request deriving a context of its own from
// Runner.Drain: that cost a cancel context, an AfterFunc and a copy of the
// request per request, and the extra context level a channel and a map
// more per attempt.
type drainList struct {
	once sync.Once
	mu   sync.Mutex
	// done is set once the drain has ended: whatever registers later is
	// ended at once.
	done bool
	head drainNode // sentinel of a circular list
}

// drainNode is one registered operation: cancel ends it, and the session,
// when set, is marked drained first, so that the operation, seeing its
// context end, knows why.
type drainNode struct {
	prev, next *drainNode
	s          *session
	cancel     func()
}

// watch arms the list on Runner.Drain, once per Runner.
func (r *Runner) watchDrain() {
	r.drain.once.Do(func() {
		r.drain.head.prev, r.drain.head.next = &r.drain.head, &r.drain.head
		context.AfterFunc(r.Drain, r.drain.end)
	})
}

// add registers n until remove; after the drain it ends n at once. Without
// a Runner.Drain it does nothing.
func (r *Runner) addDrain(n *drainNode) {
	if r.Drain == nil {
		return
	}
	r.watchDrain()
	l := &r.drain
	l.mu.Lock()
	if l.done {
		l.mu.Unlock()
		n.end()
		return
	}
	n.prev, n.next = l.head.prev, &l.head
	l.head.prev.next = n
	l.head.prev = n
	l.mu.Unlock()
}

// removeDrain unregisters n (a no-op when it was never added, or already
// ended by the drain).
func (r *Runner) removeDrain(n *drainNode) {
	if r.Drain == nil {
		return
	}
	l := &r.drain
	l.mu.Lock()
	if n.next != nil {
		n.prev.next, n.next.prev = n.next, n.prev
		n.prev, n.next = nil, nil
	}
	l.mu.Unlock()
}

// end ends everything registered, outside the lock: a cancel may run code
// of its own.
func (l *drainList) end() {
	l.mu.Lock()
	l.done = true
	var cut []*drainNode
	for n := l.head.next; n != &l.head; {
		next := n.next
		n.prev, n.next = nil, nil
		cut = append(cut, n)
		n = next
	}
	l.head.prev, l.head.next = &l.head, &l.head
	l.mu.Unlock()
	for _, n := range cut {
		n.end()
	}
}

func (n *drainNode) end() {
	if n.s != nil {
		n.s.cutByDrain.Store(true)
	}
	n.cancel()
}

// drainable returns a context derived from ctx that the drain ends, marking
// s drained (s may be nil), and a function that unregisters and cancels it.
// For the rare waits outside an attempt (a retry's backoff, a
// passthrough), which pay for it.
func (r *Runner) drainable(ctx context.Context, s *session) (context.Context, func()) {
	if r.Drain == nil {
		return ctx, func() {}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	n := &drainNode{s: s, cancel: func() { cancel(errDrained) }}
	r.addDrain(n)
	return ctx, func() {
		r.removeDrain(n)
		cancel(nil)
	}
}

// drainedBeforeAnswer answers a request the drain ended before any upstream
// answered: a 503 in the app's shape, so that its SDK retries (against a
// detour that is not shutting down, behind a Service). Only one lane
// writes it; the others have nothing to add.
func (s *session) drainedBeforeAnswer(ln *lane) {
	if !s.claim(ln) {
		return
	}
	s.rec.Error = "drained: still waiting for an upstream when the drain timeout ran out"
	s.writeAppError(http.StatusServiceUnavailable, policy.ClassOverloaded, drainedMessage, time.Second)
}

// drainCut ends a committed stream at the drain: the attempt is logged with
// outcome drained, and the app gets the in-stream error event an upstream
// cut would give it, in its own shape.
func (a *attempt) drainCut(out *streamOut) {
	s := a.s
	s.mu.Lock()
	if a.idx >= 0 {
		r := &s.rec.Attempts[a.idx]
		r.Outcome, r.Class, r.Reason = OutcomeDrained, string(policy.ClassOverloaded), "stream still open when the drain timeout ran out"
	}
	s.mu.Unlock()
	s.rec.Error = "drained: stream still open when the drain timeout ran out"
	out.write(a.conv.errorEvent(s.app, rewrite.AppError{Status: http.StatusServiceUnavailable, Class: string(policy.ClassOverloaded), Message: drainedMessage}))
}
