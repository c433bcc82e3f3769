package health

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

const (
	N = BreakerNeutral
	S = BreakerSuccess
	H = BreakerHard
	T = BreakerSoft // a timeout
)

func repeat(res BreakerResult, n int) []BreakerResult {
	out := make([]BreakerResult, n)
	for i := range out {
		out[i] = res
	}
	return out
}

// send admits one attempt and finishes it at once with res.
func send(t *testing.T, r *Registry, cfg BreakerConfig, now time.Time, res BreakerResult) {
	t.Helper()
	tk, ok, reason := r.BreakerAllow("a", cfg, now)
	if !ok {
		t.Fatalf("BreakerAllow at %v refused: %s", now.Sub(t0), reason)
	}
	tk.Done(res, now)
}

func TestBreakerTriggers(t *testing.T) {
	tests := []struct {
		name     string
		cfg      BreakerConfig
		results  []BreakerResult
		openedAt int // index of the result after which it opened; -1 never
		reason   string
	}{
		{"consecutive failures", BreakerConfig{ConsecutiveFailures: 3}, []BreakerResult{H, H, H}, 2, "3 consecutive failures"},
		{"a success breaks the run", BreakerConfig{ConsecutiveFailures: 3}, []BreakerResult{H, H, S, H, H}, -1, ""},
		{"a timeout does not break a failure run", BreakerConfig{ConsecutiveFailures: 3}, []BreakerResult{H, H, T, H}, 3, "3 consecutive failures"},
		{"neutral is not counted", BreakerConfig{ConsecutiveFailures: 3}, []BreakerResult{H, N, H, N, N, H}, 5, "3 consecutive failures"},
		{"consecutive timeouts", BreakerConfig{ConsecutiveTimeouts: 2}, []BreakerResult{T, T}, 1, "2 consecutive timeouts"},
		{"a failure does not break a timeout run", BreakerConfig{ConsecutiveTimeouts: 2}, []BreakerResult{T, H, T}, 2, "2 consecutive timeouts"},
		{"a timeout is not a failure", BreakerConfig{ConsecutiveFailures: 2}, []BreakerResult{T, T, T, T}, -1, ""},
		{"failure rate", BreakerConfig{FailureRate: 0.5, Window: 4, MinRequests: 4}, []BreakerResult{S, H, S, H}, 3, "failure rate 50% (2 of last 4 attempts)"},
		{"rate judged only from MinRequests", BreakerConfig{FailureRate: 0.5, Window: 10, MinRequests: 5}, []BreakerResult{H, H, H, H, H}, 4, "failure rate 100% (5 of last 5 attempts)"},
		{"MinRequests 0 means a full window", BreakerConfig{FailureRate: 0.5, Window: 4}, []BreakerResult{H, H, H, S, H}, 4, "failure rate 75% (3 of last 4 attempts)"},
		{"MinRequests above Window means Window", BreakerConfig{FailureRate: 0.5, Window: 2, MinRequests: 50}, []BreakerResult{S, H}, 1, "failure rate 50% (1 of last 2 attempts)"},
		{"old failures leave the window", BreakerConfig{FailureRate: 0.5, Window: 4, MinRequests: 4}, []BreakerResult{H, S, S, S, S, S, S, H}, -1, ""},
		{"neutral stays out of the window", BreakerConfig{FailureRate: 1, Window: 2}, []BreakerResult{H, N, N, H}, 3, "failure rate 100% (2 of last 2 attempts)"},
		{"a rate at the threshold opens", BreakerConfig{FailureRate: 0.5, Window: 2}, []BreakerResult{S, H}, 1, "failure rate 50% (1 of last 2 attempts)"},
		{"timeout rate", BreakerConfig{TimeoutRate: 0.5, Window: 4}, []BreakerResult{T, S, T, S, S, T}, 5, "timeout rate 50% (2 of last 4 attempts)"},
		{"timeouts are not failures for the rate", BreakerConfig{FailureRate: 0.5, Window: 4}, []BreakerResult{T, T, T, T, H}, -1, ""},
		{"zero config never opens", BreakerConfig{}, []BreakerResult{H, H, H, H, H, T, T, T, T, T}, -1, ""},
		{"a decimal rate met exactly", BreakerConfig{FailureRate: 0.56, Window: 25}, append(repeat(S, 11), repeat(H, 14)...), 24, "failure rate 56% (14 of last 25 attempts)"},
		{"window 1", BreakerConfig{FailureRate: 1}, []BreakerResult{S, S, H}, 2, "failure rate 100% (1 of last 1 attempt)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := New()
			openedAt := -1
			for i, res := range tt.results {
				send(t, r, tt.cfg, t0, res)
				if s := r.Breaker("a", t0); s.State != BreakerClosed {
					openedAt = i
					break
				}
			}
			s := r.Breaker("a", t0)
			if openedAt != tt.openedAt || s.Reason != tt.reason {
				t.Fatalf("opened after result %d with reason %q; want %d, %q", openedAt, s.Reason, tt.openedAt, tt.reason)
			}
			if openedAt < 0 {
				return
			}
			// Opening clears the window and the runs, counts an open, and
			// sets the open period.
			want := BreakerSnapshot{State: BreakerOpen, Since: t0, Until: t0.Add(FallbackOpenFor), Reason: tt.reason, Opens: 1}
			if s != want {
				t.Fatalf("snapshot = %+v\nwant       %+v", s, want)
			}
		})
	}
}

