package sim

import (
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/detour-proxy/detour/internal/fakevendor"
	"github.com/detour-proxy/detour/rewrite"
)

// Table "routing" (latency-aware routing): a primary whose latency
// degrades mid-run and later recovers, behind a steady backup; the p95 the
// app sees with the chain as written (ordered), with select scored, and
// with hedging.
//
// The ordered and scored rows run on the virtual clock: the in-memory
// network moves the clock by each call's drawn latency as it serves it, one
// request at a time, so the latencies — the app's and those the scored
// selection's window records — are exact. Hedging needs two calls in
// flight and a timer that fires while the first one waits, which a clock
// moved by the network cannot give: its row runs in real time, each
// simulated second one real millisecond (the fakes really wait), and is
// marked so; its figures vary a little from run to run.

// DefaultRoutingRequests is the routing table's request count: one request
// per virtual second, a third of them before the primary degrades, a third
// while it is slow, a third after it recovers.
const DefaultRoutingRequests = 3000

// Latencies of the routing table's upstreams: the median of each call,
// with a log-normal spread of routingSpread around it.
const (
	routingPrimaryFast = 800 * time.Millisecond
	routingPrimarySlow = 3 * time.Second
	routingBackup      = 1200 * time.Millisecond
	routingSpread      = 0.25
	// routingHedgeAfter is the hedged row's hedge_after.
	routingHedgeAfter = 2 * time.Second
	// routingScale is how many simulated nanoseconds one real nanosecond
	// stands for in the real-time row: 1 s is 20 ms, long enough that the
	// runner's own time and the scheduler's jitter (tenths of a
	// millisecond on a quiet machine) stay small beside the latencies.
	routingScale = 50
	// routingHedgedShare is the real-time row's share of the request
	// count, so that it takes seconds, not minutes.
	routingHedgedShare = 20
	// routingMinSamples is the scored row's min_samples.
	routingMinSamples = 20
)

// routingPhases names the three thirds of the run.
var routingPhases = [3]string{"before", "degraded", "after"}

type routingRow struct {
	name, clock string
	// latency holds the app's latencies per phase, sorted.
	latency [3][]time.Duration
	// primaryFirst counts the requests per phase whose first attempt went
	// to the primary.
	primaryFirst, requests [3]int
	failed                 int
}

type routingResult struct {
	requests int
	rows     []routingRow
}

// routingScoredSelection is the scored row's selection section.
var routingScoredSelection = fmt.Sprintf(`{"strategy": "scored", "score": {"latency": 1, "errors": 10}, "min_samples": %d}`, routingMinSamples)

func runRouting(ctx context.Context, opts Options) (routingResult, error) {
	res := routingResult{requests: opts.RoutingRequests}
	for _, v := range []struct{ name, sel string }{
		{"ordered", ""},
		{"scored", routingScoredSelection},
	} {
		row, err := runRoutingVirtual(ctx, opts, v.name, v.sel)
		if err != nil {
			return res, err
		}
		res.rows = append(res.rows, row)
	}
	row, err := runRoutingHedged(ctx, opts)
	if err != nil {
		return res, err
	}
	res.rows = append(res.rows, row)
	return res, nil
}

// routingLatency draws the latency of one call to name in phase.
type routingLatency struct {
	mu  sync.Mutex
	rng map[string]*rand.Rand
}

func newRoutingLatency(seed int64) *routingLatency {
	return &routingLatency{rng: map[string]*rand.Rand{
		"primary": newRand(seed, "routing", "primary"),
		"backup":  newRand(seed, "routing", "backup"),
	}}
}

func (l *routingLatency) draw(name string, phase int) time.Duration {
	median := routingBackup
	if name == "primary" {
		median = routingPrimaryFast
		if phase == 1 {
			median = routingPrimarySlow
		}
	}
	l.mu.Lock()
	z := l.rng[name].NormFloat64()
	l.mu.Unlock()
	return time.Duration(float64(median) * math.Exp(routingSpread*z))
}

func routingPhase(i, n int) int { return min(3*i/n, 2) }

