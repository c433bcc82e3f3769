package health

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// drain acquires at now until refused, releasing each at once, and returns
// how many were admitted and the refusal.
func drain(r *Registry, l Limits, now time.Time) (int, string) {
	for n := 0; ; n++ {
		release, ok, reason := r.Acquire("a", l, now)
		release()
		if !ok {
			return n, reason
		}
		if n > 10000 {
			return n, "unlimited"
		}
	}
}

func TestLimitBucketBurst(t *testing.T) {
	tests := []struct {
		l      Limits
		want   int
		reason string
	}{
		{Limits{RPM: 600}, 10, "limit: 600 rpm reached"}, // a second's worth
		{Limits{RPM: 30}, 1, "limit: 30 rpm reached"},    // at least 1
		{Limits{RPM: 600, Burst: 3}, 3, "limit: 600 rpm reached"},
		{Limits{RPM: 600, Burst: -1}, 10, "limit: 600 rpm reached"},
		{Limits{RPM: -5}, 10001, "unlimited"},
		{Limits{}, 10001, "unlimited"},
	}
	for _, tt := range tests {
		r := New()
		if n, reason := drain(r, tt.l, t0); n != tt.want || reason != tt.reason {
			t.Errorf("%+v: %d admitted, then %q; want %d, %q", tt.l, n, reason, tt.want, tt.reason)
		}
	}
}

func TestLimitBucketRefill(t *testing.T) {
	r := New()
	l := Limits{RPM: 600, Burst: 10} // 10 a second
	steps := []struct {
		at   time.Duration
		want int // admitted at this time before a refusal
	}{
		{0, 10},
		{50 * time.Millisecond, 0}, // half a token
		{100 * time.Millisecond, 1},
		{time.Second, 9},
		{time.Hour, 10}, // capped at the burst
		// The clock goes back (a virtual clock reset): no tokens, no
		// panic; refilling resumes from the reset clock.
		{0, 0},
		{300 * time.Millisecond, 3},
	}
	for _, s := range steps {
		if n, _ := drain(r, l, t0.Add(s.at)); n != s.want {
			t.Fatalf("at %v: %d admitted; want %d", s.at, n, s.want)
		}
	}
	if got := r.Limit("a", t0.Add(400*time.Millisecond)); got.Tokens != 1 || got.Limited != uint64(len(steps)) {
		t.Fatalf("snapshot = %+v; want 1 token, %d refused", got, len(steps))
	}
}

func TestLimitConcurrency(t *testing.T) {
	r := New()
	l := Limits{Concurrency: 2}
	relA, okA, _ := r.Acquire("a", l, t0)
	_, okB, _ := r.Acquire("a", l, t0)
	relC, okC, reason := r.Acquire("a", l, t0)
	if !okA || !okB || okC || reason != "limit: 2 in flight (concurrency 2)" {
		t.Fatalf("3 acquires at concurrency 2: %v %v %v %q", okA, okB, okC, reason)
	}
	if relC == nil {
		t.Fatal("refusal returned a nil release")
	}
	relC() // a no-op
	relA()
	relA() // idempotent
	if s := r.Limit("a", t0); s.InFlight != 1 {
		t.Fatalf("after releasing A twice: %d in flight; want 1", s.InFlight)
	}
	_, okD, _ := r.Acquire("a", l, t0) // takes A's old slot
	relA()                             // A's stale release must not free D's slot
	if _, okE, _ := r.Acquire("a", l, t0); !okD || okE {
		t.Fatalf("D admitted %v, E admitted %v; want true, false", okD, okE)
	}
	if s := r.Limit("a", t0); s.InFlight != 2 || s.Limited != 2 || s.Tokens != 0 || s.Limits != l {
		t.Fatalf("snapshot = %+v; want 2 in flight, 2 refused", s)
	}
}

// TestLimitTakesNeitherUnlessBoth: a refusal by one limit must not spend the
// other.
func TestLimitTakesNeitherUnlessBoth(t *testing.T) {
	r := New()
	l := Limits{RPM: 60, Burst: 1, Concurrency: 1}
	rel, ok, _ := r.Acquire("a", l, t0)
	if !ok {
		t.Fatal("first acquire refused")
	}
	// A token again, but no slot: the token must stay.
	at := t0.Add(time.Second)
	if _, ok, reason := r.Acquire("a", l, at); ok || reason != "limit: 1 in flight (concurrency 1)" {
		t.Fatalf("no slot: ok %v, %q", ok, reason)
	}
	if s := r.Limit("a", at); s.Tokens != 1 {
		t.Fatalf("tokens after a concurrency refusal = %v; want 1", s.Tokens)
	}
	rel()
	// A slot again, no token: the slot must stay free.
	l.Concurrency = 2
	if _, ok, _ := r.Acquire("a", l, at); !ok {
		t.Fatal("acquire with token and slot refused")
	}
	if _, ok, reason := r.Acquire("a", l, at); ok || reason != "limit: 60 rpm reached" {
		t.Fatalf("no token: ok %v, %q", ok, reason)
	}
	if s := r.Limit("a", at); s.InFlight != 1 {
		t.Fatalf("in flight after an rpm refusal = %d; want 1", s.InFlight)
	}
}