func TestBreakerLifecycle(t *testing.T) {
	r := New()
	cfg := BreakerConfig{ConsecutiveFailures: 3, Window: 10, OpenFor: time.Minute, HalfOpenProbes: 2}
	for range 3 {
		send(t, r, cfg, t0, H)
	}

	// Open: refused, with the end of the period in the reason.
	at := t0.Add(59 * time.Second)
	if _, ok, reason := r.BreakerAllow("a", cfg, at); ok || reason != "breaker open until 2026-11-30T12:01:00Z (3 consecutive failures)" {
		t.Fatalf("open breaker: ok %v, reason %q", ok, reason)
	}

	// OpenFor later: half-open, K probes, then refusals.
	at = t0.Add(2 * time.Minute)
	if s := r.Breaker("a", at); s.State != BreakerHalfOpen || !s.Since.Equal(t0.Add(time.Minute)) {
		t.Fatalf("snapshot after OpenFor = %v since %v; want half_open since the period's end", s.State, s.Since)
	}
	p1, ok1, _ := r.BreakerAllow("a", cfg, at)
	p2, ok2, _ := r.BreakerAllow("a", cfg, at)
	if !ok1 || !ok2 {
		t.Fatalf("half-open admitted %v, %v; want 2 probes", ok1, ok2)
	}
	if _, ok, reason := r.BreakerAllow("a", cfg, at); ok || reason != "breaker half-open: 2 probes in flight" {
		t.Fatalf("third request in half-open: ok %v, reason %q", ok, reason)
	}
	p1.Done(S, at)
	if _, ok, reason := r.BreakerAllow("a", cfg, at); ok || reason != "breaker half-open: 1 probe in flight, 1 succeeded" {
		t.Fatalf("after one probe succeeded: ok %v, reason %q", ok, reason)
	}
	if s := r.Breaker("a", at); s.State != BreakerHalfOpen || s.Probes != 2 {
		t.Fatalf("snapshot = %+v; want half_open with 2 probes", s)
	}

	// All K succeeded: closed, with a fresh window.
	at = at.Add(time.Second)
	p2.Done(S, at)
	want := BreakerSnapshot{State: BreakerClosed, Since: at, Reason: "3 consecutive failures", Opens: 1}
	if s := r.Breaker("a", at); s != want {
		t.Fatalf("after K probes succeeded: %+v\nwant %+v", s, want)
	}
	// The failures that opened it are forgotten: two more do not reopen it.
	send(t, r, cfg, at, H)
	send(t, r, cfg, at, H)
	if s := r.Breaker("a", at); s.State != BreakerClosed || s.ConsecutiveFailures != 2 || s.WindowCount != 2 || s.WindowFailures != 2 {
		t.Fatalf("after 2 new failures: %+v; want closed, 2 failures counted", s)
	}
}

