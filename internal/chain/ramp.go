package chain

// Gradual recovery (breaker.recovery): an upstream whose breaker has just
// closed gets its traffic back in steps rather than all at once, so that an
// upstream that passed its few half-open probes but is still weak (a
// vendor's region coming back, a cold cache, a quota only just refilled) is
// not flattened again by the whole fleet's share the moment it closes.
//
// The breaker itself knows nothing of this: the ramp reads its state
// through health.Registry.Breaker (State and Since, the close time) and
// only skips; it never counts anything against the breaker.

import (
	"strconv"
	"time"

	"github.com/detour-proxy/detour/internal/health"
	"github.com/detour-proxy/detour/policy"
)

// rampSteps are the shares of requests a recovering upstream is admitted
// for: recovery is cut into len(rampSteps) equal steps, the first admitting
// 10 %, the second 50 %, the last and everything after 100 %.
var rampSteps = [...]struct {
	share float64
	pct   string
}{{0.10, "10 %"}, {0.50, "50 %"}, {1, "100 %"}}

// rampStep is the step of a ramp of length recovery that elapsed after the
// close falls in; len(rampSteps) once the ramp is over.
func rampStep(elapsed, recovery time.Duration) int {
	if elapsed < 0 {
		// A clock that went back: the ramp starts again from its first
		// step rather than skipping it.
		return 0
	}
	if elapsed >= recovery {
		return len(rampSteps)
	}
	// recovery is at most policy.MaxBreakerRecovery, so this cannot
	// overflow.
	return int(elapsed * time.Duration(len(rampSteps)) / recovery)
}

// RecoveryStep says where a ramp of length recovery stands at now for a
// breaker that closed at since: the share of requests admitted ("10 %") and
// when that step ends. ok is false when there is no ramp (recovery off, a
// zero since, or the ramp over or at its 100 % step). For `detour policy
// explain`, which judges a running detour's breakers by the same steps.
func RecoveryStep(since, now time.Time, recovery time.Duration) (share string, until time.Time, ok bool) {
	if recovery <= 0 || since.IsZero() {
		return "", time.Time{}, false
	}
	i := rampStep(now.Sub(since), recovery)
	if i >= len(rampSteps) || rampSteps[i].share >= 1 {
		return "", time.Time{}, false
	}
	return rampSteps[i].pct, since.Add(recovery * time.Duration(i+1) / time.Duration(len(rampSteps))), true
}

// rampedAway reports whether this request skips u because u is recovering:
// its breaker closed less than breaker.recovery ago and this request's draw
// (Runner.Rand) fell outside the share of its step. The skip is recorded
// with its reason. The last upstream of a chain is never ramped away:
// nothing after it would answer.
func (s *session) rampedAway(u *policy.Upstream, last bool, now time.Time) bool {
	recovery := s.pol.Breaker.Recovery
	if recovery <= 0 || last {
		return false
	}
	b := s.r.Health.Breaker(u.Name, now)
	if b.State != health.BreakerClosed || b.Since.IsZero() {
		// Zero Since: a breaker that never opened (or was reset), which
		// has nothing to recover from.
		return false
	}
	i := rampStep(now.Sub(b.Since), recovery)
	if i >= len(rampSteps) || rampSteps[i].share >= 1 {
		return false
	}
	// The top 53 bits of the draw, uniform in [0, 1), as weighted
	// selection reads them.
	if float64(s.r.random()>>11)/(1<<53) < rampSteps[i].share {
		return false
	}
	_, stepEnd, _ := RecoveryStep(b.Since, now, recovery)
	s.skip(u.Name, "recovering: "+rampSteps[i].pct+" of traffic until "+stepEnd.UTC().Format(time.RFC3339)+
		" (breaker closed "+strconv.FormatFloat(now.Sub(b.Since).Seconds(), 'f', -1, 64)+"s ago; breaker.recovery "+recovery.String()+")")
	// The skip is this request's draw, not the upstream's state: the next
	// request may be admitted, so an app told to come back is told soon.
	s.comesBack(now.Add(time.Second), false)
	return true
}
