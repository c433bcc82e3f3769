package admin

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/detour-proxy/detour/internal/health"
)

// stateMetrics are the state backend's: read from the health registry's
// Fleet when scraped, so they cost nothing between scrapes. A memory backend
// is always up and never falls back.
func stateMetrics(h *health.Registry) []prometheus.Collector {
	return []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: Namespace, Name: "state_backend_up",
			Help: "1 while the state backend (state.backend) answers in time, else 0: detour then decides with its own state alone. Always 1 for memory.",
		}, func() float64 {
			if h.FleetStatus().Up {
				return 1
			}
			return 0
		}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: Namespace, Name: "state_fallbacks_total",
			Help: "Decisions taken with local state, and fleet updates not sent, because the state backend did not answer in time or was down.",
		}, func() float64 { return float64(h.FleetStatus().Fallbacks) }),
	}
}