// openHalf opens a's breaker (3 failures at t0) and returns the time it turns
// half-open.
func openHalf(t *testing.T, r *Registry, cfg BreakerConfig) time.Time {
	t.Helper()
	for range 3 {
		send(t, r, cfg, t0, H)
	}
	return t0.Add(cfg.OpenFor)
}

func TestBreakerProbeResult(t *testing.T) {
	cfg := BreakerConfig{ConsecutiveFailures: 3, OpenFor: time.Minute, HalfOpenProbes: 2}
	tests := []struct {
		res    BreakerResult
		state  BreakerState
		reason string
		opens  uint64
	}{
		{H, BreakerOpen, "half-open probe failed", 2},
		{T, BreakerOpen, "half-open probe timed out", 2},
		{N, BreakerHalfOpen, "3 consecutive failures", 1}, // the slot is given back
		{S, BreakerHalfOpen, "3 consecutive failures", 1}, // 1 of 2
	}
	for _, tt := range tests {
		t.Run(tt.res.String(), func(t *testing.T) {
			r := New()
			half := openHalf(t, r, cfg)
			p1, _, _ := r.BreakerAllow("a", cfg, half)
			p2, _, _ := r.BreakerAllow("a", cfg, half)
			at := half.Add(5 * time.Second)
			p1.Done(tt.res, at)
			s := r.Breaker("a", at)
			if s.State != tt.state || s.Reason != tt.reason || s.Opens != tt.opens {
				t.Fatalf("after a %v probe: %+v; want %v, %q, %d opens", tt.res, s, tt.state, tt.reason, tt.opens)
			}
			switch tt.state {
			case BreakerOpen:
				// A new full open period from the probe's end.
				if !s.Since.Equal(at) || !s.Until.Equal(at.Add(time.Minute)) {
					t.Errorf("reopened %v until %v; want %v until %v", s.Since, s.Until, at, at.Add(time.Minute))
				}
				// The other probe's result belongs to the failed period.
				p2.Done(S, at)
				if s2 := r.Breaker("a", at); s2 != s {
					t.Errorf("a probe of the failed period changed the breaker: %+v", s2)
				}
			case BreakerHalfOpen:
				_, ok, reason := r.BreakerAllow("a", cfg, at)
				if want := tt.res == N; ok != want {
					t.Errorf("after a %v probe another request admitted = %v (%s); want %v", tt.res, ok, reason, want)
				}
			}
		})
	}
}

func TestBreakerIgnoresResultsOfEarlierGenerations(t *testing.T) {
	cfg := BreakerConfig{ConsecutiveFailures: 3, OpenFor: time.Minute, HalfOpenProbes: 1}
	tests := []struct {
		name string
		// finish runs after slow (admitted while closed at t0) is in
		// flight and a's breaker opened at t0; it returns the time at
		// which slow finishes.
		finish func(t *testing.T, r *Registry) time.Time
		res    BreakerResult
		want   BreakerState
	}{
		{"failure while open does not extend it", func(*testing.T, *Registry) time.Time { return t0.Add(30 * time.Second) }, H, BreakerOpen},
		{"failure while half-open does not reopen it", func(t *testing.T, r *Registry) time.Time {
			r.BreakerAllow("a", cfg, t0.Add(time.Minute))
			return t0.Add(time.Minute)
		}, H, BreakerHalfOpen},
		{"success while half-open is not a probe", func(t *testing.T, r *Registry) time.Time {
			r.BreakerAllow("a", cfg, t0.Add(time.Minute))
			return t0.Add(time.Minute)
		}, S, BreakerHalfOpen},
		{"failure after closing again is old news", func(t *testing.T, r *Registry) time.Time {
			send(t, r, cfg, t0.Add(time.Minute), S) // the probe
			return t0.Add(2 * time.Minute)
		}, H, BreakerClosed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := New()
			slow, _, _ := r.BreakerAllow("a", cfg, t0)
			openHalf(t, r, cfg)
			at := tt.finish(t, r)
			before := r.Breaker("a", at)
			slow.Done(tt.res, at)
			after := r.Breaker("a", at)
			if after != before || after.State != tt.want {
				t.Fatalf("slow %v changed the breaker:\n%+v\nwas %+v", tt.res, after, before)
			}
		})
	}
}

