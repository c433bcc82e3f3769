package proxy

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// heapFloor is the least heap goal `detour serve` lets the garbage
// collector aim for (Options.HeapFloor).
//
// detour's live heap is small — about 2 MiB: the policy, the metrics, the
// pools — and the collector's default (GOGC=100) sets the next collection
// at twice the live heap, never below 4 MiB. A request allocates some
// 10 KiB, so under load a collection ran every 200 requests or so, each
// marking the whole live heap, the goroutines' stacks and the globals
// again, and taking a share of the core from the requests: on the one
// core the harness gives it, about a tenth of detour's CPU per request
// (internal/loadharness profile), against half that for a bare
// httputil.ReverseProxy, whose live heap is smaller. With the goal at
// 16 MiB a collection runs about five times less often.
//
// The price is memory while the heap is small: up to the floor of it,
// some 12 MiB more resident under load than with the default. Once the
// live heap is large (open streams, big bodies), the floor no longer
// applies and the collector keeps its default pace, so detour's memory
// then is what it was.
const heapFloor = 16 << 20

// runtimeHeapMinimum is the Go runtime's own floor of the heap goal at
// GOGC=100 (it scales with GOGC).
const runtimeHeapMinimum = 4 << 20

// heapFloorPercent is the GOGC that makes the collector's next goal at
// least floor for a live heap of live bytes, when a cycle also scans
// roots bytes of stacks and globals: the runtime's goal is
// live + (live + roots) × GOGC/100, and at least runtimeHeapMinimum ×
// GOGC/100. It is never below base (the GOGC in effect without the
// floor), nor above the percent whose own minimum is the floor, which
// already reaches it however small the live heap.
func heapFloorPercent(live, roots uint64, floor uint64, base int) int {
	top := int(uint64(base) * floor / runtimeHeapMinimum)
	if top <= base {
		return base
	}
	if live >= floor {
		return base
	}
	p := top
	if live+roots > 0 {
		if q := 100 * (floor - live) / (live + roots); q < uint64(top) {
			p = int(q)
		}
	}
	return max(p, base)
}

// gcFloor keeps the heap goal at floor: after every collection it sets
// GOGC from the live heap that collection found (heapFloorPercent).
type gcFloor struct {
	floor uint64
	base  int
	// mu orders the adjustments, which run on the runtime's cleanup
	// goroutine, with stop.
	mu      sync.Mutex
	stopped bool
	percent int
	samples []metrics.Sample
}

// gcSentinel is garbage as soon as it is made; its cleanup runs after the
// collection that finds it so. It holds a pointer, so that it is never one
// of the tiny allocations that share a block (and may outlive a cycle).
type gcSentinel struct{ _ *byte }

// startHeapFloor keeps the collector's heap goal at least heapFloor until
// stop is called, which puts back the GOGC in effect before (see
// newGCFloor for when it does nothing).
func startHeapFloor() (stop func()) {
	f := newGCFloor(heapFloor)
	if f == nil {
		return func() {}
	}
	f.arm()
	return f.stop
}

// newGCFloor returns a gcFloor for floor, not yet armed, or nil when GOGC
// is set in the environment (the operator chose the collector's pace) or
// the collector is off. Armed, it makes its first adjustment after the
// next collection: an idle process, which makes none, keeps its memory as
// it is.
func newGCFloor(floor uint64) *gcFloor {
	if os.Getenv("GOGC") != "" {
		return nil
	}
	base := gcPercent()
	if base <= 0 {
		return nil
	}
	return &gcFloor{floor: floor, base: base, percent: base, samples: []metrics.Sample{
		{Name: "/gc/heap/live:bytes"},
		{Name: "/gc/scan/stack:bytes"},
		{Name: "/gc/scan/globals:bytes"},
	}}
}

// gcPercent is the GOGC in effect (-1: off).
func gcPercent() int {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return -1
	}
	return int(s[0].Value.Uint64())
}

// arm sets a sentinel for the next collection.
func (f *gcFloor) arm() {
	runtime.AddCleanup(new(gcSentinel), (*gcFloor).collected, f)
}

// collected runs after a collection: it sets GOGC for the live heap the
// collection found and arms the next sentinel.
func (f *gcFloor) collected() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stopped {
		return
	}
	metrics.Read(f.samples)
	var v [3]uint64
	for i, s := range f.samples {
		if s.Value.Kind() == metrics.KindUint64 {
			v[i] = s.Value.Uint64()
		}
	}
	if p := heapFloorPercent(v[0], v[1]+v[2], f.floor, f.base); p != f.percent {
		f.percent = p
		debug.SetGCPercent(p)
	}
	f.arm()
}

func (f *gcFloor) stop() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stopped {
		return
	}
	f.stopped = true
	if f.percent != f.base {
		debug.SetGCPercent(f.base)
	}
}
