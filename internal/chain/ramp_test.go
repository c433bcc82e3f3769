package chain_test

import (
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/detour-proxy/detour/internal/chain"
	"github.com/detour-proxy/detour/internal/detourtest"
	fv "github.com/detour-proxy/detour/internal/fakevendor"
	"github.com/detour-proxy/detour/internal/health"
	"github.com/detour-proxy/detour/rewrite"
)

// gridRand draws, in turn, the middles of ten equal slices of [0, 1): over
// any ten draws a share p admits exactly 10·p of them, so a ramp's counts
// are exact rather than within noise. draws counts the calls.
type gridRand struct{ draws atomic.Int64 }

func (g *gridRand) Rand() uint64 {
	k := float64((g.draws.Add(1) - 1) % 10)
	return uint64(math.Ldexp((k+0.5)/10, 64))
}

// trippedAndClosed opens a's breaker (3 failures), lets it half-open and
// closes it with 2 good probes; it returns when the breaker closed.
func trippedAndClosed(t *testing.T, r *runner, clk *clock, a *detourtest.Vendor) time.Time {
	t.Helper()
	a.SetDefault(fv.Fault{Kind: fv.Status, Status: 503})
	for range 3 {
		post(t, r.srv.URL+"/v1/chat/completions", chatBody).Body.Close()
	}
	if st := r.health.Breaker("a", clk.Now()); st.State != health.BreakerOpen {
		t.Fatalf("breaker %v; want open", st.State)
	}
	a.SetDefault(fv.Fault{})
	clk.Advance(31 * time.Second)
	for range 2 {
		post(t, r.srv.URL+"/v1/chat/completions", chatBody).Body.Close()
	}
	st := r.health.Breaker("a", clk.Now())
	if st.State != health.BreakerClosed || !st.Since.Equal(clk.Now()) {
		t.Fatalf("breaker %v since %v; want closed now", st.State, st.Since)
	}
	return st.Since
}

const rampBreaker = `, "breaker": {"consecutive_failures": 3, "open_for": "30s", "half_open_probes": 2, "recovery": "90s"}`

func TestRecoveryRampsTrafficInThreeSteps(t *testing.T) {
	t.Parallel()
	a := detourtest.NewVendor(t, rewrite.OpenAI, "a")
	b := detourtest.NewVendor(t, rewrite.OpenAI, "b")
	var g gridRand
	clk := newClock()
	r := startRunner(t, "api.openai.com", openaiPolicy([]string{upstreamJSON("a", a, ""), upstreamJSON("b", b, "")}, `["a","b"]`, rampBreaker),
		func(cr *chain.Runner) { cr.Now, cr.Sleep, cr.Rand = clk.Now, clk.Sleep, g.Rand })
	closed := trippedAndClosed(t, r, clk, a)
	if n := g.draws.Load(); n != 0 {
		t.Fatalf("%d draws before the breaker closed; want none (no ramp while open or half-open)", n)
	}

	const n = 20
	for _, step := range []struct {
		at       time.Duration // after the close
		admitted int
		draws    int64
	}{
		{0, 2, n},                 // first third: 10 %
		{30 * time.Second, 10, n}, // second third: 50 %
		{60 * time.Second, n, 0},  // last third: 100 %, nothing drawn
		{90 * time.Second, n, 0},  // recovery over
	} {
		clk.Advance(closed.Add(step.at).Sub(clk.Now()))
		before, drawsBefore := a.Calls(), g.draws.Load()
		for range n {
			if got := openaiText(t, post(t, r.srv.URL+"/v1/chat/completions", chatBody)); got != "Hello from a." && got != "Hello from b." {
				t.Fatalf("answer %q", got)
			}
		}
		if got := a.Calls() - before; got != step.admitted {
			t.Errorf("%s after the close: a took %d of %d requests; want %d", step.at, got, n, step.admitted)
		}
		if got := g.draws.Load() - drawsBefore; got != step.draws {
			t.Errorf("%s after the close: %d draws; want %d", step.at, got, step.draws)
		}
	}

	// A ramped-away request is a skip with its reason, then b's answer.
	var skipped *chain.Record
	for _, rec := range r.settled(t) {
		if len(rec.Attempts) == 2 && rec.Attempts[0].Outcome == chain.OutcomeSkipped {
			skipped = rec
			break
		}
	}
	if skipped == nil {
		t.Fatal("no request skipped a while it recovered")
	}
	if got := trail(skipped); got != "a:skipped b:ok" {
		t.Errorf("trail %q; want a:skipped b:ok", got)
	}
	want := "recovering: 10 % of traffic until " + closed.Add(30*time.Second).UTC().Format(time.RFC3339)
	if got := skipped.Attempts[0].Reason; !strings.HasPrefix(got, want) || !strings.Contains(got, "breaker.recovery 1m30s") {
		t.Errorf("reason %q; want it to start %q and name breaker.recovery", got, want)
	}
	// Skips never count against the breaker: still closed, since the close.
	if st := r.health.Breaker("a", clk.Now()); st.State != health.BreakerClosed || !st.Since.Equal(closed) || st.Opens != 1 {
		t.Errorf("breaker %v since %v, %d opens; want closed since %v, 1 open", st.State, st.Since, st.Opens, closed)
	}
}