// routingPolicy is the table's policy: chain [primary, backup], breaker
// off (nothing fails here), and sel as the route's select.
func routingPolicy(version string, primaryURL, backupURL, sel string, extra map[string]any) map[string]any {
	extra["breaker"] = breakerOff()
	doc := policyDoc(version, []upstream{{"primary", primaryURL}, {"backup", backupURL}}, extra)
	if sel != "" {
		route := doc["routes"].([]any)[0].(map[string]any)
		route["select"] = jsonRaw(sel)
	}
	return doc
}

// jsonRaw is a JSON text to embed in a generated policy as it is.
type jsonRaw string

// MarshalJSON returns the text.
func (j jsonRaw) MarshalJSON() ([]byte, error) { return []byte(j), nil }

func runRoutingVirtual(ctx context.Context, opts Options, name, sel string) (routingRow, error) {
	row := routingRow{name: name, clock: "virtual"}
	clk := newClock()
	net := newMemNet()
	lat := newRoutingLatency(opts.Seed)
	phase := 0
	ph, primaryURL := net.add(fakevendor.New(rewrite.OpenAI, fakevendor.Options{Name: "primary", Now: clk.Now}))
	bh, backupURL := net.add(fakevendor.New(rewrite.OpenAI, fakevendor.Options{Name: "backup", Now: clk.Now}))
	hostName := map[string]string{ph: "primary", bh: "backup"}
	var firstCall string
	net.onCall = func(host string) {
		up := hostName[host]
		if firstCall == "" {
			firstCall = up
		}
		// The call takes its latency on the runner's clock: the attempt
		// starts before it and commits after it.
		_ = clk.Sleep(context.Background(), lat.draw(up, phase))
	}
	pol, err := compile(routingPolicy("sim-routing-"+name, primaryURL, backupURL, sel, map[string]any{}))
	if err != nil {
		return row, err
	}
	a := newApp(pol, clk, net)
	n := opts.RoutingRequests
	for i := range n {
		if err := ctx.Err(); err != nil {
			return row, err
		}
		phase = routingPhase(i, n)
		clk.SetAtLeast(epoch.Add(time.Duration(i) * time.Second))
		firstCall = ""
		began := clk.Now()
		o := a.do(ctx, validBody)
		row.record(phase, clk.Now().Sub(began), firstCall == "primary", o.ok())
	}
	row.sort()
	return row, nil
}

func (r *routingRow) record(phase int, d time.Duration, primaryFirst, ok bool) {
	r.requests[phase]++
	if primaryFirst {
		r.primaryFirst[phase]++
	}
	if !ok {
		r.failed++
		return
	}
	r.latency[phase] = append(r.latency[phase], d)
}

func (r *routingRow) sort() {
	for i := range r.latency {
		slices.Sort(r.latency[i])
	}
}

// sleepNet is the real-time row's network: each call really waits its
// drawn latency, scaled down by routingScale, or until the request is
// cancelled (a hedge loser), then the fake answers.
type sleepNet struct {
	hosts map[string]http.Handler
	names map[string]string
	lat   *routingLatency
	phase func() int
	mu    sync.Mutex
	first string
}

func (s *sleepNet) RoundTrip(req *http.Request) (*http.Response, error) {
	name := s.names[req.URL.Host]
	s.mu.Lock()
	if s.first == "" {
		s.first = name
	}
	s.mu.Unlock()
	t := time.NewTimer(s.lat.draw(name, s.phase()) / routingScale)
	defer t.Stop()
	select {
	case <-t.C:
	case <-req.Context().Done():
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, req.Context().Err()
	}
	w := newMemWriter()
	s.hosts[req.URL.Host].ServeHTTP(w, req)
	if req.Body != nil {
		req.Body.Close()
	}
	return w.response(req), nil
}

