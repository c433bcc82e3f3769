package sim

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/detour-proxy/detour/policy"
)

// small are options that keep every table short under -race.
func small() Options {
	return Options{
		Seed: 7, Requests: 100, LatencyRequests: 20,
		QuotaRun: 3 * time.Minute, QuotaAt: 30, BreakerRun: time.Minute,
	}.withDefaults()
}

// tiny are options for a test about the output's bytes, not its figures:
// every table still runs every row, draws its faults from the seed, ends a
// 60s quota cooldown within the run and opens the breaker, on about a
// third of small()'s requests. A source of nondeterminism (the real clock,
// an unseeded generator, map order in a table) shows in every row, so the
// shorter run finds it as surely as the longer one.
func tiny() Options {
	return Options{
		Seed: 7, Requests: 30, LatencyRequests: 20,
		QuotaRun: 90 * time.Second, QuotaAt: 20, BreakerRun: 10 * time.Second,
	}.withDefaults()
}

// tinyMemo holds the tables of tiny() that several tests read: the first
// run of TestSameSeedSameTables and its table (a) alone, and the rows of
// table (b) TestQuotaCooldownSavesPrimaryCalls asserts on.
var tinyMemo = &tableMemo{}

// A request the upstream refuses as invalid is the app's mistake: it must
// reach the app as the upstream's 400 and never be sent to a second
// upstream; and the valid requests' success rate must be 1 − p^k within
// binomial noise.
func TestChainCellsMatchTheoryAndNeverForwardInvalidRequests(t *testing.T) {
	t.Parallel()
	opts := small()
	// 1000 requests a cell are enough: at seed 7 a chain that tries its
	// last upstream twice (an upstream's worth of success added) is off by
	// z = 4.9 in the p=0.2,k=2 cell and 14 in p=0.3,k=1, and one that skips
	// its last upstream by z = −25 and −13.
	opts.Requests = 1000
	for _, tc := range []struct {
		p float64
		k int
	}{{0.2, 2}, {0.5, 3}, {0.3, 1}} {
		// Each cell has its own runner, fakes and virtual clock, so the
		// cells run side by side.
		t.Run(fmt.Sprintf("p=%g,k=%d", tc.p, tc.k), func(t *testing.T) {
			t.Parallel()
			c, err := runChainCell(context.Background(), opts, tc.p, tc.k)
			if err != nil {
				t.Fatal(err)
			}
			if c.invalid == 0 {
				t.Fatalf("p=%g k=%d: no invalid requests were mixed in", tc.p, tc.k)
			}
			if c.forwarded != 0 {
				t.Errorf("p=%g k=%d: %d of %d invalid requests were sent to a second upstream; want 0", tc.p, tc.k, c.forwarded, c.invalid)
			}
			if c.refused != c.invalid {
				t.Errorf("p=%g k=%d: %d of %d invalid requests reached the app as 400; want all", tc.p, tc.k, c.refused, c.invalid)
			}
			if c.valid+c.invalid != opts.Requests {
				t.Errorf("p=%g k=%d: %d valid + %d invalid; want %d requests", tc.p, tc.k, c.valid, c.invalid, opts.Requests)
			}
			// Four standard errors: a correct chain fails this about once in
			// 15,000 seeds; a chain that loses or adds an upstream's worth of
			// success is off by far more.
			if z := c.z(); math.Abs(z) > 4 {
				t.Errorf("p=%g k=%d: success %.4f, theory %.4f (z = %.2f); want within 4 standard errors", tc.p, tc.k, c.measured(), c.theory(), z)
			}
		})
	}
}

