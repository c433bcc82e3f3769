package admin

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/detour-proxy/detour/internal/health"
	"github.com/detour-proxy/detour/policy"
)

// TestMetricsNameTheLastUpstreamOfEveryChain: detour_chain_last_upstream
// has one series per route and distinct last upstream, covering the plain
// chain and every tier chain, and none for an upstream that ends no chain.
// The alert DetourLastUpstreamCoolingDown joins on it.
func TestMetricsNameTheLastUpstreamOfEveryChain(t *testing.T) {
	t.Parallel()
	a, b, c, d := &policy.Upstream{Name: "a"}, &policy.Upstream{Name: "b"}, &policy.Upstream{Name: "c"}, &policy.Upstream{Name: "d"}
	store := policy.NewStore(&policy.Compiled{Hash: "00000000", Fingerprint: "f",
		Upstreams: map[string]*policy.Upstream{"a": a, "b": b, "c": c, "d": d},
		Routes: []*policy.Route{
			{Name: "plain", Chain: []*policy.Upstream{a, b}},
			{Name: "tiered", Chain: []*policy.Upstream{a, c}, Tiers: map[string][]*policy.Upstream{
				"hard": {b, a, c}, // ends like the undecided chain: one series
				"easy": {c, d},
			}},
		}})
	m := NewMetrics(store, health.New())
	_, _, text := do(t, m.Handler(), httptest.NewRequest("GET", "/metrics", nil))
	want := []string{
		`detour_chain_last_upstream{route="plain",upstream="b"} 1`,
		`detour_chain_last_upstream{route="tiered",upstream="c"} 1`,
		`detour_chain_last_upstream{route="tiered",upstream="d"} 1`,
	}
	for _, line := range want {
		if !strings.Contains(text, line+"\n") {
			t.Errorf("metrics lack %s", line)
		}
	}
	if n := strings.Count(text, "detour_chain_last_upstream{"); n != len(want) {
		t.Errorf("%d detour_chain_last_upstream series; want %d\n%s", n, len(want), text)
	}
}
