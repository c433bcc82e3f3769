package proxy

import (
	"time"

	"github.com/rs/zerolog"

	"github.com/detour-proxy/detour/internal/fleet"
	"github.com/detour-proxy/detour/internal/health"
	"github.com/detour-proxy/detour/policy"
)

// startState attaches the policy's state backend to hr: nothing for
// memory; for redis a fleet.Store, with budget spend kept in its shared
// counters, which starts even when Redis is down (the
// process then serves with its own state until Redis answers). The backend
// is chosen at start: a reload that changes state.backend is in effect at
// the next start. stop is never nil.
func startState(pol *policy.Compiled, hr *health.Registry, logger zerolog.Logger, now func() time.Time) (stop func(), err error) {
	if pol.State.Backend != policy.StateRedis {
		return func() {}, nil
	}
	s, err := fleet.Start(fleet.Options{Redis: pol.State.Redis, Registry: hr, Log: logger, Now: now})
	if err != nil {
		return nil, err
	}
	// Budgets are the fleet's too: every member's spend is summed in Redis.
	hr.SetSpendStore(health.FleetSpend(hr, now))
	return func() { _ = s.Close() }, nil
}