func TestBreakerProbeDoneTwiceCountsOnce(t *testing.T) {
	r := New()
	cfg := BreakerConfig{ConsecutiveFailures: 3, OpenFor: time.Minute, HalfOpenProbes: 2}
	half := openHalf(t, r, cfg)
	p1, _, _ := r.BreakerAllow("a", cfg, half)
	p1.Done(S, half)
	p1.Done(S, half)
	if s := r.Breaker("a", half); s.State != BreakerHalfOpen || s.Probes != 1 {
		t.Fatalf("one probe done twice: %+v; want half_open, 1 probe", s)
	}
}

func TestBreakerZeroTicketIsNoop(t *testing.T) {
	r := New()
	cfg := BreakerConfig{ConsecutiveFailures: 1, OpenFor: time.Minute}
	send(t, r, cfg, t0, H)
	tk, ok, _ := r.BreakerAllow("a", cfg, t0)
	if ok || tk != (Ticket{}) {
		t.Fatalf("refusal returned ok %v, ticket %+v; want the zero Ticket", ok, tk)
	}
	tk.Done(H, t0) // the last upstream, sent anyway
	if s := r.Breaker("a", t0); s.Opens != 1 || !s.Until.Equal(t0.Add(time.Minute)) {
		t.Fatalf("zero ticket changed the breaker: %+v", s)
	}
}

func TestResetBreaker(t *testing.T) {
	r := New()
	r.ResetBreaker("unknown") // no panic, nothing created
	if n := len(r.Breakers(t0)); n != 0 {
		t.Fatalf("ResetBreaker created a breaker: %d", n)
	}
	cfg := BreakerConfig{ConsecutiveFailures: 3, OpenFor: time.Hour}
	slow, _, _ := r.BreakerAllow("a", cfg, t0)
	openHalf(t, r, cfg)
	r.ResetBreaker("a")
	want := BreakerSnapshot{State: BreakerClosed, Reason: "3 consecutive failures", Opens: 1}
	if s := r.Breaker("a", t0); s != want {
		t.Fatalf("after reset: %+v\nwant %+v", s, want)
	}
	if _, ok, reason := r.BreakerAllow("a", cfg, t0); !ok {
		t.Fatalf("after reset refused: %s", reason)
	}
	slow.Done(H, t0)
	if s := r.Breaker("a", t0); s != want {
		t.Fatalf("a ticket from before the reset counted: %+v", s)
	}
}

