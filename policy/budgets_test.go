package policy

import (
	"strings"
	"testing"
	"time"

	"github.com/detour-proxy/detour/rewrite"
)

// budgetPolicy is a policy with a priced upstream "o", an unpriced "free",
// a route "r" over both, and the given top-level members.
func budgetPolicy(extra string) string {
	return `{
  "upstreams": {
    "o": {"shape": "openai", "base_url": "https://x/v1", "auth": {"none": true},
          "prices": {"gpt-4o*": {"input": 2.5, "output": 10, "cached_input": 1.25}, "gpt-4o-mini": {"input": 0.15, "output": 0.6}, "*": {"input": 1, "output": 1}}},
    "free": {"shape": "openai", "base_url": "https://y/v1", "auth": {"none": true}}
  },
  "routes": [{"name": "r", "match": {"host": "api.openai.com"}, "chain": ["o", "free"]},
             {"name": "f", "match": {"host": "api.openai.com", "path": "/free"}, "chain": ["free"]}]` + extra + `
}`
}

func TestPriceMostSpecificGlobWins(t *testing.T) {
	t.Parallel()
	c, err := Compile("policy.json", []byte(budgetPolicy("")), testOptions())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		model, want string
	}{
		{"gpt-4o-mini", "gpt-4o-mini"},   // exact beats gpt-4o*
		{"gpt-4o-mini-2024", "gpt-4o*"},  // the exact one does not match
		{"gpt-4o", "gpt-4o*"},            // a star matches nothing too
		{"claude-sonnet-4-5", "*"},       // only the catch-all
		{"org/gpt-4o:7b", "*"},           // '/' and ':' are ordinary characters
		{"gpt-4o-2024-08-06", "gpt-4o*"}, // a dated snapshot
	} {
		p, ok := c.Price("o", tc.model)
		if !ok || p.Pattern != tc.want {
			t.Errorf("Price(o, %q) = %q, %v; want %q", tc.model, p.Pattern, ok, tc.want)
		}
	}
	if _, ok := c.Price("free", "gpt-4o"); ok {
		t.Error("an upstream without prices priced a model")
	}
	if _, ok := c.Price("nope", "gpt-4o"); ok {
		t.Error("an unknown upstream priced a model")
	}
	// Without cached_input, cached tokens cost the input price.
	if p, _ := c.Price("o", "gpt-4o-mini"); p.CachedInput != 0.15 {
		t.Errorf("cached_input defaults to %g; want the input price 0.15", p.CachedInput)
	}
}

func TestMoreSpecificOrdersTies(t *testing.T) {
	t.Parallel()
	// Same number of literal characters: fewer stars first, then bytes.
	for _, tc := range []struct{ a, b string }{
		{"gpt-4o", "gpt-4o*"}, {"gpt-4o*", "*gpt-4o*"}, {"a*c", "b*c"}, {"gpt-4o-mini*", "gpt-4o*"},
	} {
		if !moreSpecific(tc.a, tc.b) || moreSpecific(tc.b, tc.a) {
			t.Errorf("want %q before %q", tc.a, tc.b)
		}
	}
}

func TestPriceCost(t *testing.T) {
	t.Parallel()
	p := Price{Input: 2.5, Output: 10, CachedInput: 1.25}
	// 1M prompt tokens of which 400k cached, 100k output.
	got := p.Cost(rewrite.Usage{Input: 1_000_000, Output: 100_000}, 400_000)
	want := 0.6*2.5 + 0.4*1.25 + 0.1*10
	if diff := got - want; diff > 1e-9 || diff < -1e-9 {
		t.Errorf("cost = %g; want %g", got, want)
	}
	// A cached count above the input (a vendor's oddity) is capped.
	if got := p.Cost(rewrite.Usage{Input: 10}, 50); got != 10*1.25/1e6 {
		t.Errorf("cost with cached > input = %g", got)
	}
}

