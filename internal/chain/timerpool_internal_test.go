package chain

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/detour-proxy/detour/internal/testsupport"
)

// TestAttemptTimersAreReusedOnlyWhenTheyNeverWentOff: an attempt that
// stopped its timer before it went off gives it to the Runner's next
// attempt; one whose timer went off does not (its callback may still be
// on its way), and that callback only ever cancels its own attempt.
func TestAttemptTimersAreReusedOnlyWhenTheyNeverWentOff(t *testing.T) {
	t.Parallel()
	var pool timerPool
	var cancels [3]atomic.Int32
	timer := func(i int) *attemptTimer {
		return &attemptTimer{pool: &pool, cancel: func() { cancels[i].Add(1) }}
	}

	a := timer(0)
	a.arm(time.Hour, phaseFirstByte)
	a.arm(time.Hour, phaseIdle)
	kept := a.pt
	a.stop()
	a.arm(time.Nanosecond, phaseIdle) // over: ignored, the timer is another's now
	b := timer(1)
	b.arm(time.Nanosecond, phaseFirstByte)
	if b.pt != kept {
		t.Fatal("a timer stopped before it went off was not reused")
	}
	testsupport.Eventually(t, 10*time.Second, "the reused timer went off", func() bool { return b.firedPhase() != "" })
	b.arm(time.Hour, phaseIdle) // fired: ignored
	b.stop()
	if got := b.firedPhase(); got != phaseFirstByte {
		t.Errorf("fired phase %q, want %q", got, phaseFirstByte)
	}
	if a.firedPhase() != "" || cancels[0].Load() != 0 || cancels[1].Load() != 1 {
		t.Errorf("cancels: first attempt %d (fired %q), second %d; want 0, 1",
			cancels[0].Load(), a.firedPhase(), cancels[1].Load())
	}

	// b's timer went off: the next attempt gets a new one.
	c := timer(2)
	c.arm(time.Hour, phaseFirstByte)
	if c.pt == kept {
		t.Fatal("a timer that went off was reused")
	}
	c.stop()
	if len(pool.free) != 1 || pool.free[0] == kept {
		t.Errorf("pool holds %d timers; want c's alone", len(pool.free))
	}
}

// TestAttemptTimerThatWentOffWhileReArmedIsNotReused: a timer that went
// off between two arms (the attempt re-armed it before its callback had
// told it so) is not given back either: its callback ran, and a later one
// could.
func TestAttemptTimerThatWentOffWhileReArmedIsNotReused(t *testing.T) {
	t.Parallel()
	var pool timerPool
	a := &attemptTimer{pool: &pool, cancel: func() {}}
	// The callback reports to probe rather than to a, so that a learns of
	// it only from its next arm, as when a's own callback is still on its
	// way.
	went := make(chan struct{})
	probe := &attemptTimer{cancel: func() { close(went) }}
	a.phase = phaseIndex(phaseFirstByte)
	a.pt = pool.start(probe, time.Nanosecond)
	select {
	case <-went:
	case <-time.After(10 * time.Second):
		t.Fatal("the timer did not go off within 10s")
	}
	a.arm(time.Hour, phaseIdle)
	a.stop()
	if len(pool.free) != 0 {
		t.Errorf("pool holds %d timers; want none", len(pool.free))
	}
}

// TestPhaseIndexNamesEveryPhase: every timeout phase an attempt is armed
// for reads back as its name.
func TestPhaseIndexNamesEveryPhase(t *testing.T) {
	t.Parallel()
	for _, p := range []string{phaseConnect, phaseFirstByte, phaseIdle, phaseDeadline} {
		if got := phaseNames[phaseIndex(p)]; got != p || phaseIndex(p) == 0 {
			t.Errorf("phase %q reads back as %q (index %d)", p, got, phaseIndex(p))
		}
	}
}
