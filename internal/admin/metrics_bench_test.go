package admin

import (
	"testing"
	"time"

	"github.com/detour-proxy/detour/internal/chain"
	"github.com/detour-proxy/detour/internal/health"
	"github.com/detour-proxy/detour/policy"
	"github.com/detour-proxy/detour/rewrite"
)

// BenchmarkObserve: what counting one finished request costs the chain's
// OnRecord: a request that fell over once and was answered, with usage,
// cost and a cache result.
func BenchmarkObserve(b *testing.B) {
	m := NewMetrics(policy.NewStore(&policy.Compiled{Hash: "00000000", Fingerprint: "f"}), health.New())
	ms := time.Millisecond
	r := &chain.Record{
		Route: "chat", AnsweredBy: "backup", Status: 200, TTFB: 450 * ms, Cache: chain.CacheStored,
		Usage: rewrite.Usage{Input: 1200, Output: 89}, CostUSD: 0.000123,
		Attempts: []chain.AttemptRecord{
			{Upstream: "primary", Outcome: chain.OutcomeFallback, Class: "overloaded", Duration: 120 * ms, Headers: 100 * ms},
			{Upstream: "backup", Outcome: chain.OutcomeOK, Duration: 300 * ms, Headers: 250 * ms},
		},
	}
	b.ReportAllocs()
	for b.Loop() {
		m.Observe(r)
	}
}
