package health

import "time"

// sharedSpend is the SpendStore of a fleet: each member's spend goes into
// the Registry's shared counters (AddShared), which a Fleet sums over every
// member sharing its state backend, so that a budget holds for the fleet
// rather than per pod. A counter lives as long as its period plus a day,
// after which nobody reads its key again.
type sharedSpend struct {
	r   *Registry
	now func() time.Time
}

// FleetSpend returns the SpendStore that keeps budget spend in r's shared
// counters, fleet-wide once a Fleet is attached (SetFleet); now is the
// clock the counters' lifetimes are measured on.
func FleetSpend(r *Registry, now func() time.Time) SpendStore {
	if now == nil {
		now = time.Now
	}
	return sharedSpend{r: r, now: now}
}

const spendKeyPrefix = "spend:"

// Add implements SpendStore.
func (s sharedSpend) Add(key string, usd float64, periodEnd time.Time) {
	now := s.now()
	s.r.AddShared(spendKeyPrefix+key, usd, periodEnd.Sub(now)+24*time.Hour, now)
}

// Spent implements SpendStore.
func (s sharedSpend) Spent(key string) float64 { return s.r.Shared(spendKeyPrefix+key, s.now()) }
