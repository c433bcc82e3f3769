package policy

import (
	"fmt"
	"strings"
	"time"
)

// DefaultBudgetWarnAt is budgets[].warn_at: the share of a limit at which
// detour warns, once per period.
const DefaultBudgetWarnAt = 0.8

// Budget periods, as Period.Kind, the metrics' period label and /status.
const (
	PeriodDaily   = "daily"
	PeriodMonthly = "monthly"
)

// Budget is a compiled budgets[] entry. Immutable. The spend it counts is
// not here: it lives in the health registry, keyed by Period.Key, so that
// it survives reloads.
type Budget struct {
	Name string
	// Upstream is set for a budget on one upstream's answers, Route for one
	// on a route's answers (exactly one of them).
	Upstream, Route string
	// Daily and Monthly are limits in USD; 0 means none.
	Daily, Monthly float64
	// WarnAt is the share of a limit at which detour warns.
	WarnAt float64
	// TimeZone is the IANA name ("UTC" by default) and Location its zone.
	TimeZone string
	Location *time.Location
}

// Covers reports whether an answer by upstream on route counts against b.
func (b *Budget) Covers(upstream, route string) bool {
	if b.Upstream != "" {
		return b.Upstream == upstream
	}
	return b.Route == route
}

// Period is one of a budget's limits at one time: the day or month that
// contains it, in the budget's time zone.
type Period struct {
	// Kind is PeriodDaily or PeriodMonthly.
	Kind string
	// Key names the budget's spend in this period in the state backend:
	// the budget's name, the kind and the period's first day in the time
	// zone ("openai-daily/daily/2026-12-01", "…/monthly/2026-12"). It
	// changes at the period's end, which is how spend resets.
	Key string
	// Start and End bound the period: End is the next midnight (or the
	// next 1st at midnight) in the time zone, whatever DST does to the
	// day's length.
	Start, End time.Time
	// Limit is the period's limit in USD.
	Limit float64
}

// Periods returns b's periods at now: the daily one (when b has a daily
// limit), then the monthly one (when it has a monthly limit), into buf's
// storage (so the hot path allocates only the keys).
func (b *Budget) Periods(now time.Time, buf *[2]Period) []Period {
	out := buf[:0]
	t := now.In(b.Location)
	y, m, d := t.Date()
	if b.Daily > 0 {
		start := time.Date(y, m, d, 0, 0, 0, 0, b.Location)
		out = append(out, Period{Kind: PeriodDaily, Key: periodKey(b.Name, PeriodDaily, start, "2006-01-02"),
			Start: start, End: time.Date(y, m, d+1, 0, 0, 0, 0, b.Location), Limit: b.Daily})
	}
	if b.Monthly > 0 {
		start := time.Date(y, m, 1, 0, 0, 0, 0, b.Location)
		out = append(out, Period{Kind: PeriodMonthly, Key: periodKey(b.Name, PeriodMonthly, start, "2006-01"),
			Start: start, End: time.Date(y, m+1, 1, 0, 0, 0, 0, b.Location), Limit: b.Monthly})
	}
	return out
}

// periodKey is name/kind/start, built in one allocation: it is made for
// every budget period at every admission and answer.
func periodKey(name, kind string, start time.Time, layout string) string {
	var buf [96]byte
	k := append(buf[:0], name...)
	k = append(k, '/')
	k = append(k, kind...)
	k = append(k, '/')
	return string(start.AppendFormat(k, layout))
}

