package policy

import "time"

// MaxBreakerRecovery bounds breaker.recovery: a ramp longer than a day
// would keep a recovered upstream starved long after anyone remembers why.
const MaxBreakerRecovery = 24 * time.Hour

// breakerRecovery validates breaker.recovery: a duration of at most
// MaxBreakerRecovery, and only with the breaker on (without one nothing
// closes, so nothing would ramp). Zero, the default, is no ramp.
func (k *compiler) breakerRecovery(d Duration, enabled bool) time.Duration {
	v := k.duration("breaker.recovery", d, 0)
	switch {
	case v == 0:
		return 0
	case v > MaxBreakerRecovery:
		k.errorf("breaker.recovery", "must be at most %s; got %s", MaxBreakerRecovery, v)
		return 0
	case !enabled:
		k.errorf("breaker.recovery", "needs breaker.enabled: without a breaker nothing closes, so nothing ramps")
		return 0
	}
	return v
}
