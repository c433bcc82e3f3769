package admin

import (
	"time"

	"github.com/detour-proxy/detour/internal/health"
	"github.com/detour-proxy/detour/internal/metrics"
	"github.com/detour-proxy/detour/policy"
)

// BudgetJSON is one spend budget in /status.
type BudgetJSON struct {
	Name string `json:"name"`
	// Upstream or Route is what the budget counts.
	Upstream string  `json:"upstream,omitempty"`
	Route    string  `json:"route,omitempty"`
	TimeZone string  `json:"time_zone"`
	WarnAt   float64 `json:"warn_at"`
	// Daily and Monthly are the current periods; null when the budget has
	// no such limit.
	Daily   *BudgetPeriodJSON `json:"daily"`
	Monthly *BudgetPeriodJSON `json:"monthly"`
}

// BudgetPeriodJSON is a budget's current day or month.
type BudgetPeriodJSON struct {
	// SpentUSD of LimitUSD so far; LeftUSD is what remains (0 when spent).
	SpentUSD float64 `json:"spent_usd"`
	LimitUSD float64 `json:"limit_usd"`
	LeftUSD  float64 `json:"left_usd"`
	// Exhausted: the covered upstreams are skipped (budget_exhausted).
	Exhausted bool `json:"exhausted"`
	// ResetsAt is the period's end: midnight, or the 1st, in time_zone.
	ResetsAt time.Time `json:"resets_at"`
}

func budgetsOf(c *policy.Compiled, h *health.Registry, now time.Time) []BudgetJSON {
	out := make([]BudgetJSON, 0, len(c.Budgets))
	var buf [2]policy.Period
	for _, b := range c.Budgets {
		j := BudgetJSON{Name: b.Name, Upstream: b.Upstream, Route: b.Route, TimeZone: b.TimeZone, WarnAt: b.WarnAt}
		for _, p := range b.Periods(now, &buf) {
			spent := h.Spent(p.Key)
			pj := &BudgetPeriodJSON{SpentUSD: spent, LimitUSD: p.Limit, LeftUSD: max(p.Limit-spent, 0), Exhausted: spent >= p.Limit, ResetsAt: p.End.UTC()}
			if p.Kind == policy.PeriodDaily {
				j.Daily = pj
			} else {
				j.Monthly = pj
			}
		}
		out = append(out, j)
	}
	return out
}

// budgetCollector reports each budget's spend against its limits when
// scraped, as the state collector does for breakers: the spend lives in
// the health registry, which a fleet may share.
type budgetCollector struct {
	store  *policy.Store
	health *health.Registry
	now    func() time.Time
}

var budgetUsedDesc = metrics.NewDesc(Namespace+"_budget_used_ratio",
	"Spend / limit of each budget's current period (period daily or monthly); at 1 or more the budget is spent and its upstreams are skipped (budget_exhausted).",
	metrics.KindGauge, "budget", "period")

func (c *budgetCollector) Collect(s *metrics.Scrape) {
	pol := c.store.Load()
	if pol == nil {
		return
	}
	now := c.now()
	var buf [2]policy.Period
	for _, b := range pol.Budgets {
		for _, p := range b.Periods(now, &buf) {
			s.Add(budgetUsedDesc, c.health.Spent(p.Key)/p.Limit, b.Name, p.Kind)
		}
	}
}
