package chain

import (
	"runtime"
	"sync/atomic"
)

// bodyBudget counts the request body bytes the process holds, over every
// request in flight. Each request body is buffered whole so that it can be
// replayed to every upstream tried; without a process-wide bound a few
// large bodies at once take the process past its memory limit, whatever the
// per-request limit.
//
// The capacity is passed to every reservation rather than kept, because it
// comes from the policy, which a reload may change: a lower capacity refuses
// new reservations until enough of the old ones are released, and never
// disturbs the requests that hold them.
//
// Released bodies are garbage until the collector runs, and Go's collector
// (GOGC=100) lets the heap grow to twice what was live at its last run
// before it runs again: wave after wave of large bodies would then stack
// new bodies on the garbage of the last ones, up to twice the budget. So
// once an eighth of the capacity has been released since the last time, a
// collection is started, and what the bodies cost stays near the budget.
type bodyBudget struct {
	used atomic.Int64
	// released counts the bytes given back since the last collection this
	// budget started; collecting is set while one runs.
	released   atomic.Int64
	collecting atomic.Bool
	// collect runs a collection; runtime.GC unless a test counts them.
	collect func()
}

// reserve takes n bytes if they fit under capacity.
func (b *bodyBudget) reserve(n, capacity int64) bool {
	for {
		cur := b.used.Load()
		if cur+n > capacity {
			return false
		}
		if b.used.CompareAndSwap(cur, cur+n) {
			return true
		}
	}
}

// release gives back n reserved bytes, and starts a collection when enough
// has been released since the last one (see bodyBudget).
func (b *bodyBudget) release(n, capacity int64) {
	if n <= 0 {
		return
	}
	b.used.Add(-n)
	if b.released.Add(n) < capacity/8 || !b.collecting.CompareAndSwap(false, true) {
		return
	}
	b.released.Store(0)
	go func() {
		defer b.collecting.Store(false)
		if b.collect != nil {
			b.collect()
			return
		}
		runtime.GC()
	}()
}

// BufferedBytes is how many request body bytes the process holds right
// now (the gauge detour_buffered_bytes).
func (r *Runner) BufferedBytes() int64 { return r.budget.used.Load() }
