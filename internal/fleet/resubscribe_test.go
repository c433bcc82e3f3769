package fleet

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/detour-proxy/detour/internal/health"
	"github.com/detour-proxy/detour/internal/testsupport"
	"github.com/detour-proxy/detour/policy"
)

// TestResubscriptionReadsTheFleetBack: when the subscription's connection
// is lost (CLIENT KILL TYPE pubsub) it comes back by itself, and what the
// fleet decided meanwhile, which no message will bring, is read back at
// once rather than at the next periodic resync (an hour away here).
func TestResubscriptionReadsTheFleetBack(t *testing.T) {
	t.Parallel()
	r := testsupport.StartRedis(t)
	clk := newClock()
	reg := health.New()
	const prefix = "resub:"
	s, err := Start(Options{Redis: policy.RedisPolicy{URL: r.URL(), KeyPrefix: prefix, Timeout: time.Second},
		Registry: reg, Now: clk.Now, Member: "m0", CheckInterval: time.Hour, FlushInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	testsupport.Eventually(t, 10*time.Second, "the store is up", func() bool { return s.Status().Up })

	// Another member's cooldown whose message this member never got.
	until := clk.Now().Add(10 * time.Minute).Truncate(time.Millisecond)
	ev, _ := json.Marshal(event{Type: "cool", Member: "m1", Name: "primary", Until: until.UnixMilli(), Class: "quota_exhausted", Reason: "insufficient_quota"})
	if _, err := r.Do("SET", prefix+"cool:primary", string(ev), "PX", "600000"); err != nil {
		t.Fatal(err)
	}
	if n, err := r.Do("CLIENT", "KILL", "TYPE", "pubsub"); err != nil || n != "1" {
		t.Fatalf("CLIENT KILL TYPE pubsub: %q, %v; want 1 killed", n, err)
	}
	testsupport.Eventually(t, 10*time.Second, "the cooldown is read back after the resubscription", func() bool {
		c, ok := reg.CoolingDown("primary", clk.Now())
		return ok && c.Fleet && c.Until.Equal(until)
	})
	// Subscribed again: the next message arrives as before.
	testsupport.Eventually(t, 10*time.Second, "subscribed again", func() bool {
		n, err := r.Do("PUBSUB", "NUMSUB", prefix+"events")
		return err == nil && n == prefix+"events\n1"
	})
	ev, _ = json.Marshal(event{Type: "uncool", Member: "m1", Name: "primary"})
	if n, err := r.Do("PUBLISH", prefix+"events", string(ev)); err != nil || n != "1" {
		t.Fatalf("PUBLISH: %q, %v", n, err)
	}
	testsupport.Eventually(t, 10*time.Second, "the message after the resubscription is applied", func() bool {
		_, ok := reg.CoolingDown("primary", clk.Now())
		return !ok
	})
	if !s.Status().Up {
		t.Error("the store went down for a lost subscription")
	}
}