func TestLimitConfigChanges(t *testing.T) {
	r := New()
	// Unlimited, then a limit: the bucket starts full.
	drain(r, Limits{}, t0)
	if n, _ := drain(r, Limits{RPM: 120, Burst: 5}, t0); n != 5 {
		t.Fatalf("new bucket admitted %d; want a full 5", n)
	}
	// A larger burst fills at the rate, not at once.
	if n, _ := drain(r, Limits{RPM: 120, Burst: 50}, t0.Add(time.Second)); n != 2 {
		t.Fatalf("after raising the burst: %d admitted; want the 2 refilled", n)
	}
	// A smaller burst caps the tokens at once.
	if s := r.Limit("a", t0.Add(time.Hour)); s.Tokens != 50 {
		t.Fatalf("tokens = %v; want 50", s.Tokens)
	}
	if n, _ := drain(r, Limits{RPM: 120, Burst: 4}, t0.Add(time.Hour)); n != 4 {
		t.Fatalf("after lowering the burst: %d admitted; want 4", n)
	}
	// A lower concurrency refuses until enough finish; a higher one admits.
	var rels []func()
	for range 4 {
		rel, _, _ := r.Acquire("b", Limits{Concurrency: 4}, t0)
		rels = append(rels, rel)
	}
	if _, ok, reason := r.Acquire("b", Limits{Concurrency: 2}, t0); ok || reason != "limit: 4 in flight (concurrency 2)" {
		t.Fatalf("after lowering concurrency: ok %v, %q", ok, reason)
	}
	rels[0]()
	rels[1]()
	if _, ok, _ := r.Acquire("b", Limits{Concurrency: 2}, t0); ok {
		t.Fatal("admitted at 2 in flight, concurrency 2")
	}
	rels[2]()
	if _, ok, _ := r.Acquire("b", Limits{Concurrency: 2}, t0); !ok {
		t.Fatal("refused at 1 in flight, concurrency 2")
	}
}

func TestLimitUnknownName(t *testing.T) {
	if s := New().Limit("nobody", t0); s != (LimitSnapshot{}) {
		t.Fatalf("unknown = %+v; want zero", s)
	}
}

// TestLimitConcurrent is for -race, and checks that the limits hold under
// contention: never more than Concurrency held, never more than the burst
// taken at one instant.
func TestLimitConcurrent(t *testing.T) {
	r := New()
	const c = 4
	var held, maxHeld, admitted atomic.Int64
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for range 500 {
				rel, ok, _ := r.Acquire("a", Limits{Concurrency: c}, t0)
				if ok {
					n := held.Add(1)
					for m := maxHeld.Load(); n > m && !maxHeld.CompareAndSwap(m, n); m = maxHeld.Load() {
					}
					held.Add(-1)
				}
				rel()
				rel()
				if _, ok, _ := r.Acquire("b", Limits{RPM: 6000, Burst: 100}, t0); ok {
					admitted.Add(1)
				}
				_ = r.Limit("a", t0)
			}
		})
	}
	wg.Wait()
	if m := maxHeld.Load(); m > c {
		t.Errorf("%d held at once; want at most %d", m, c)
	}
	if s := r.Limit("a", t0); s.InFlight != 0 {
		t.Errorf("%d in flight after all released", s.InFlight)
	}
	if n := admitted.Load(); n != 100 {
		t.Errorf("bucket of 100 admitted %d at one instant", n)
	}
}

// BenchmarkAcquireRelease measures what an attempt pays to its upstream's
// limits on the request path.
func BenchmarkAcquireRelease(b *testing.B) {
	for _, bc := range []struct {
		name string
		l    Limits
	}{
		{"unlimited", Limits{}},
		{"rpm", Limits{RPM: 1 << 30}},
		{"rpm+concurrency", Limits{RPM: 1 << 30, Concurrency: 1 << 20}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			r := New()
			now := t0
			b.ReportAllocs()
			for b.Loop() {
				now = now.Add(time.Millisecond)
				rel, _, _ := r.Acquire("primary", bc.l, now)
				rel()
			}
		})
		b.Run(bc.name+"/parallel", func(b *testing.B) {
			r := New()
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				now := t0
				for pb.Next() {
					now = now.Add(time.Millisecond)
					rel, _, _ := r.Acquire("primary", bc.l, now)
					rel()
				}
			})
		})
	}
}