func TestRecoveryNeverRampsAwayTheLastUpstream(t *testing.T) {
	t.Parallel()
	a := detourtest.NewVendor(t, rewrite.OpenAI, "a")
	var g gridRand
	clk := newClock()
	r := startRunner(t, "api.openai.com", openaiPolicy([]string{upstreamJSON("a", a, "")}, `["a"]`, rampBreaker),
		func(cr *chain.Runner) { cr.Now, cr.Sleep, cr.Rand = clk.Now, clk.Sleep, g.Rand })
	trippedAndClosed(t, r, clk, a)
	before := a.Calls()
	for range 10 {
		if got := openaiText(t, post(t, r.srv.URL+"/v1/chat/completions", chatBody)); got != "Hello from a." {
			t.Fatalf("answer %q; want a's (the only upstream)", got)
		}
	}
	if got := a.Calls() - before; got != 10 {
		t.Errorf("a took %d of 10 requests in its first ramp step; want all 10 (it is the last upstream)", got)
	}
	if n := g.draws.Load(); n != 0 {
		t.Errorf("%d draws; want none for the last upstream", n)
	}
}

func TestRecoveryStepsAreThirdsOfRecovery(t *testing.T) {
	t.Parallel()
	closed := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		after time.Duration
		share string
		until time.Duration
		ok    bool
	}{
		{0, "10 %", 30 * time.Second, true},
		{29 * time.Second, "10 %", 30 * time.Second, true},
		{30 * time.Second, "50 %", 60 * time.Second, true},
		{59 * time.Second, "50 %", 60 * time.Second, true},
		{60 * time.Second, "", 0, false}, // the last third admits every request
		{90 * time.Second, "", 0, false},
		{-time.Second, "10 %", 30 * time.Second, true}, // a clock that went back starts over
	} {
		share, until, ok := chain.RecoveryStep(closed, closed.Add(tc.after), 90*time.Second)
		var want time.Time
		if tc.ok {
			want = closed.Add(tc.until)
		}
		if share != tc.share || !until.Equal(want) || ok != tc.ok {
			t.Errorf("%s after the close: %q until %v, %v; want %q until %v, %v", tc.after, share, until, ok, tc.share, want, tc.ok)
		}
	}
	if _, _, ok := chain.RecoveryStep(closed, closed, 0); ok {
		t.Error("a ramp with recovery 0; want none")
	}
	if _, _, ok := chain.RecoveryStep(time.Time{}, closed, time.Minute); ok {
		t.Error("a ramp for a breaker that never closed; want none")
	}
}