func TestBreakerConfigChanges(t *testing.T) {
	t.Run("window shrinks to the most recent results", func(t *testing.T) {
		r := New()
		cfg := BreakerConfig{Window: 10}
		for _, res := range []BreakerResult{H, H, H, H, S, T, S, H} {
			send(t, r, cfg, t0, res)
		}
		cfg.Window = 3 // keeps T, S, H
		r.BreakerAllow("a", cfg, t0)
		if s := r.Breaker("a", t0); s.WindowCount != 3 || s.WindowFailures != 1 || s.WindowTimeouts != 1 {
			t.Fatalf("after shrinking to 3: %+v; want 3 held, 1 failure, 1 timeout", s)
		}
		// The ring keeps working at its new size: 2 more failures push
		// out T and S.
		cfg.FailureRate = 1
		send(t, r, cfg, t0, H)
		if s := r.Breaker("a", t0); s.State != BreakerClosed || s.WindowTimeouts != 0 || s.WindowFailures != 2 {
			t.Fatalf("after one more failure: %+v", s)
		}
		send(t, r, cfg, t0, H)
		if s := r.Breaker("a", t0); s.State != BreakerOpen || s.Reason != "failure rate 100% (3 of last 3 attempts)" {
			t.Fatalf("after two more failures: %+v; want open by rate", s)
		}
	})
	t.Run("window grows keeping what it holds", func(t *testing.T) {
		r := New()
		cfg := BreakerConfig{Window: 3}
		for _, res := range []BreakerResult{S, S, S, H, T} { // wrapped: S, H, T
			send(t, r, cfg, t0, res)
		}
		cfg.Window, cfg.FailureRate = 5, 0.6
		send(t, r, cfg, t0, H) // S, H, T, H: 2 of 4, not judged yet
		if s := r.Breaker("a", t0); s.State != BreakerClosed || s.WindowCount != 4 || s.WindowFailures != 2 || s.WindowTimeouts != 1 {
			t.Fatalf("after growing to 5: %+v", s)
		}
		send(t, r, cfg, t0, H) // 3 of 5
		if s := r.Breaker("a", t0); s.Reason != "failure rate 60% (3 of last 5 attempts)" {
			t.Fatalf("full grown window: %+v; want open at 60%%", s)
		}
	})
	t.Run("K lowered below the successes closes", func(t *testing.T) {
		r := New()
		cfg := BreakerConfig{ConsecutiveFailures: 3, OpenFor: time.Minute, HalfOpenProbes: 3}
		half := openHalf(t, r, cfg)
		for range 2 {
			send(t, r, cfg, half, S)
		}
		cfg.HalfOpenProbes = 2
		if tk, ok, _ := r.BreakerAllow("a", cfg, half); !ok || tk.probe != 0 {
			t.Fatalf("after K lowered to the successes: ok %v, probe %d; want closed, a plain ticket", ok, tk.probe)
		}
		if s := r.Breaker("a", half); s.State != BreakerClosed {
			t.Fatalf("state %v; want closed", s.State)
		}
	})
	t.Run("OpenFor applies from the next opening", func(t *testing.T) {
		r := New()
		cfg := BreakerConfig{ConsecutiveFailures: 1, OpenFor: time.Minute}
		send(t, r, cfg, t0, H)
		cfg.OpenFor = time.Hour
		if _, ok, _ := r.BreakerAllow("a", cfg, t0.Add(time.Minute)); !ok {
			t.Fatal("open period lengthened by a reload")
		}
	})
}

func TestBreakerSnapshots(t *testing.T) {
	r := New()
	if s := r.Breaker("nobody", t0); s != (BreakerSnapshot{}) || s.State.String() != "closed" {
		t.Fatalf("unknown breaker = %+v; want closed zero", s)
	}
	cfg := BreakerConfig{ConsecutiveFailures: 5, ConsecutiveTimeouts: 5, Window: 10}
	for _, res := range []BreakerResult{S, H, T, H, N} {
		tk, _, _ := r.BreakerAllow("a", cfg, t0)
		tk.Done(res, t0)
	}
	r.BreakerAllow("b", cfg, t0)
	all := r.Breakers(t0)
	want := BreakerSnapshot{ConsecutiveFailures: 2, ConsecutiveTimeouts: 1, WindowCount: 4, WindowFailures: 2, WindowTimeouts: 1}
	if len(all) != 2 || all["a"] != want || all["b"] != (BreakerSnapshot{}) {
		t.Fatalf("Breakers = %+v; want a %+v and a zero b", all, want)
	}
}

func TestBreakerStrings(t *testing.T) {
	for v, want := range map[interface{ String() string }]string{
		BreakerClosed: "closed", BreakerOpen: "open", BreakerHalfOpen: "half_open", BreakerState(9): "BreakerState(9)",
		BreakerNeutral: "neutral", BreakerSuccess: "success", BreakerHard: "hard", BreakerSoft: "soft",
	} {
		if got := v.String(); got != want {
			t.Errorf("String() = %q; want %q", got, want)
		}
	}
}