func TestPricesAndBudgetsValidation(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, policy string
		want         []string
	}{
		{"price without output, negative input", `{
  "upstreams": {"o": {"shape": "openai", "base_url": "https://x/v1", "auth": {"none": true},
    "prices": {"gpt-4o*": {"input": -1}}}},
  "routes": [{"name": "r", "match": {"host": "api.openai.com"}, "chain": ["o"]}]
}`, []string{`policy.json:3:16: upstreams.o.prices.gpt-4o*.output: required`, `upstreams.o.prices.gpt-4o*.input: must not be negative`}},
		{"prices on a static upstream", `{
  "upstreams": {"s": {"shape": "static", "text": "busy", "prices": {"*": {"input": 1, "output": 1}}}},
  "routes": [{"name": "r", "match": {"host": "api.openai.com"}, "chain": ["s"]}]
}`, []string{`upstreams.s.prices: a static upstream sends no request, so it takes no prices`}},
		{"budget errors", budgetPolicy(`,
  "budgets": [
    {"name": "b", "upstream": "o", "route": "r", "daily": 5},
    {"name": "b", "upstream": "free", "daily": 5},
    {"name": "c", "upstream": "nope", "monthly": -1},
    {"name": "d", "route": "f", "daily": 1, "warn_at": 1.5, "time_zone": "Mars/Olympus"},
    {"name": "e", "upstream": "o", "time_zone": "Local"}
  ]`), []string{
			`policy.json:10:5: budgets[0]: set exactly one of upstream and route`,
			`budgets[1].name: budget name "b" is already used by budgets[0]`,
			`budgets[1].upstream: upstream "free" has no prices`,
			`budgets[2].upstream: no upstream named "nope"`,
			`budgets[2].monthly: must not be negative`,
			`budgets[3].route: no upstream of route "f" has prices`,
			`budgets[3].warn_at: must be a fraction`,
			`budgets[3].time_zone: unknown time zone "Mars/Olympus"`,
			`budgets[4]: set daily or monthly`,
			`budgets[4].time_zone: must be an IANA time zone`,
		}},
		{"priorities", `{
  "upstreams": {"o": {"shape": "openai", "base_url": "https://x/v1", "auth": {"none": true}, "limits": {"shed_low_at": 0.5}},
                "p": {"shape": "openai", "base_url": "https://y/v1", "auth": {"none": true}, "limits": {"concurrency": 4, "shed_low_at": 2}}},
  "routes": [{"name": "r", "match": {"host": "api.openai.com"}, "chain": ["o", "p"]}],
  "deadline": "10s",
  "hedge_after_by_priority": {"high": "10s", "low": "-1s"},
  "priority_by_tier": {"easy": "urgent", "Hard": "high"}
}`, []string{
			`upstreams.o.limits.shed_low_at: has no effect without limits.concurrency`,
			`upstreams.p.limits.shed_low_at: must be a fraction`,
			`hedge_after_by_priority.high: 10s is not shorter than deadline`,
			`hedge_after_by_priority.low: duration "-1s" must not be negative`,
			`priority_by_tier.Hard: tier names use lowercase`,
			`priority_by_tier.easy: must be one of high, normal, low; got "urgent"`,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Compile("policy.json", []byte(tc.policy), testOptions())
			if err == nil {
				t.Fatal("compiled; want errors")
			}
			msg := err.Error()
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error lacks %q:\n%s", w, msg)
				}
			}
		})
	}
}

func TestBudgetCompiles(t *testing.T) {
	t.Parallel()
	c, err := Compile("policy.json", []byte(budgetPolicy(`,
  "budgets": [{"name": "o-daily", "upstream": "o", "daily": 50, "monthly": 1000, "time_zone": "America/Los_Angeles"},
              {"name": "r-month", "route": "r", "monthly": 200, "warn_at": 0.5}]`)), testOptions())
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Budgets) != 2 {
		t.Fatalf("budgets = %d", len(c.Budgets))
	}
	b, r := c.Budgets[0], c.Budgets[1]
	if b.WarnAt != DefaultBudgetWarnAt || b.TimeZone != "America/Los_Angeles" || b.Location.String() != "America/Los_Angeles" {
		t.Errorf("o-daily = %+v", b)
	}
	if r.WarnAt != 0.5 || r.TimeZone != "UTC" || r.Location != time.UTC {
		t.Errorf("r-month = %+v", r)
	}
	if !b.Covers("o", "anything") || b.Covers("free", "r") || !r.Covers("free", "r") || r.Covers("o", "f") {
		t.Error("Covers is wrong")
	}
}

func mustZone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Skipf("no time zone data for %s: %v", name, err)
	}
	return loc
}