// The same seed prints the same bytes; another seed draws other faults.
func TestSameSeedSameTables(t *testing.T) {
	t.Parallel()
	// The four runs are independent (each its own runner, fakes and
	// virtual clock), so they go side by side.
	type result struct {
		out string
		err error
	}
	run := func(memo *tableMemo, seed int64, tables ...string) <-chan result {
		c := make(chan result, 1)
		go func() {
			var out bytes.Buffer
			opts := tiny()
			opts.Seed, opts.Only, opts.Out, opts.memo = seed, tables, &out, memo
			err := Run(context.Background(), opts)
			c <- result{out.String(), err}
		}()
		return c
	}
	wait := func(c <-chan result) string {
		r := <-c
		if r.err != nil {
			t.Fatal(r.err)
		}
		return r.out
	}
	// The first run and seed 7's table (a) alone read tinyMemo's tables;
	// the second run and seed 8's are fresh.
	firstC, secondC, a7C, a8C := run(tinyMemo, 7, "a", "b", "d"), run(nil, 7, "a", "b", "d"), run(tinyMemo, 7, "a"), run(nil, 8, "a")
	first, second := wait(firstC), wait(secondC)
	if first != second {
		t.Fatalf("two runs with seed 7 differ:\n%s\n---\n%s", first, second)
	}
	for _, want := range []string{"# detour simulate: seed 7", "--seed 7 ", "## (a)", "## (b)", "## (d)"} {
		if !strings.Contains(first, want) {
			t.Errorf("output lacks %q:\n%s", want, first)
		}
	}
	if strings.Contains(first, "## (c)") {
		t.Error("--only a,b,d printed table (c)")
	}
	if a7, a8 := wait(a7C), wait(a8C); strings.ReplaceAll(a8, "seed 8", "seed 7") == a7 {
		t.Error("seed 8 printed the same tables as seed 7")
	}
}

// A quota_exhausted cooldown keeps calls away from a primary whose quota is
// gone, and the backup answers meanwhile; never_skip_last false lets a
// chain of one rest its only upstream too.
//
// It reads table (b) of tiny() from tinyMemo: the run ends a 60s cooldown
// and holds 71 requests after the quota runs out.
func TestQuotaCooldownSavesPrimaryCalls(t *testing.T) {
	t.Parallel()
	opts := tiny()
	res, err := memoTable(tinyMemo, opts, "b", func() (quotaResult, error) { return runQuota(context.Background(), opts) })
	if err != nil {
		t.Fatal(err)
	}
	row := func(chain []string, cooldown string, nsl bool) quotaRow {
		t.Helper()
		for _, r := range res.rows {
			if strings.Join(r.chain, ",") == strings.Join(chain, ",") && r.cooldown == cooldown && r.neverSkipLast == nsl {
				return r
			}
		}
		t.Fatalf("table (b) has no row %v, cooldown %s, never_skip_last %t", chain, cooldown, nsl)
		return quotaRow{}
	}
	pair := []string{"primary", "backup"}
	none, long := row(pair, "0s", true), row(pair, "600s", true)
	if long.wasted >= none.wasted {
		t.Errorf("[primary, backup]: cooldown 600s wasted %d primary calls, 0s wasted %d; want fewer", long.wasted, none.wasted)
	}
	if want := int(opts.QuotaRun/time.Second) - opts.QuotaAt + 1; none.wasted != want {
		t.Errorf("without a cooldown the primary got %d calls after its quota ran out; want every request's, %d", none.wasted, want)
	}
	for _, r := range []quotaRow{none, long} {
		if r.answeredAfter != r.after || r.after == 0 {
			t.Errorf("cooldown %s: %d of %d requests after the quota ran out were answered; want all (the backup is fine)", r.cooldown, r.answeredAfter, r.after)
		}
	}
	alone := []string{"primary"}
	kept, rested := row(alone, "600s", true), row(alone, "600s", false)
	if kept.wasted != none.wasted {
		t.Errorf("[primary], never_skip_last true: %d calls after the quota ran out; want %d (the last upstream is always tried)", kept.wasted, none.wasted)
	}
	if rested.wasted >= kept.wasted {
		t.Errorf("[primary], never_skip_last false: %d wasted calls; want fewer than %d", rested.wasted, kept.wasted)
	}
}

