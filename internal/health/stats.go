package health

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// The window that recent success rate and latency percentiles are computed
// over: the last WindowSize finished attempts of an upstream, of which only
// those younger than WindowAge count. A fixed ring per upstream keeps memory
// bounded however busy detour is, and the age limit keeps a quiet upstream's
// numbers from describing an outage that ended an hour ago.
const (
	WindowSize = 128
	WindowAge  = 5 * time.Minute
)

// Result is how a finished attempt counts towards an upstream's recent
// success rate.
type Result int

// The results an attempt can have.
const (
	// Neutral attempts are not counted: the app went away, or the request
	// itself was at fault (invalid, too long, filtered), which says nothing
	// about the upstream.
	Neutral Result = iota
	// Success: the upstream answered.
	Success
	// Failure: the upstream failed in a way that is its own.
	Failure
)

// sample is one finished attempt in an upstream's window.
type sample struct {
	at      int64 // unix nanoseconds
	latency time.Duration
	ok      bool
}

// upstreamStats is one upstream's counters. The counters are atomics so that
// Begin and End cost two atomic adds on the request path; only End's ring
// write takes the (per-upstream, uncontended in practice) mutex.
type upstreamStats struct {
	inFlight atomic.Int64
	requests atomic.Uint64

	mu   sync.Mutex
	ring [WindowSize]sample
	n    int // samples held, at most WindowSize
	next int // where the next sample goes
}

// stats returns the named upstream's counters, creating them on first use.
// Names come from the policy, so the map stays as small as the set of
// upstreams ever configured.
func (r *Registry) stats(name string) *upstreamStats {
	if v, ok := r.counters.Load(name); ok {
		return v.(*upstreamStats)
	}
	v, _ := r.counters.LoadOrStore(name, &upstreamStats{})
	return v.(*upstreamStats)
}

// Begin marks one attempt on the named upstream as in flight. Every Begin
// must be followed by exactly one End for the same name.
func (r *Registry) Begin(name string) {
	st := r.stats(name)
	st.inFlight.Add(1)
	st.requests.Add(1)
}

// End marks an attempt begun with Begin as finished at now, with its result
// and, for a success, its latency (what the percentiles report).
func (r *Registry) End(name string, res Result, latency time.Duration, now time.Time) {
	st := r.stats(name)
	st.inFlight.Add(-1)
	if res == Neutral {
		return
	}
	st.mu.Lock()
	st.ring[st.next] = sample{at: now.UnixNano(), latency: latency, ok: res == Success}
	st.next = (st.next + 1) % WindowSize
	if st.n < WindowSize {
		st.n++
	}
	st.mu.Unlock()
}

// Stats is a snapshot of one upstream's traffic.
type Stats struct {
	// InFlight is how many attempts are open now (a stream counts until its
	// last event is through).
	InFlight int64
	// Requests is how many attempts were sent since start.
	Requests uint64
	// Samples is how many counted attempts the window holds; SuccessRate
	// (0 to 1) means nothing when it is 0.
	Samples     int
	SuccessRate float64
	// Successes is how many of Samples succeeded: the population of P50 and
	// P95, which are zero when it is 0. Latency is measured from sending the
	// request to the answer's commit point (a whole body, or a stream's
	// first content), so failures, which are often fast 429s, do not pull
	// the percentiles down.
	Successes int
	P50, P95  time.Duration
}

// Stats returns the named upstream's snapshot at now. It copies at most
// WindowSize samples and sorts them: meant for /status, not the request
// path.
func (r *Registry) Stats(name string, now time.Time) Stats {
	v, ok := r.counters.Load(name)
	if !ok {
		return Stats{}
	}
	st := v.(*upstreamStats)
	out := Stats{InFlight: st.inFlight.Load(), Requests: st.requests.Load()}
	oldest := now.Add(-WindowAge).UnixNano()
	lat := make([]time.Duration, 0, WindowSize)
	st.mu.Lock()
	for i := 0; i < st.n; i++ {
		s := st.ring[i]
		if s.at <= oldest { // only samples younger than WindowAge
			continue
		}
		out.Samples++
		if s.ok {
			lat = append(lat, s.latency)
		}
	}
	st.mu.Unlock()
	out.Successes = len(lat)
	if out.Samples > 0 {
		out.SuccessRate = float64(out.Successes) / float64(out.Samples)
	}
	if len(lat) > 0 {
		slices.Sort(lat)
		out.P50, out.P95 = percentile(lat, 50), percentile(lat, 95)
	}
	return out
}

// percentile is the nearest-rank percentile of sorted, which is not empty.
func percentile(sorted []time.Duration, p int) time.Duration {
	rank := (p*len(sorted) + 99) / 100 // ceil(p/100 * n)
	if rank < 1 {
		rank = 1
	}
	return sorted[rank-1]
}
