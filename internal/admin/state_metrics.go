package admin

import (
	"github.com/detour-proxy/detour/internal/health"
	"github.com/detour-proxy/detour/internal/metrics"
)

// stateMetrics are the state backend's: read from the health registry's
// Fleet when scraped, so they cost nothing between scrapes. A memory backend
// is always up and never falls back.
func stateMetrics(h *health.Registry) []metrics.Collector {
	return []metrics.Collector{
		metrics.NewGaugeFunc(Namespace+"_state_backend_up",
			"1 while the state backend (state.backend) answers in time, else 0: detour then decides with its own state alone. Always 1 for memory.",
			func() float64 {
				if h.FleetStatus().Up {
					return 1
				}
				return 0
			}),
		metrics.NewCounterFunc(Namespace+"_state_fallbacks_total",
			"Decisions taken with local state, and fleet updates not sent, because the state backend did not answer in time or was down.",
			func() float64 { return float64(h.FleetStatus().Fallbacks) }),
	}
}
