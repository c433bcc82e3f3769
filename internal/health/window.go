package health

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Windows keeps, per upstream name, the recent window a scored selection
// judges an upstream by: its p95 latency, its failure rate and how many
// samples they rest on, over the same window as Stats (the last WindowSize
// counted attempts younger than WindowAge). Unlike Stats, which sorts a
// copy of the samples for /status, it is read on the request path, once per
// candidate upstream: a read is a map lookup and a few atomic loads, with
// no allocation. The work is done by the writer, which keeps the window's
// successful latencies sorted as it adds and evicts samples (an insertion
// into at most WindowSize values), and by the first reader that finds the
// oldest sample expired.
//
// The zero value is ready to use. Every method takes now and none reads the
// clock, like the rest of the package.
type Windows struct {
	m sync.Map // name → *window
}

// Window is a snapshot of one upstream's recent window.
type Window struct {
	// Samples is how many counted attempts (successes and failures) the
	// window holds; Successes how many of them succeeded.
	Samples, Successes int
	// InFlight is how many attempts are open now.
	InFlight int
	// P95 is the nearest-rank 95th percentile of the successes' latency;
	// zero when there is none.
	P95 time.Duration
	// FailureRate is (Samples − Successes) / Samples; zero when Samples is.
	FailureRate float64
}

type windowSample struct {
	at      int64 // unix nanoseconds
	latency time.Duration
	ok      bool
}

// window is one upstream's. Readers load the published fields; writers
// hold mu.
type window struct {
	inFlight  atomic.Int64
	samples   atomic.Int64
	successes atomic.Int64
	p95       atomic.Int64
	// oldest is the time of the oldest sample (unix ns), 0 when empty: a
	// reader that finds it expired evicts.
	oldest atomic.Int64

	mu   sync.Mutex
	ring [WindowSize]windowSample // in time order from head
	head int
	n    int
	// sorted holds the latencies of the successes in ring, ascending.
	sorted [WindowSize]time.Duration
	ns     int
}

func (w *Windows) get(name string) *window {
	if v, ok := w.m.Load(name); ok {
		return v.(*window)
	}
	v, _ := w.m.LoadOrStore(name, &window{})
	return v.(*window)
}

// Begin marks an attempt on the named upstream as in flight; every Begin
// is followed by one Record.
func (w *Windows) Begin(name string) { w.get(name).inFlight.Add(1) }

// Record ends an attempt begun with Begin, at now, with its result and, for
// a success, its latency. A Neutral result only ends it.
func (w *Windows) Record(name string, res Result, latency time.Duration, now time.Time) {
	win := w.get(name)
	win.inFlight.Add(-1)
	if res == Neutral {
		return
	}
	win.mu.Lock()
	defer win.mu.Unlock()
	win.expire(now)
	if win.n == WindowSize {
		win.evict()
	}
	win.ring[(win.head+win.n)%WindowSize] = windowSample{at: now.UnixNano(), latency: latency, ok: res == Success}
	win.n++
	if res == Success {
		i, _ := slices.BinarySearch(win.sorted[:win.ns], latency)
		copy(win.sorted[i+1:win.ns+1], win.sorted[i:win.ns])
		win.sorted[i] = latency
		win.ns++
	}
	win.publish()
}

// Read returns the named upstream's window at now.
func (w *Windows) Read(name string, now time.Time) Window {
	v, ok := w.m.Load(name)
	if !ok {
		return Window{}
	}
	win := v.(*window)
	if o := win.oldest.Load(); o != 0 && o <= now.Add(-WindowAge).UnixNano() {
		win.mu.Lock()
		win.expire(now)
		win.publish()
		win.mu.Unlock()
	}
	out := Window{
		Samples:   int(win.samples.Load()),
		Successes: int(win.successes.Load()),
		InFlight:  int(win.inFlight.Load()),
		P95:       time.Duration(win.p95.Load()),
	}
	if out.Samples > 0 {
		out.FailureRate = float64(out.Samples-out.Successes) / float64(out.Samples)
	}
	return out
}

// expire evicts the samples no younger than WindowAge at now (only those
// younger count, as in Stats).
func (win *window) expire(now time.Time) {
	cutoff := now.Add(-WindowAge).UnixNano()
	for win.n > 0 && win.ring[win.head].at <= cutoff {
		win.evict()
	}
}

// evict drops the oldest sample.
func (win *window) evict() {
	s := win.ring[win.head]
	win.head = (win.head + 1) % WindowSize
	win.n--
	if s.ok {
		if i, found := slices.BinarySearch(win.sorted[:win.ns], s.latency); found {
			copy(win.sorted[i:win.ns-1], win.sorted[i+1:win.ns])
			win.ns--
		}
	}
}

// publish makes the window's summary visible to readers.
func (win *window) publish() {
	win.samples.Store(int64(win.n))
	win.successes.Store(int64(win.ns))
	var p95 time.Duration
	if win.ns > 0 {
		p95 = percentile(win.sorted[:win.ns], 95)
	}
	win.p95.Store(int64(p95))
	var oldest int64
	if win.n > 0 {
		oldest = win.ring[win.head].at
	}
	win.oldest.Store(oldest)
}
