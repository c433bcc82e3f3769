package sim

import (
	"fmt"
	"sync"
)

// tableMemo shares the tables of one set of options between runs: the
// package's tests read one deterministic table from several tests instead of
// running it again for each. Run uses it only when Options.memo is set,
// which only tests do.
type tableMemo struct {
	mu   sync.Mutex
	runs map[string]*memoRun
}

// memoRun is one table's run, made once.
type memoRun struct {
	once sync.Once
	v    any
	err  error
}

// memoTable returns table's result for opts from m, running it the first
// time; with m nil it just runs it. The key holds every option a table reads,
// so runs with other options never share.
func memoTable[T any](m *tableMemo, opts Options, table string, run func() (T, error)) (T, error) {
	if m == nil {
		return run()
	}
	key := fmt.Sprintf("%s seed=%d requests=%d latency=%d quota=%s@%d breaker=%s routing=%d redis=%q",
		table, opts.Seed, opts.Requests, opts.LatencyRequests, opts.QuotaRun, opts.QuotaAt, opts.BreakerRun, opts.RoutingRequests, opts.RedisURL)
	m.mu.Lock()
	if m.runs == nil {
		m.runs = map[string]*memoRun{}
	}
	r := m.runs[key]
	if r == nil {
		r = &memoRun{}
		m.runs[key] = r
	}
	m.mu.Unlock()
	r.once.Do(func() { r.v, r.err = run() })
	v, _ := r.v.(T)
	return v, r.err
}