// The day ends at midnight in the budget's zone, not in UTC: a Los Angeles
// budget keeps its day until 08:00 UTC (07:00 in summer), a UTC budget
// resets at 00:00 UTC.
func TestBudgetDayEndsAtMidnightInItsTimeZone(t *testing.T) {
	t.Parallel()
	la := mustZone(t, "America/Los_Angeles")
	laB := &Budget{Name: "la", Daily: 10, Location: la}
	utcB := &Budget{Name: "utc", Daily: 10, Location: time.UTC}
	var buf [2]Period
	at := func(b *Budget, s string) Period {
		now, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return b.Periods(now, &buf)[0]
	}
	// 23:30 UTC on Nov 30 is 15:30 in Los Angeles; 00:30 UTC on Dec 1 is
	// still Nov 30 there.
	if a, b := at(laB, "2026-11-30T23:30:00Z"), at(laB, "2026-12-01T00:30:00Z"); a.Key != b.Key || a.Key != "la/daily/2026-11-30" {
		t.Errorf("LA keys across UTC midnight: %q, %q; want both la/daily/2026-11-30", a.Key, b.Key)
	}
	if a, b := at(utcB, "2026-11-30T23:30:00Z"), at(utcB, "2026-12-01T00:30:00Z"); a.Key == b.Key {
		t.Errorf("UTC budget kept its day across UTC midnight: %q", a.Key)
	}
	p := at(laB, "2026-12-01T07:59:59Z")
	if want := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC); !p.End.Equal(want) || p.Key != "la/daily/2026-11-30" {
		t.Errorf("LA day at 07:59:59Z: key %q ends %s; want la/daily/2026-11-30 ending %s", p.Key, p.End.UTC(), want)
	}
	if p := at(laB, "2026-12-01T08:00:00Z"); p.Key != "la/daily/2026-12-01" {
		t.Errorf("LA day at 08:00Z: %q; want la/daily/2026-12-01", p.Key)
	}
	// DST: Los Angeles falls back on Sunday, Nov 1 2026; that day lasts 25
	// hours and still is one period.
	p = at(laB, "2026-11-01T12:00:00Z")
	if d := p.End.Sub(p.Start); d != 25*time.Hour || p.Key != "la/daily/2026-11-01" {
		t.Errorf("DST day: %q lasts %s; want 25h", p.Key, d)
	}
	// And springs forward on Mar 8 2026: 23 hours.
	p = at(laB, "2026-03-08T12:00:00Z")
	if d := p.End.Sub(p.Start); d != 23*time.Hour {
		t.Errorf("spring-forward day lasts %s; want 23h", d)
	}
}

func TestBudgetMonthEndsOnTheFirstInItsTimeZone(t *testing.T) {
	t.Parallel()
	la := mustZone(t, "America/Los_Angeles")
	b := &Budget{Name: "m", Daily: 1, Monthly: 100, Location: la}
	var buf [2]Period
	ps := b.Periods(time.Date(2026, 12, 1, 7, 0, 0, 0, time.UTC), &buf)
	if len(ps) != 2 || ps[0].Kind != PeriodDaily || ps[1].Kind != PeriodMonthly {
		t.Fatalf("periods = %+v", ps)
	}
	m := ps[1]
	if m.Key != "m/monthly/2026-11" || !m.End.Equal(time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)) || m.Limit != 100 {
		t.Errorf("November in LA: %q ends %s limit %g", m.Key, m.End.UTC(), m.Limit)
	}
	// December ends on Jan 1 at midnight in LA, across the year.
	m = b.Periods(time.Date(2026, 12, 31, 12, 0, 0, 0, time.UTC), &buf)[1]
	if m.Key != "m/monthly/2026-12" || !m.End.Equal(time.Date(2027, 1, 1, 8, 0, 0, 0, time.UTC)) {
		t.Errorf("December: %q ends %s", m.Key, m.End.UTC())
	}
	// A monthly-only budget has one period.
	if ps := (&Budget{Name: "x", Monthly: 5, Location: time.UTC}).Periods(time.Now(), &buf); len(ps) != 1 || ps[0].Kind != PeriodMonthly {
		t.Errorf("monthly-only periods = %+v", ps)
	}
}

func TestHedgeAfterByPriority(t *testing.T) {
	t.Parallel()
	c, err := Compile("policy.json", []byte(budgetPolicy(`,
  "hedge_after": "2s",
  "hedge_after_by_priority": {"high": "500ms", "low": "0s"},
  "priority_by_tier": {"easy": "low"}`)), testOptions())
	if err != nil {
		t.Fatal(err)
	}
	for p, want := range map[Priority]time.Duration{PriorityHigh: 500 * time.Millisecond, PriorityNormal: 2 * time.Second, PriorityLow: 0, "": 2 * time.Second} {
		if got := c.HedgeAfterFor(p); got != want {
			t.Errorf("HedgeAfterFor(%q) = %s; want %s", p, got, want)
		}
	}
	if c.Priorities.ByTier["easy"] != PriorityLow {
		t.Errorf("priority_by_tier = %v", c.Priorities.ByTier)
	}
	for in, want := range map[string]Priority{"HIGH": PriorityHigh, " low ": PriorityLow, "normal": PriorityNormal} {
		if got, ok := ParsePriority(in); !ok || got != want {
			t.Errorf("ParsePriority(%q) = %q, %v", in, got, ok)
		}
	}
	if _, ok := ParsePriority("urgent"); ok {
		t.Error("ParsePriority accepted urgent")
	}
}