// The breaker takes a dead upstream out of the chain: fewer calls reach it
// than without a breaker, and the app is answered by the backup throughout.
func TestBreakerCutsCallsToDeadUpstream(t *testing.T) {
	t.Parallel()
	opts := small()
	// Past open_for (60s): the breaker opens within the first second, lets
	// a half-open probe through after 60s and opens again when it fails, so
	// the run holds every transition the comparison depends on (5 and 1
	// calls in the two minutes, against 600 and 100 with the breaker off);
	// a longer run repeats them.
	opts.BreakerRun = policy.DefaultBreakerOpenFor + 10*time.Second
	for _, dead := range []string{dead503, deadRefused} {
		// Each row has its own runner, fakes and virtual clock.
		t.Run(dead, func(t *testing.T) {
			t.Parallel()
			off, err := runBreakerRow(context.Background(), opts, dead, false)
			if err != nil {
				t.Fatal(err)
			}
			on, err := runBreakerRow(context.Background(), opts, dead, true)
			if err != nil {
				t.Fatal(err)
			}
			if off.total() != off.requests {
				t.Errorf("%s, breaker off: %d calls reached the dead upstream; want one per request, %d", dead, off.total(), off.requests)
			}
			if on.total() >= off.total() {
				t.Errorf("%s: %d calls reached the dead upstream with the breaker on, %d with it off; want fewer", dead, on.total(), off.total())
			}
			for _, r := range []breakerRow{off, on} {
				if r.answered != r.requests {
					t.Errorf("%s, breaker %t: %d of %d requests answered; want all (the backup is fine)", dead, r.breaker, r.answered, r.requests)
				}
			}
		})
	}
}

// The latency table runs over real loopback HTTP and every timed request is
// answered. Nothing about the times is asserted: they depend on the machine.
func TestLatencyTableRuns(t *testing.T) {
	t.Parallel()
	opts := small()
	r, err := runLatency(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.failover) != opts.LatencyRequests || len(r.direct) != opts.LatencyRequests || r.failed != 0 {
		t.Errorf("timed %d failover and %d direct requests, %d unanswered; want %d each, none unanswered",
			len(r.failover), len(r.direct), r.failed, opts.LatencyRequests)
	}
	var out bytes.Buffer
	r.write(&out)
	if !strings.Contains(out.String(), "Real time, not virtual") {
		t.Errorf("table (c) does not say its numbers are real time:\n%s", out.String())
	}
}

func TestParseOnly(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want string
		err  bool
	}{
		{"a,b,c,d", "a,b,c,d", false},
		{"d, a,a", "a,d", false},
		{"C", "c", false},
		{"", "", false},
		{"a,z", "", true},
	} {
		got, err := ParseOnly(tc.in)
		if (err != nil) != tc.err || strings.Join(got, ",") != tc.want {
			t.Errorf("ParseOnly(%q) = %q, %v; want %q, error %t", tc.in, got, err, tc.want, tc.err)
		}
	}
}

func TestQuantileIsNearestRank(t *testing.T) {
	t.Parallel()
	var d []time.Duration
	for i := 1; i <= 100; i++ {
		d = append(d, time.Duration(i))
	}
	for _, tc := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 50}, {0.99, 99}, {1, 100}, {0.001, 1}} {
		if got := quantile(d, tc.q); got != tc.want {
			t.Errorf("quantile(1..100, %g) = %d; want %d", tc.q, got, tc.want)
		}
	}
}

func TestShortDuration(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]string{
		time.Hour: "1h", 10 * time.Minute: "10m", 90 * time.Second: "1m30s", time.Second: "1s", 90 * time.Minute: "1h30m",
	} {
		if got := shortDuration(d); got != want {
			t.Errorf("shortDuration(%v) = %q; want %q", d, got, want)
		}
	}
}

// The primary's daily budget runs out at noon: from 12:00 the backup
// answers every request, nothing fails, the spend ends at most one answer
// over the limit, and at midnight the primary answers again.
func TestBudgetCutOffAtNoon(t *testing.T) {
	t.Parallel()
	r, err := runBudget(context.Background(), small())
	if err != nil {
		t.Fatal(err)
	}
	if len(r.hours) != 26 {
		t.Fatalf("%d hours; want 26", len(r.hours))
	}
	for _, h := range r.hours {
		wantPrimary := h.hour < 12 || h.hour >= 24
		if h.failed != 0 || (wantPrimary && (h.primary != 60 || h.backup != 0)) || (!wantPrimary && (h.primary != 0 || h.backup != 60)) {
			t.Errorf("hour %d: primary %d, backup %d, failed %d", h.hour, h.primary, h.backup, h.failed)
		}
	}
	if r.firstSkip != "12:00" {
		t.Errorf("first backup answer at %s; want 12:00", r.firstSkip)
	}
	if spent := r.hours[23].spent; spent < r.limit || spent > r.limit+r.answerUSD {
		t.Errorf("spent %g of %g: want at most one answer (%g) over", spent, r.limit, r.answerUSD)
	}
	if r.hours[24].spent >= r.hours[23].spent {
		t.Error("the budget did not reset at midnight")
	}
}
