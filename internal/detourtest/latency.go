package detourtest

import (
	"fmt"
	"sort"
	"time"
)

// Latencies is a set of measured durations.
type Latencies []time.Duration

// Percentile returns the p-th percentile (0 < p ≤ 100), nearest rank.
func (l Latencies) Percentile(p float64) time.Duration {
	if len(l) == 0 {
		return 0
	}
	s := append(Latencies(nil), l...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	rank := int(p/100*float64(len(s))+0.5) - 1
	if rank < 0 {
		rank = 0
	}
	if rank >= len(s) {
		rank = len(s) - 1
	}
	return s[rank]
}

// Summary formats p50/p90/p99 in microseconds.
func (l Latencies) Summary() string {
	return fmt.Sprintf("n=%d p50=%.0fµs p90=%.0fµs p99=%.0fµs", len(l),
		us(l.Percentile(50)), us(l.Percentile(90)), us(l.Percentile(99)))
}

func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }

// Interleave runs each named function once per round, for rounds rounds,
// in a rotating order, and returns each function's latencies. Interleaving
// makes the variants share the same machine noise, so that their difference
// means something on a busy 2-core box.
func Interleave(rounds int, fns map[string]func() error) (map[string]Latencies, error) {
	names := make([]string, 0, len(fns))
	for n := range fns {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make(map[string]Latencies, len(fns))
	for r := 0; r < rounds; r++ {
		for i := range names {
			n := names[(i+r)%len(names)]
			start := time.Now()
			if err := fns[n](); err != nil {
				return nil, fmt.Errorf("%s, round %d: %w", n, r, err)
			}
			out[n] = append(out[n], time.Since(start))
		}
	}
	return out, nil
}
