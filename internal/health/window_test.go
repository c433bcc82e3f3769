package health

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/detour-proxy/detour/policy"
)

// The selection's window says what /status's Stats says about the same
// attempts: the same samples, successes, p95 and failure rate, through
// evictions by count and by age.
func TestWindowsAgreeWithStats(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	var ws Windows
	reg := New()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 2000 {
		// Bursts and gaps, so that age evicts as well as count.
		now = now.Add(time.Duration(rng.IntN(8000)) * time.Millisecond)
		res := Success
		if rng.IntN(5) == 0 {
			res = Failure
		}
		if rng.IntN(20) == 0 {
			res = Neutral
		}
		lat := time.Duration(rng.IntN(50)) * 10 * time.Millisecond
		ws.Begin("u")
		reg.Begin("u")
		ws.Record("u", res, lat, now)
		reg.End("u", res, lat, now)
		if i%7 == 0 {
			now = now.Add(time.Duration(rng.IntN(3)) * time.Minute)
		}
		got, want := ws.Read("u", now), reg.Stats("u", now)
		if got.Samples != want.Samples || got.Successes != want.Successes || got.P95 != want.P95 || math.Abs(got.FailureRate-(1-want.SuccessRate)) > 1e-9 && want.Samples > 0 {
			t.Fatalf("step %d: window %+v; stats %+v", i, got, want)
		}
		if got.InFlight != 0 {
			t.Fatalf("step %d: %d in flight after every Begin was recorded", i, got.InFlight)
		}
	}
}

func TestWindowReadsExpireWithoutWrites(t *testing.T) {
	t.Parallel()
	var ws Windows
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 30 {
		ws.Begin("slow")
		ws.Record("slow", Success, time.Duration(i+1)*time.Second, now.Add(time.Duration(i)*time.Second))
	}
	if w := ws.Read("slow", now.Add(30*time.Second)); w.Samples != 30 || w.P95 != 29*time.Second {
		t.Fatalf("window %+v; want 30 samples, p95 29s", w)
	}
	// No attempt since: the samples age out for readers alone.
	if w := ws.Read("slow", now.Add(WindowAge+10*time.Second)); w.Samples != 19 {
		t.Errorf("after %s: %d samples; want the 19 younger than WindowAge", WindowAge+10*time.Second, w.Samples)
	}
	if w := ws.Read("slow", now.Add(WindowAge+time.Hour)); w != (Window{}) {
		t.Errorf("an hour later: %+v; want an empty window", w)
	}
	if w := ws.Read("never", now); w != (Window{}) {
		t.Errorf("an upstream never recorded: %+v", w)
	}
}

func TestWindowCountsInFlight(t *testing.T) {
	t.Parallel()
	var ws Windows
	ws.Begin("u")
	ws.Begin("u")
	if w := ws.Read("u", time.Now()); w.InFlight != 2 || w.Samples != 0 {
		t.Fatalf("%+v; want 2 in flight, no samples", w)
	}
	ws.Record("u", Neutral, 0, time.Now())
	if w := ws.Read("u", time.Now()); w.InFlight != 1 || w.Samples != 0 {
		t.Fatalf("%+v; want 1 in flight, and a neutral attempt not counted", w)
	}
}

// min_samples can be met: the window holds at least as many samples as the
// policy lets min_samples ask for.
func TestWindowHoldsMaxMinSamples(t *testing.T) {
	if WindowSize < policy.MaxMinSamples {
		t.Fatalf("WindowSize %d < policy.MaxMinSamples %d", WindowSize, policy.MaxMinSamples)
	}
}

func TestWindowReadDoesNotAllocate(t *testing.T) {
	var ws Windows
	now := time.Now()
	for range 200 {
		ws.Begin("u")
		ws.Record("u", Success, time.Millisecond, now)
	}
	if n := testing.AllocsPerRun(100, func() { ws.Read("u", now) }); n != 0 {
		t.Errorf("Read allocates %v times; want 0", n)
	}
	if n := testing.AllocsPerRun(100, func() { ws.Begin("u"); ws.Record("u", Success, time.Millisecond, now) }); n != 0 {
		t.Errorf("Begin+Record allocate %v times; want 0", n)
	}
}

func BenchmarkWindowsRead(b *testing.B) {
	var ws Windows
	now := time.Now()
	for i := range 128 {
		ws.Begin("u")
		ws.Record("u", Success, time.Duration(i)*time.Millisecond, now)
	}
	b.ReportAllocs()
	for b.Loop() {
		ws.Read("u", now)
	}
}

func BenchmarkWindowsRecord(b *testing.B) {
	var ws Windows
	now := time.Now()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		ws.Begin("u")
		ws.Record("u", Success, time.Duration(i%997)*time.Millisecond, now)
	}
}