func runRoutingHedged(ctx context.Context, opts Options) (routingRow, error) {
	row := routingRow{name: "ordered, hedge_after " + shortDuration(routingHedgeAfter), clock: "real (scaled)"}
	phase := 0
	var mu sync.Mutex
	sn := &sleepNet{
		hosts: map[string]http.Handler{
			"127.0.0.1:10001": fakevendor.New(rewrite.OpenAI, fakevendor.Options{Name: "primary"}),
			"127.0.0.1:10002": fakevendor.New(rewrite.OpenAI, fakevendor.Options{Name: "backup"}),
		},
		names: map[string]string{"127.0.0.1:10001": "primary", "127.0.0.1:10002": "backup"},
		lat:   newRoutingLatency(opts.Seed),
		phase: func() int { mu.Lock(); defer mu.Unlock(); return phase },
	}
	pol, err := compile(routingPolicy("sim-routing-hedged", "http://127.0.0.1:10001/v1", "http://127.0.0.1:10002/v1", "",
		map[string]any{"hedge_after": (routingHedgeAfter / routingScale).String()}))
	if err != nil {
		return row, err
	}
	a := newApp(pol, nil, sn)
	n := max(opts.RoutingRequests/routingHedgedShare, 30)
	for i := range n {
		if err := ctx.Err(); err != nil {
			return row, err
		}
		mu.Lock()
		phase = routingPhase(i, n)
		p := phase
		mu.Unlock()
		sn.mu.Lock()
		sn.first = ""
		sn.mu.Unlock()
		began := time.Now()
		o := a.do(ctx, validBody)
		took := time.Since(began) * routingScale
		sn.mu.Lock()
		first := sn.first
		sn.mu.Unlock()
		row.record(p, took, first == "primary", o.ok())
	}
	row.sort()
	return row, nil
}

// seconds formats a simulated duration in seconds, two decimals.
func seconds(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }

func (r routingResult) write(w io.Writer) {
	fmt.Fprintln(w, "## Latency-aware routing")
	fmt.Fprintln(w)
	fmt.Fprintf(w, "Chain [primary, backup], one request per virtual second, %d requests: a third before, a third while the primary is slow, a third after it recovers. "+
		"Each call's latency is log-normal around its median (σ = %.2f): primary %s, %s while degraded, backup %s; nothing fails. "+
		"ordered is the chain as written; scored is `select` `{\"strategy\": \"scored\", \"score\": {\"latency\": 1, \"errors\": 10}, \"min_samples\": %d}`; "+
		"hedged is ordered with `hedge_after` %s. The latency is the app's, from its request to detour's whole answer. "+
		"**The hedged row runs in real time** (each simulated second %s of real time, on a twentieth of the requests), so its figures vary by run and machine load; the other rows are exact.\n\n",
		r.requests, routingSpread, seconds(routingPrimaryFast), seconds(routingPrimarySlow), seconds(routingBackup), routingMinSamples, shortDuration(routingHedgeAfter), time.Second/routingScale)
	head := []string{"strategy", "clock"}
	for _, p := range routingPhases {
		head = append(head, "p95 "+p)
	}
	head = append(head, "p50 degraded")
	for _, p := range routingPhases {
		head = append(head, "primary first "+p)
	}
	t := newTable(head...)
	t.right[1] = false
	var notes []string
	for _, row := range r.rows {
		cells := []string{row.name, row.clock}
		for i := range routingPhases {
			cells = append(cells, seconds(quantile(row.latency[i], 0.95)))
		}
		cells = append(cells, seconds(quantile(row.latency[1], 0.5)))
		for i := range routingPhases {
			cells = append(cells, percent(ratio(row.primaryFirst[i], row.requests[i])))
		}
		t.add(cells...)
		if row.failed > 0 {
			notes = append(notes, fmt.Sprintf("%s: %d requests got no answer; expected none.", row.name, row.failed))
		}
	}
	t.write(w)
	if len(notes) > 0 {
		writeNotes(w, notes)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "\"primary first\" is the share of requests whose first attempt went to the primary. "+
		"scored tries each upstream for min_samples requests, then sends the first attempt to the lower score; an upstream that gets no traffic is tried again "+
		"once its samples are older than the window's 5 minutes: that is how the recovered primary wins first place back, and what the backup's share before "+
		"and the primary's share while degraded (min_samples trial requests every 5 minutes) cost.")
}
