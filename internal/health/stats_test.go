package health

import (
	"sync"
	"testing"
	"time"
)

func TestStatsCountInFlightSuccessRateAndPercentiles(t *testing.T) {
	r := New()
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	if s := r.Stats("a", t0); s != (Stats{}) {
		t.Fatalf("unknown upstream stats = %+v; want zero", s)
	}
	// 100 successes of 1..100 ms, 25 failures, 5 neutral attempts.
	for i := 1; i <= 100; i++ {
		r.Begin("a")
		r.End("a", Success, time.Duration(i)*time.Millisecond, t0)
	}
	for range 25 {
		r.Begin("a")
		r.End("a", Failure, time.Millisecond, t0)
	}
	for range 5 {
		r.Begin("a")
		r.End("a", Neutral, 0, t0)
	}
	r.Begin("a") // still in flight
	s := r.Stats("a", t0)
	want := Stats{InFlight: 1, Requests: 131, Samples: 125, SuccessRate: 0.8, Successes: 100, P50: 50 * time.Millisecond, P95: 95 * time.Millisecond}
	if s != want {
		t.Fatalf("stats = %+v\nwant    %+v", s, want)
	}
	if o := r.Stats("b", t0); o.Requests != 0 {
		t.Errorf("a's stats leaked to b: %+v", o)
	}
}

func TestStatsWindowIsBoundedBySizeAndAge(t *testing.T) {
	r := New()
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	// Old failures, then more successes than the window holds.
	for range 50 {
		r.Begin("a")
		r.End("a", Failure, 0, t0)
	}
	for range WindowSize + 10 {
		r.Begin("a")
		r.End("a", Success, time.Second, t0.Add(time.Minute))
	}
	s := r.Stats("a", t0.Add(time.Minute))
	if s.Samples != WindowSize || s.SuccessRate != 1 {
		t.Errorf("after %d attempts: samples %d, rate %v; want %d, 1 (oldest dropped)", 50+WindowSize+10, s.Samples, s.SuccessRate, WindowSize)
	}
	if s := r.Stats("a", t0.Add(time.Minute+WindowAge)); s.Samples != 0 || s.Successes != 0 || s.P95 != 0 {
		t.Errorf("after WindowAge: %+v; want an empty window", s)
	}
}

// TestStatsConcurrent is for -race: the request path and /status at once.
func TestStatsConcurrent(t *testing.T) {
	r := New()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 500 {
				r.Begin("a")
				r.End("a", Result(1+(g+i)%2), time.Millisecond, time.Now())
				if i%50 == 0 {
					_ = r.Stats("a", time.Now())
				}
			}
		}()
	}
	wg.Wait()
	if s := r.Stats("a", time.Now()); s.InFlight != 0 || s.Requests != 4000 {
		t.Errorf("stats = %+v; want 0 in flight, 4000 requests", s)
	}
}

// BenchmarkBeginEnd measures what every upstream attempt pays.
func BenchmarkBeginEnd(b *testing.B) {
	r := New()
	now := time.Now()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			r.Begin("primary")
			r.End("primary", Success, time.Millisecond, now)
		}
	})
}
