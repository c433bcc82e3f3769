package admin

import (
	"github.com/detour-proxy/detour/internal/metrics"
	"github.com/detour-proxy/detour/policy"
)

// collectLastUpstreams reports detour_chain_last_upstream: which upstream
// ends each route's chains. Alone it says little; joined with
// detour_cooldown_active or detour_breaker_state on "upstream" it is the
// alert "the last resort of a route is out" (charts/detour/rules), which
// cannot be written from per-upstream gauges alone because only the policy
// knows the chains' order.
func collectLastUpstreams(s *metrics.Scrape, pol *policy.Compiled) {
	for _, r := range pol.Routes {
		seen := map[string]bool{}
		emit := func(chain []*policy.Upstream) {
			if len(chain) == 0 {
				return
			}
			last := chain[len(chain)-1].Name
			if seen[last] {
				return
			}
			seen[last] = true
			s.Add(lastUpstreamDesc, 1, r.Name, last)
		}
		emit(r.Chain)
		for _, tc := range r.Tiers {
			emit(tc)
		}
	}
}
