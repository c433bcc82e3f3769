package fleet

import (
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/detour-proxy/detour/internal/health"
	"github.com/detour-proxy/detour/internal/testsupport"
	"github.com/detour-proxy/detour/policy"
)

// member is one detour of a test fleet: its own Registry and Store.
type member struct {
	reg   *health.Registry
	store *Store
	log   *testsupport.SyncBuffer
}

// clock is a virtual clock shared by a test fleet.
func newClock() *testsupport.Clock {
	return testsupport.NewClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
}

// startFleet starts n members on r, all under one key prefix of their own.
func startFleet(t *testing.T, r *testsupport.Redis, n int, now func() time.Time, timeout time.Duration) []*member {
	t.Helper()
	prefix := "t" + strconv.FormatInt(time.Now().UnixNano(), 36) + ":"
	var ms []*member
	for i := range n {
		reg := health.New()
		log := &testsupport.SyncBuffer{}
		s, err := Start(Options{
			Redis:    policy.RedisPolicy{URL: r.URL(), KeyPrefix: prefix, Timeout: timeout},
			Registry: reg, Now: now, Member: "m" + strconv.Itoa(i),
			Log:           logger(log),
			CheckInterval: 50 * time.Millisecond, FlushInterval: 50 * time.Millisecond,
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		ms = append(ms, &member{reg: reg, store: s, log: log})
	}
	for _, m := range ms {
		testsupport.Eventually(t, 10*time.Second, "the store is up", func() bool { return m.store.Status().Up })
	}
	return ms
}

// TestCooldownReachesEveryMember: a cooldown one member starts is honoured
// by the others, with its reason, class and end, marked as the fleet's.
func TestCooldownReachesEveryMember(t *testing.T) {
	t.Parallel()
	r := testsupport.StartRedis(t)
	clk := newClock()
	ms := startFleet(t, r, 3, clk.Now, time.Second)
	until := clk.Now().Add(10 * time.Minute).Truncate(time.Millisecond)
	ms[0].reg.StartCooldownClass("primary", until, "quota_exhausted", "insufficient_quota")
	for i, m := range ms[1:] {
		testsupport.Eventually(t, 10*time.Second, "member "+strconv.Itoa(i+1)+" cools down", func() bool {
			_, ok := m.reg.CoolingDown("primary", clk.Now())
			return ok
		})
		c, _ := m.reg.CoolingDown("primary", clk.Now())
		if !c.Until.Equal(until) || c.Class != "quota_exhausted" || c.Reason != "insufficient_quota" || !c.Fleet {
			t.Errorf("member %d: cooldown %+v; want until %v, the class, the reason, from the fleet", i+1, c, until)
		}
	}
	if c, _ := ms[0].reg.CoolingDown("primary", clk.Now()); c.Fleet {
		t.Error("the member that started the cooldown shows it as the fleet's")
	}
	// A later member joining reads it at its first sync.
	late := startFleetWithPrefix(t, r, ms[0].store.prefix, clk.Now)
	if c, ok := late.reg.CoolingDown("primary", clk.Now()); !ok || !c.Fleet {
		t.Errorf("a member started later: cooldown %+v, %v; want the fleet's", c, ok)
	}
}

func startFleetWithPrefix(t *testing.T, r *testsupport.Redis, prefix string, now func() time.Time) *member {
	reg := health.New()
	s, err := Start(Options{Redis: policy.RedisPolicy{URL: r.URL(), KeyPrefix: prefix, Timeout: time.Second},
		Registry: reg, Now: now, Member: "late", CheckInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	testsupport.Eventually(t, 10*time.Second, "the store is up", func() bool { return s.Status().Up })
	return &member{reg: reg, store: s}
}

var testBreaker = health.BreakerConfig{Enabled: true, ConsecutiveFailures: 2, Window: 10, MinRequests: 10, OpenFor: time.Minute, HalfOpenProbes: 3}

// TestBreakerTripOpensEveryMember: one member's trip opens the breaker in
// all; when the open period ends, exactly half_open_probes probes go out
// over the whole fleet, and their successes close it everywhere.
func TestBreakerTripOpensEveryMember(t *testing.T) {
	t.Parallel()
	r := testsupport.StartRedis(t)
	clk := newClock()
	ms := startFleet(t, r, 3, clk.Now, time.Second)
	for range 2 {
		tk, ok, _ := ms[0].reg.BreakerAllow("primary", testBreaker, clk.Now())
		if !ok {
			t.Fatal("closed breaker refused")
		}
		tk.Done(health.BreakerHard, clk.Now())
	}
	for i, m := range ms {
		testsupport.Eventually(t, 10*time.Second, "member "+strconv.Itoa(i)+"'s breaker opens", func() bool {
			return m.reg.Breaker("primary", clk.Now()).State == health.BreakerOpen
		})
		if _, ok, why := m.reg.BreakerAllow("primary", testBreaker, clk.Now()); ok {
			t.Errorf("member %d let a request through an open breaker", i)
		} else if i > 0 && !m.reg.Breaker("primary", clk.Now()).Fleet {
			t.Errorf("member %d: open breaker not marked as the fleet's (%s)", i, why)
		}
	}
	clk.Advance(time.Minute)
	var tickets []health.Ticket
	var owners []int
	for range 4 { // more asks than probes, from every member
		for i, m := range ms {
			if tk, ok, _ := m.reg.BreakerAllow("primary", testBreaker, clk.Now()); ok {
				tickets, owners = append(tickets, tk), append(owners, i)
			}
		}
	}
	if len(tickets) != testBreaker.HalfOpenProbes {
		t.Fatalf("%d probes admitted over the fleet (by members %v); want exactly half_open_probes = %d", len(tickets), owners, testBreaker.HalfOpenProbes)
	}
	for _, tk := range tickets {
		tk.Done(health.BreakerSuccess, clk.Now())
	}
	for i, m := range ms {
		testsupport.Eventually(t, 10*time.Second, "member "+strconv.Itoa(i)+"'s breaker closes", func() bool {
			return m.reg.Breaker("primary", clk.Now()).State == health.BreakerClosed
		})
	}
}

// TestFleetRPMHolds: three members asking as fast as they can for a minute
// of virtual time get rpm tokens, plus the bucket's burst, between them.
func TestFleetRPMHolds(t *testing.T) {
	t.Parallel()
	r := testsupport.StartRedis(t)
	clk := newClock()
	ms := startFleet(t, r, 3, clk.Now, time.Second)
	l := health.Limits{RPM: 600, Burst: 10}
	granted := 0
	// 60 s in 50 ms steps: six asks a step are twelve times the fleet's
	// rate of one token every 100 ms (rpm 600, one token a lease), so the
	// bucket is what refuses; members that each kept their own bucket
	// would admit some 1,800. Each ask is a round trip to Redis.
	for step := 0; step < 1200; step++ {
		for _, m := range ms {
			for range 2 {
				if _, ok, _ := m.reg.Acquire("primary", l, clk.Now()); ok {
					granted++
				}
			}
		}
		clk.Advance(50 * time.Millisecond)
	}
	if lo, hi := 570, 630; granted < lo || granted > hi {
		t.Errorf("%d requests admitted in a minute by three members at rpm 600; want 600 within 5%%", granted)
	}
	t.Logf("admitted %d in a virtual minute (rpm 600, burst 10, three members)", granted)
}

// TestRedisDownAndBack: with Redis gone every decision is local and quick
// (ErrFleetDown without a round trip), the transition is logged once and
// counted; when Redis comes back empty, the cooldown a member started
// while it was away reaches the others.
func TestRedisDownAndBack(t *testing.T) {
	t.Parallel()
	r := testsupport.StartRedis(t)
	clk := newClock()
	ms := startFleet(t, r, 2, clk.Now, 200*time.Millisecond)
	r.Kill()
	for _, m := range ms {
		testsupport.Eventually(t, 10*time.Second, "the store notices Redis is gone", func() bool { return !m.store.Status().Up })
	}
	if _, ok, _ := ms[0].reg.Acquire("primary", health.Limits{RPM: 600, Burst: 10}, clk.Now()); !ok {
		t.Error("with Redis down, the local bucket refused a first request")
	}
	if _, err := ms[0].store.TakeRPM("primary", health.Limits{RPM: 600, Burst: 10}, clk.Now()); err != health.ErrFleetDown {
		t.Errorf("TakeRPM with Redis down: %v; want ErrFleetDown without trying", err)
	}
	until := clk.Now().Add(5 * time.Minute).Truncate(time.Millisecond)
	ms[0].reg.StartCooldownClass("primary", until, "quota_exhausted", "while redis was away")
	if f := ms[0].store.Status().Fallbacks; f == 0 {
		t.Error("no fallback counted")
	}
	r.Restart()
	testsupport.Eventually(t, 10*time.Second, "the other member gets the cooldown after the resync", func() bool {
		c, ok := ms[1].reg.CoolingDown("primary", clk.Now())
		return ok && c.Until.Equal(until)
	})
	for i, m := range ms {
		if n := strings.Count(m.log.String(), "state backend unreachable"); n != 1 {
			t.Errorf("member %d logged the outage %d times; want once", i, n)
		}
	}
}

// TestHealthyPathMakesNoCommands: cooldown checks, a closed breaker's
// admission and its result, and a concurrency-only limit touch Redis not
// at all.
func TestHealthyPathMakesNoCommands(t *testing.T) {
	t.Parallel()
	r := testsupport.StartRedis(t)
	clk := newClock()
	ms := startFleet(t, r, 1, clk.Now, time.Second)
	m := ms[0]
	m.store.Close() // stop the background checks, so that only the calls below can reach Redis
	s, err := Start(Options{Redis: policy.RedisPolicy{URL: r.URL(), KeyPrefix: "quiet:", Timeout: time.Second},
		Registry: m.reg, Now: clk.Now, CheckInterval: time.Hour, FlushInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	testsupport.Eventually(t, 10*time.Second, "the store is up", func() bool { return s.Status().Up })
	before, err := r.Commands()
	if err != nil {
		t.Fatal(err)
	}
	for range 1000 {
		if _, ok := m.reg.CoolingDown("primary", clk.Now()); ok {
			t.Fatal("cooling down")
		}
		tk, ok, _ := m.reg.BreakerAllow("primary", testBreaker, clk.Now())
		if !ok {
			t.Fatal("breaker refused")
		}
		release, ok, _ := m.reg.Acquire("primary", health.Limits{Concurrency: 8}, clk.Now())
		if !ok {
			t.Fatal("limit refused")
		}
		m.reg.Begin("primary")
		m.reg.End("primary", health.Success, time.Millisecond, clk.Now())
		release()
		tk.Done(health.BreakerSuccess, clk.Now())
	}
	after, err := r.Commands()
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for name, n := range after {
		total += n - before[name]
	}
	if total != 0 {
		t.Errorf("1000 healthy requests made %d Redis commands (before %v, after %v); want 0", total, before, after)
	}
}

func logger(w io.Writer) zerolog.Logger { return zerolog.New(w) }

// TestFleetConcurrencyAndCounters: limits.fleet_concurrency counts the
// fleet's in-flight attempts, and a shared counter adds up every member's
// adds.
func TestFleetConcurrencyAndCounters(t *testing.T) {
	t.Parallel()
	r := testsupport.StartRedis(t)
	clk := newClock()
	ms := startFleet(t, r, 3, clk.Now, time.Second)
	l := health.Limits{FleetConcurrency: 2}
	rel0, ok0, _ := ms[0].reg.Acquire("primary", l, clk.Now())
	_, ok1, _ := ms[1].reg.Acquire("primary", l, clk.Now())
	_, ok2, why := ms[2].reg.Acquire("primary", l, clk.Now())
	if !ok0 || !ok1 || ok2 {
		t.Fatalf("three members acquiring under fleet_concurrency 2: %v %v %v; want the third refused", ok0, ok1, ok2)
	}
	if want := "limit: 2 in flight across the fleet (fleet_concurrency)"; why != want {
		t.Errorf("refusal %q; want %q", why, want)
	}
	rel0()
	rel0() // idempotent
	testsupport.Eventually(t, 10*time.Second, "a released slot is free for another member", func() bool {
		_, ok, _ := ms[2].reg.Acquire("primary", l, clk.Now())
		return ok
	})
	for i, m := range ms {
		m.reg.AddShared("spend:primary:2026-12-01", float64(i+1), time.Hour, clk.Now())
	}
	for i, m := range ms {
		testsupport.Eventually(t, 10*time.Second, "member "+strconv.Itoa(i)+" sees the fleet's total", func() bool {
			return m.reg.Shared("spend:primary:2026-12-01", clk.Now()) == 6
		})
	}
}

// TestRedisDownAtStart: a member whose Redis is down when it starts serves
// with local state, says so once, and joins the fleet when Redis comes.
func TestRedisDownAtStart(t *testing.T) {
	t.Parallel()
	r := testsupport.StartRedis(t)
	r.Kill()
	clk := newClock()
	reg, log := health.New(), &testsupport.SyncBuffer{}
	s, err := Start(Options{Redis: policy.RedisPolicy{URL: r.URL(), KeyPrefix: "start:", Timeout: 200 * time.Millisecond},
		Registry: reg, Now: clk.Now, Log: logger(log), CheckInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, ok, _ := reg.Acquire("primary", health.Limits{RPM: 60, Burst: 1}, clk.Now()); !ok {
		t.Error("the local bucket refused the first request while Redis was down")
	}
	log.WaitFor(t, 10*time.Second, "state backend unreachable at start")
	r.Restart()
	testsupport.Eventually(t, 10*time.Second, "the store comes up", func() bool { return s.Status().Up })
	if n := strings.Count(log.String(), "unreachable"); n != 1 {
		t.Errorf("logged unreachable %d times; want once", n)
	}
}