// TestBreakerHalfOpenAdmitsKUnderContention: however many requests arrive at
// once when the open period ends, exactly K probe.
func TestBreakerHalfOpenAdmitsKUnderContention(t *testing.T) {
	r := New()
	cfg := BreakerConfig{ConsecutiveFailures: 3, OpenFor: time.Minute, HalfOpenProbes: 3}
	half := openHalf(t, r, cfg)
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			if _, ok, _ := r.BreakerAllow("a", cfg, half); ok {
				admitted.Add(1)
			}
		})
	}
	wg.Wait()
	if n := admitted.Load(); n != 3 {
		t.Fatalf("admitted %d probes; want 3", n)
	}
}

// TestBreakerConcurrent is for -race: requests on a virtual clock, results
// at random, with snapshots, reloads and resets at once; the invariants must
// hold throughout.
func TestBreakerConcurrent(t *testing.T) {
	r := New()
	var clock atomic.Int64 // ms since t0
	now := func() time.Time { return t0.Add(time.Duration(clock.Load()) * time.Millisecond) }
	cfgs := []BreakerConfig{
		{ConsecutiveFailures: 5, FailureRate: 0.5, Window: 20, MinRequests: 10, ConsecutiveTimeouts: 3, TimeoutRate: 0.3, OpenFor: 50 * time.Millisecond, HalfOpenProbes: 3},
		{ConsecutiveFailures: 3, FailureRate: 0.4, Window: 7, OpenFor: 20 * time.Millisecond, HalfOpenProbes: 2},
	}
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			var held []Ticket
			for i := range 2000 {
				cfg := cfgs[(i/500)%2]
				if tk, ok, _ := r.BreakerAllow("a", cfg, now()); ok {
					held = append(held, tk)
				}
				if len(held) > 0 && rng.IntN(2) == 0 {
					k := rng.IntN(len(held))
					held[k].Done(BreakerResult(rng.IntN(4)), now())
					held = dropTicket(held, k)
				}
				switch {
				case g == 0:
					clock.Add(1)
				case g == 1 && i%100 == 0:
					s := r.Breaker("a", now())
					if (s.State == BreakerHalfOpen && s.Probes > 3) || s.WindowCount > 20 {
						t.Errorf("invariant broken: %+v", s)
					}
				case g == 2 && i == 1000:
					r.ResetBreaker("a")
				}
			}
			for _, tk := range held {
				tk.Done(BreakerSuccess, now())
			}
		})
	}
	wg.Wait()
	if s := r.Breaker("a", now()); s.Opens == 0 {
		t.Errorf("breaker never opened in a run with ~40%% failures: %+v", s)
	}
}

func dropTicket(s []Ticket, i int) []Ticket {
	s[i] = s[len(s)-1]
	return s[:len(s)-1]
}

// BenchmarkBreakerAllowDone measures what every upstream attempt pays to its
// breaker on the request path.
func BenchmarkBreakerAllowDone(b *testing.B) {
	r := New()
	cfg := BreakerConfig{ConsecutiveFailures: 5, FailureRate: 0.5, Window: 20, MinRequests: 10, OpenFor: time.Minute, HalfOpenProbes: 3}
	now := t0
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			tk, _, _ := r.BreakerAllow("primary", cfg, now)
			tk.Done(BreakerSuccess, now)
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				tk, _, _ := r.BreakerAllow("primary", cfg, now)
				tk.Done(BreakerSuccess, now)
			}
		})
	})
	b.Run("open refusal", func(b *testing.B) {
		for range cfg.ConsecutiveFailures {
			tk, _, _ := r.BreakerAllow("down", cfg, now)
			tk.Done(BreakerHard, now)
		}
		b.ReportAllocs()
		for b.Loop() {
			if _, ok, _ := r.BreakerAllow("down", cfg, now); ok {
				b.Fatal("admitted")
			}
		}
	})
}
