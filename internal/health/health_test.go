package health

import (
	"testing"
	"time"
)

func TestCooldownLifecycle(t *testing.T) {
	r := New()
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	if _, ok := r.CoolingDown("a", t0); ok {
		t.Fatal("new registry: a is cooling down")
	}
	r.StartCooldown("a", t0.Add(10*time.Minute), "quota")
	if c, ok := r.CoolingDown("a", t0.Add(time.Minute)); !ok || c.Reason != "quota" {
		t.Fatalf("CoolingDown after start = %+v, %v; want quota, true", c, ok)
	}
	// A shorter cooldown must not cut a longer one short.
	r.StartCooldown("a", t0.Add(time.Minute), "rate")
	if c, _ := r.CoolingDown("a", t0); !c.Until.Equal(t0.Add(10 * time.Minute)) {
		t.Fatalf("until = %v; want the longer cooldown kept", c.Until)
	}
	if _, ok := r.CoolingDown("b", t0); ok {
		t.Fatal("cooldown of a leaked to b")
	}
	if _, ok := r.CoolingDown("a", t0.Add(10*time.Minute)); ok {
		t.Fatal("a still cooling down at its end time")
	}
	if n := len(r.Cooldowns(t0)); n != 0 {
		t.Fatalf("expired cooldown still listed: %d", n)
	}
}