// budgets compiles budgets[]; it runs after upstreams and routes, whose
// names it checks.
func (k *compiler) budgets(f *File) {
	seen := map[string]int{}
	for i, bf := range f.Budgets {
		p := fmt.Sprintf("budgets[%d]", i)
		b := &Budget{Name: bf.Name, Upstream: bf.Upstream, Route: bf.Route, Daily: bf.Daily, Monthly: bf.Monthly, WarnAt: DefaultBudgetWarnAt, TimeZone: "UTC", Location: time.UTC}
		ok := true
		switch j, dup := seen[bf.Name]; {
		case bf.Name == "":
			k.errorf(p+".name", "required (it names the budget in logs, metrics and /status, and keys its spend)")
			ok = false
		case !upstreamName.MatchString(bf.Name):
			k.errorf(p+".name", "budget names use letters, digits, '_', '.', '-' (at most 64), starting with a letter or digit")
			ok = false
		case dup:
			k.errorf(p+".name", "budget name %q is already used by budgets[%d]", bf.Name, j)
			ok = false
		}
		seen[bf.Name] = i
		switch {
		case (bf.Upstream == "") == (bf.Route == ""):
			k.errorf(p, "set exactly one of upstream and route: the answers this budget counts")
			ok = false
		case bf.Upstream != "":
			ok = k.budgetUpstream(p+".upstream", f, bf.Upstream) && ok
		default:
			ok = k.budgetRoute(p+".route", f, bf.Route) && ok
		}
		if bf.Daily < 0 {
			k.errorf(p+".daily", "must not be negative (0 or absent: no daily limit); got %g", bf.Daily)
			ok = false
		}
		if bf.Monthly < 0 {
			k.errorf(p+".monthly", "must not be negative (0 or absent: no monthly limit); got %g", bf.Monthly)
			ok = false
		}
		if bf.Daily <= 0 && bf.Monthly <= 0 && bf.Daily >= 0 && bf.Monthly >= 0 {
			k.errorf(p, "set daily or monthly (or both): a limit in USD, e.g. \"daily\": 50")
			ok = false
		}
		b.WarnAt = k.fraction(p+".warn_at", bf.WarnAt, DefaultBudgetWarnAt)
		if tz := bf.TimeZone; tz != "" {
			if loc, err := loadZone(tz); err != nil {
				k.errorf(p+".time_zone", "%v", err)
				ok = false
			} else {
				b.TimeZone, b.Location = tz, loc
			}
		}
		if ok {
			k.c.Budgets = append(k.c.Budgets, b)
		}
	}
}

// loadZone loads an IANA time zone. "Local" is refused: the day a budget
// resets must not depend on the machine detour happens to run on.
func loadZone(name string) (*time.Location, error) {
	if name == "Local" || strings.TrimSpace(name) != name {
		return nil, fmt.Errorf("must be an IANA time zone such as \"UTC\" or \"America/Los_Angeles\"; got %q", name)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("unknown time zone %q (an IANA name such as \"UTC\" or \"America/Los_Angeles\"): %v", name, err)
	}
	return loc, nil
}

// budgetUpstream checks a budget's upstream: it exists, and has prices (a
// budget on answers that cost nothing would never be reached).
func (k *compiler) budgetUpstream(p string, f *File, name string) bool {
	uf, exists := f.Upstreams[name]
	switch {
	case !exists:
		k.errorf(p, "no upstream named %q (defined: %s)", name, strings.Join(sortedKeys(f.Upstreams), ", "))
		return false
	case len(uf.Prices) == 0:
		k.errorf(p, "upstream %q has no prices, so its answers cost nothing and this budget would never be reached; give it upstreams.%s.prices", name, name)
		return false
	}
	return true
}

// budgetRoute checks a budget's route: it exists, and some upstream of
// its chains has prices.
func (k *compiler) budgetRoute(p string, f *File, name string) bool {
	for _, rf := range f.Routes {
		if rf.Name != name {
			continue
		}
		names := append([]string(nil), rf.Chain...)
		for _, ch := range rf.Tiers {
			names = append(names, ch...)
		}
		for _, u := range names {
			if len(f.Upstreams[u].Prices) > 0 {
				return true
			}
		}
		k.errorf(p, "no upstream of route %q has prices, so its answers cost nothing and this budget would never be reached", name)
		return false
	}
	var routes []string
	for _, rf := range f.Routes {
		routes = append(routes, rf.Name)
	}
	k.errorf(p, "no route named %q (defined: %s)", name, strings.Join(routes, ", "))
	return false
}
