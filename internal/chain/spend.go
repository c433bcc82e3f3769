package chain

import (
	"strconv"
	"time"

	"github.com/detour-proxy/detour/policy"
	"github.com/detour-proxy/detour/rewrite"
)

// Cost and budgets. An answer's cost is its usage at the answering
// upstream's price for the model detour asked it for (policy.Compiled.Price),
// counted when the request is over — a stream's last event included, since
// that is where most vendors report usage — into every budget that covers
// the upstream or the route. Admission reads the spend: an upstream whose
// budget is spent is skipped (class budget_exhausted) until the period
// ends. Requests already admitted finish, so a budget can end a little
// over its limit, by what was in flight when it was crossed: a stream that
// crosses it completes, and the next request is the one skipped.

// settle prices the answer and adds its cost to the budgets that cover it.
func (s *session) settle() {
	rec := s.rec
	s.mu.Lock()
	by, model := rec.AnsweredBy, ""
	for _, a := range rec.Attempts {
		if a.Upstream == by && (a.Outcome == OutcomeOK || a.Outcome == OutcomeCut) {
			model = a.Model
		}
	}
	s.mu.Unlock()
	if by == "" || model == "" {
		// Nothing answered, or the cache or a static upstream did: nothing
		// was spent.
		return
	}
	if p, ok := s.pol.Price(by, model); ok {
		rec.CostUSD = p.Cost(rec.Usage, rec.CachedInput)
	}
	if rec.CostUSD <= 0 || len(s.pol.Budgets) == 0 {
		return
	}
	now := s.r.now()
	var buf [2]policy.Period
	for _, b := range s.pol.Budgets {
		if !b.Covers(by, s.route.Name) {
			continue
		}
		for _, p := range b.Periods(now, &buf) {
			s.noteSpend(b, p, s.r.Health.AddSpend(p.Key, rec.CostUSD, p.End))
		}
	}
}

// noteSpend logs, once per period, that a budget reached its warn_at share
// and that it is spent. These are lines of their own, beside the request's
// line: they are about the budget, and an operator alerts on them.
func (s *session) noteSpend(b *policy.Budget, p policy.Period, spent float64) {
	var msg string
	switch {
	case spent >= p.Limit && s.r.Health.FirstNotice(p.Key+"/spent", p.End):
		msg = "budget spent"
	case spent >= b.WarnAt*p.Limit && spent < p.Limit && s.r.Health.FirstNotice(p.Key+"/warn", p.End):
		msg = "budget warning"
	default:
		return
	}
	s.r.Log.Warn().Str("budget", b.Name).Str("period", p.Kind).
		Float64("spent_usd", spent).Float64("limit_usd", p.Limit).Float64("warn_at", b.WarnAt).
		Str("resets_at", p.End.UTC().Format(time.RFC3339)).Str("time_zone", b.TimeZone).Msg(msg)
}

// overBudget reports whether a budget covering u on this route is spent,
// and then records u as skipped with class budget_exhausted. It is not a
// failure of u: no breaker, no cooldown, no stats.
func (s *session) overBudget(u *policy.Upstream, now time.Time) bool {
	if len(s.pol.Budgets) == 0 {
		return false
	}
	var buf [2]policy.Period
	for _, b := range s.pol.Budgets {
		if !b.Covers(u.Name, s.route.Name) {
			continue
		}
		for _, p := range b.Periods(now, &buf) {
			spent := s.r.Health.Spent(p.Key)
			if spent < p.Limit {
				continue
			}
			s.skipClass(u.Name, policy.ClassBudgetExhausted, "budget "+b.Name+" spent: $"+usd(spent)+" of $"+usd(p.Limit)+" "+p.Kind+
				", until "+p.End.UTC().Format(time.RFC3339))
			s.comesBack(p.End, true)
			return true
		}
	}
	return false
}

// writeBudgetSpent answers a request whose upstreams were all skipped, at
// least one of them for a spent budget and the others for a budget or
// quota: the app hears its vendor's out-of-quota error (429 with OpenAI's
// insufficient_quota, Anthropic's and Gemini's equivalents) — what the
// vendor itself says when a spend cap is reached, and what the SDKs do not
// retry in a loop — with retry-after until the soonest budget resets.
// false when that is not the case.
func (s *session) writeBudgetSpent() bool {
	if s.limited || s.unavailable > 0 {
		return false
	}
	spent := 0
	s.mu.Lock()
	for _, a := range s.rec.Attempts {
		if a.Class == string(policy.ClassBudgetExhausted) {
			spent++
		}
	}
	s.mu.Unlock()
	if spent == 0 {
		return false
	}
	s.rec.Error = "every upstream's budget is spent"
	class := policy.ClassQuotaExhausted
	s.writeAppError(rewrite.StatusForClass(string(class)), class,
		"detour: the spend budget for every upstream of route "+s.route.Name+" is spent; "+s.summary(), s.r.until(s.soonest))
	return true
}

func usd(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }
