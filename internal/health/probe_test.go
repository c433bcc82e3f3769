package health

import (
	"strings"
	"testing"
	"time"
)

// One failed probe opens a closed breaker whose thresholds app traffic has
// not reached; the chain's BreakerAllow then refuses, naming the probe.
func TestProbeFailedOpensAtOnce(t *testing.T) {
	t.Parallel()
	r := New()
	cfg := BreakerConfig{ConsecutiveFailures: 5, OpenFor: time.Minute, HalfOpenProbes: 1}
	send(t, r, cfg, t0, S)
	r.ProbeFailed("a", cfg, t0.Add(time.Second), "503 overloaded")
	_, ok, why := r.BreakerAllow("a", cfg, t0.Add(2*time.Second))
	if ok || !strings.Contains(why, "probe failed: 503 overloaded") {
		t.Errorf("after a failed probe: allowed %t, %q; want a refusal naming the probe", ok, why)
	}
	if s := r.Breaker("a", t0.Add(2*time.Second)); s.State != BreakerOpen || s.Opens != 1 || !s.Until.Equal(t0.Add(61*time.Second)) {
		t.Errorf("snapshot %+v; want open until t0+61s, opened once", s)
	}
}

// A failed probe while open keeps the breaker open for another OpenFor; it
// never shortens the period, and it counts no new opening.
func TestProbeFailedKeepsOpen(t *testing.T) {
	t.Parallel()
	r := New()
	cfg := BreakerConfig{OpenFor: time.Minute, HalfOpenProbes: 1}
	r.ProbeFailed("a", cfg, t0, "x")
	r.ProbeFailed("a", cfg, t0.Add(30*time.Second), "y")
	s := r.Breaker("a", t0.Add(70*time.Second))
	if s.State != BreakerOpen || !s.Until.Equal(t0.Add(90*time.Second)) || s.Opens != 1 {
		t.Errorf("snapshot %+v; want still open until t0+90s, opened once", s)
	}
	// The period is over: the next failed probe opens a new one.
	r.ProbeFailed("a", cfg, t0.Add(100*time.Second), "z")
	if s := r.Breaker("a", t0.Add(100*time.Second)); s.State != BreakerOpen || s.Opens != 2 {
		t.Errorf("after the period: %+v; want open again, opened twice", s)
	}
}

// A passing probe turns an open breaker half-open at once and counts as one
// of its probes: with HalfOpenProbes 1 it closes it, with 3 it takes three
// (or app requests to make up the rest).
func TestProbePassedClosesThroughHalfOpen(t *testing.T) {
	t.Parallel()
	r := New()
	one := BreakerConfig{OpenFor: time.Hour, HalfOpenProbes: 1}
	r.ProbeFailed("a", one, t0, "x")
	if !r.ProbePassed("a", one, t0.Add(time.Second)) {
		t.Error("HalfOpenProbes 1: a passing probe did not close the breaker")
	}
	if _, ok, why := r.BreakerAllow("a", one, t0.Add(2*time.Second)); !ok {
		t.Errorf("closed by a probe, yet refused: %s", why)
	}

	three := BreakerConfig{OpenFor: time.Hour, HalfOpenProbes: 3}
	r.ProbeFailed("b", three, t0, "x")
	if r.ProbePassed("b", three, t0.Add(time.Second)) {
		t.Error("HalfOpenProbes 3: one passing probe closed the breaker")
	}
	if s := r.Breaker("b", t0.Add(time.Second)); s.State != BreakerHalfOpen || s.Probes != 1 || !s.Since.Equal(t0.Add(time.Second)) {
		t.Errorf("after one passing probe: %+v; want half-open since the probe, 1 probe succeeded", s)
	}
	// An app request is one more half-open probe; the next passing probe
	// is the third success.
	tk, ok, _ := r.BreakerAllow("b", three, t0.Add(2*time.Second))
	if !ok {
		t.Fatal("half-open with one success refused an app request")
	}
	tk.Done(BreakerSuccess, t0.Add(2*time.Second))
	if !r.ProbePassed("b", three, t0.Add(3*time.Second)) {
		t.Error("third success (probe, request, probe) did not close the breaker")
	}
	// A closed breaker is app traffic's to judge: a passing probe changes
	// nothing.
	if r.ProbePassed("b", three, t0.Add(4*time.Second)) {
		t.Error("a passing probe on a closed breaker reported closing it")
	}
}
