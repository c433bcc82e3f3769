package sim

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/detour-proxy/detour/internal/fakevendor"
	"github.com/detour-proxy/detour/internal/fleet"
	"github.com/detour-proxy/detour/rewrite"
)

// Table (f): a fleet against a primary whose quota is gone. N members (each
// its own chain.Runner and health.Registry, each a goroutine) send steady
// traffic; the primary answers every call 429 insufficient_quota. With the
// memory backend every member finds out on its own; with the redis backend
// the first member's cooldown reaches the others by pub/sub. The table
// counts the primary's calls in the cooldown window (all of them wasted:
// one is the price of finding out).
//
// Unlike tables (a)–(d) it runs on real time (the members' requests are
// real goroutines racing the cooldown's propagation) and needs a Redis:
// Options.RedisURL. It is not among the default tables.

// FleetTable is the name of the fleet table, run only when asked for.
const FleetTable = "fleet"

// fleetSizes are the fleet sizes of the fleet table.
var fleetSizes = []int{1, 10, 50}

// Traffic of the fleet table: each member sends fleetRequests requests, one per
// fleetPace, starting at a seeded offset within the first fleetSpread
// (steady traffic: the members do not all start at one instant).
const (
	fleetRequests = 10
	fleetPace     = 20 * time.Millisecond
	fleetSpread   = 100 * time.Millisecond
)

type fleetRow struct {
	members        int
	memory, shared int // wasted primary calls; shared -1: not run
	requests       int
}

type fleetResult struct {
	rows     []fleetRow
	redisURL bool
}

func runFleet(ctx context.Context, opts Options) (fleetResult, error) {
	res := fleetResult{redisURL: opts.RedisURL != ""}
	for _, n := range fleetSizes {
		row := fleetRow{members: n, shared: -1, requests: n * fleetRequests}
		w, err := runFleetCell(ctx, opts, n, "")
		if err != nil {
			return res, err
		}
		row.memory = w
		if opts.RedisURL != "" {
			if row.shared, err = runFleetCell(ctx, opts, n, opts.RedisURL); err != nil {
				return res, err
			}
		}
		res.rows = append(res.rows, row)
	}
	return res, nil
}

// runFleetCell runs n members against an exhausted primary, sharing state
// through redisURL ("" for memory), and returns the primary's calls.
func runFleetCell(ctx context.Context, opts Options, n int, redisURL string) (int, error) {
	net := newMemNet()
	primary := fakevendor.New(rewrite.OpenAI, fakevendor.Options{Name: "primary"})
	primary.SetDefault(fakevendor.Fault{Kind: fakevendor.Status, Class: fakevendor.ClassInsufficientQuota})
	primaryHost, primaryBase := net.add(primary)
	_, backupBase := net.add(fakevendor.New(rewrite.OpenAI, fakevendor.Options{Name: "backup"}))
	extra := map[string]any{
		"errors":  map[string]any{"classes": map[string]any{"quota_exhausted": class("600s")}},
		"breaker": breakerOff(),
	}
	if redisURL != "" {
		// A prefix of the cell's own, so that runs never see each other's keys.
		prefix := "detour-sim:" + strconv.FormatInt(time.Now().UnixNano(), 36) + ":"
		extra["state"] = map[string]any{"backend": "redis", "redis": map[string]any{"url": redisURL, "key_prefix": prefix, "timeout": "200ms"}}
	}
	pol, err := compile(policyDoc("sim-f-"+strconv.Itoa(n), []upstream{{"primary", primaryBase}, {"backup", backupBase}}, extra))
	if err != nil {
		return 0, err
	}
	apps := make([]*app, n)
	for i := range apps {
		apps[i] = newApp(pol, nil, net)
		if redisURL == "" {
			continue
		}
		s, err := fleet.Start(fleet.Options{Redis: pol.State.Redis, Registry: apps[i].runner.Health, Log: zerolog.Nop()})
		if err != nil {
			return 0, err
		}
		defer s.Close()
		if !waitUp(s) {
			return 0, fmt.Errorf("redis at %s did not answer", redisURL)
		}
	}
	rng := newRand(opts.Seed, "f", n, redisURL != "")
	offsets := make([]time.Duration, n)
	for i := range offsets {
		offsets[i] = time.Duration(rng.Int64N(int64(fleetSpread)))
	}
	start := time.Now()
	var wg sync.WaitGroup
	for i, a := range apps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range fleetRequests {
				if d := time.Until(start.Add(offsets[i] + time.Duration(k)*fleetPace)); d > 0 {
					time.Sleep(d) // the traffic's pace, real time by design
				}
				a.do(ctx, validBody)
			}
		}()
	}
	wg.Wait()
	return net.callsTo(primaryHost), nil
}

func (r fleetResult) write(w io.Writer) {
	fmt.Fprintln(w, "## (fleet) A fleet against a primary out of quota")
	fmt.Fprintln(w)
	fmt.Fprintf(w, "N detours (each its own runner and health registry, a goroutine each) send %d requests apiece, one every %s, "+
		"starting at seeded offsets within the first %s; the primary answers every call 429 `insufficient_quota`, the backup answers. "+
		"quota_exhausted cools down for 600s, so the whole run is one cooldown window. "+
		"Wasted calls are the primary's calls (all answered 429). Real time: the redis column races the cooldown's propagation.\n\n",
		fleetRequests, fleetPace, fleetSpread)
	t := newTable("members", "requests", "wasted primary calls, memory", "wasted primary calls, redis")
	for _, row := range r.rows {
		shared := "not run (needs --redis)"
		if row.shared >= 0 {
			shared = strconv.Itoa(row.shared)
		}
		t.add(strconv.Itoa(row.members), strconv.Itoa(row.requests), strconv.Itoa(row.memory), shared)
	}
	t.write(w)
}

// waitUp waits, boundedly, for s to reach Redis.
func waitUp(s *fleet.Store) bool {
	deadline := time.Now().Add(10 * time.Second)
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for !s.Status().Up {
		if time.Now().After(deadline) {
			return false
		}
		<-t.C
	}
	return true
}
