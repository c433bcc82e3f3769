package sim

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"

	"github.com/detour-proxy/detour/internal/chain"
	"github.com/detour-proxy/detour/internal/fakevendor"
	"github.com/detour-proxy/detour/policy"
	"github.com/detour-proxy/detour/rewrite"
)

// Table (f): what each more upstream buys when upstreams fail the way they
// do in production — rate limits, timeouts and quotas that run out — rather
// than table (a)'s independent 503s, with detour's own defaults for each
// class.

// The mix of failures of table (f), the same for every upstream.
const (
	// lengthMaxK is the longest chain.
	lengthMaxK = 4
	// lengthRateLimited is the share of calls answered 429
	// rate_limit_exceeded with retry-after: 1 (drawn per call).
	lengthRateLimited = 0.10
	// lengthTimeout is the share of calls that never answer: the attempt
	// ends at the upstream's first_byte timeout, lengthFirstByte.
	lengthTimeout   = 0.05
	lengthFirstByte = 10 * time.Second
	// lengthAnswer and lengthRefusal are the virtual time an answer and an
	// error answer take.
	lengthAnswer  = 800 * time.Millisecond
	lengthRefusal = 100 * time.Millisecond
)

// lengthSetup is the traffic of table (f) and how long each upstream's
// quota is gone: once in the run, in turn (uᵢ from i sixths of the run on),
// its calls then get 429 insufficient_quota. The outages are placed rather
// than drawn: where two overlap decides most of a row, and drawn places
// made the rows differ more by seed than by k. Tests run it scaled down.
type lengthSetup struct {
	requests int
	quotaOut time.Duration
}

// lengthDefault is table (f): one request per virtual second for an hour,
// each upstream's quota gone for a quarter of it (u1 from minute 10 to 25,
// u2 from 20 to 35, …).
var lengthDefault = lengthSetup{requests: 3600, quotaOut: 15 * time.Minute}

// lengthRow is one row of table (f).
type lengthRow struct {
	k        int
	requests int
	answered int
	// switches counts, over all requests, the upstreams called after the
	// first one called (an upstream skipped while cooling down is not
	// called; a retry of the same upstream is no switch).
	switches int
	// byLast counts the answers from the chain's last upstream.
	byLast int
	// latency sums the requests' virtual time, answered or not; slowest is
	// the longest.
	latency, slowest time.Duration
	// calls counts the calls that reached any upstream.
	calls int
}

type lengthResult struct {
	setup lengthSetup
	rows  []lengthRow
}

func runChainLength(ctx context.Context, opts Options) (lengthResult, error) {
	return runChainLengthWith(ctx, opts, lengthDefault)
}

func runChainLengthWith(ctx context.Context, opts Options, setup lengthSetup) (lengthResult, error) {
	res := lengthResult{setup: setup}
	for k := 1; k <= lengthMaxK; k++ {
		row, err := runLengthRow(ctx, opts, setup, k)
		if err != nil {
			return res, err
		}
		res.rows = append(res.rows, row)
	}
	return res, nil
}

// slowNet is the in-memory network of table (f): each call takes virtual
// time (an answer lengthAnswer, an error lengthRefusal), and a drawn share
// of calls to each host times out instead, after lengthFirstByte. detour's
// own per-attempt timers run on real time, which the in-memory calls never
// reach, so the timeout is delivered as the transport error the timer would
// have caused, at the virtual time it would have fired.
type slowNet struct {
	*memNet
	clk      *clock
	timeouts map[string]*rand.Rand
}

// timeoutError is what a client whose deadline passed gets.
type timeoutError struct{}

func (timeoutError) Error() string   { return "net/http: timeout awaiting response headers" }
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }

func (n *slowNet) RoundTrip(req *http.Request) (*http.Response, error) {
	if r := n.timeouts[req.URL.Host]; r != nil && r.Float64() < lengthTimeout {
		n.memNet.mu.Lock()
		n.memNet.calls[req.URL.Host]++
		n.memNet.mu.Unlock()
		if req.Body != nil {
			req.Body.Close()
		}
		_ = n.clk.Sleep(req.Context(), lengthFirstByte)
		return nil, timeoutError{}
	}
	resp, err := n.memNet.RoundTrip(req)
	d := lengthRefusal
	if err == nil && resp.StatusCode == http.StatusOK {
		d = lengthAnswer
	}
	_ = n.clk.Sleep(req.Context(), d)
	return resp, err
}

// arrive sets the clock to a request's arrival, back in time if the request
// before it ran past it. Table (f)'s requests arrive once a second whatever
// became of the one before (apps do not wait for each other), and a timed-out
// request lasts ten; run one after another, each starts at its own arrival.
// The price is that a request may see a cooldown or breaker state that an
// earlier request's failure set a few virtual seconds after this one
// arrived.
func (c *clock) arrive(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// quotaOutage answers next's calls with 429 insufficient_quota while the
// clock is in [from, to).
func quotaOutage(clk *clock, from, to time.Time, next http.Handler) http.Handler {
	out := fakevendor.New(rewrite.OpenAI, fakevendor.Options{Name: "quota", Now: clk.Now})
	out.SetDefault(fakevendor.Fault{Kind: fakevendor.Status, Class: fakevendor.ClassInsufficientQuota})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if now := clk.Now(); !now.Before(from) && now.Before(to) {
			out.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func runLengthRow(ctx context.Context, opts Options, setup lengthSetup, k int) (lengthRow, error) {
	row := lengthRow{k: k}
	clk := newClock()
	net := &slowNet{memNet: newMemNet(), clk: clk, timeouts: map[string]*rand.Rand{}}
	run := time.Duration(setup.requests) * time.Second
	var ups []upstream
	var hosts []string
	for i := range k {
		name := "u" + strconv.Itoa(i+1)
		v := fakevendor.New(rewrite.OpenAI, fakevendor.Options{Name: name, Now: clk.Now})
		// Seeded by upstream, not by k: u1 fails the same calls in every
		// row, so that the rows differ only by the upstreams added.
		v.SetRandomFaults([]fakevendor.WeightedFault{{
			Fault: fakevendor.Fault{Kind: fakevendor.Status, Class: fakevendor.ClassRateLimit, RetryAfter: "1"},
			P:     lengthRateLimited,
		}}, seedFor(opts.Seed, "f", name, "faults"))
		// In turn, overlapping: uᵢ's quota is gone from i sixths of the
		// run on (10, 20, 30, 40 minutes into the hour).
		from := epoch.Add(time.Duration(i+1) * run / 6)
		host, base := net.add(quotaOutage(clk, from, from.Add(setup.quotaOut), v))
		net.timeouts[host] = newRand(opts.Seed, "f", name, "timeouts")
		ups = append(ups, upstream{name, base})
		hosts = append(hosts, host)
	}
	doc := policyDoc(fmt.Sprintf("sim-f-k%d", k), ups, nil)
	for _, u := range doc["upstreams"].(map[string]any) {
		u.(map[string]any)["timeouts"] = map[string]any{"first_byte": lengthFirstByte.String()}
	}
	pol, err := compile(doc)
	if err != nil {
		return row, err
	}
	a := newApp(pol, clk, net)
	var rec chain.Record
	onRecord := a.runner.OnRecord
	a.runner.OnRecord = func(r *chain.Record) {
		onRecord(r)
		rec = *r
	}
	last := "u" + strconv.Itoa(k)
	for i := range setup.requests {
		if i%512 == 0 && ctx.Err() != nil {
			return row, ctx.Err()
		}
		clk.arrive(epoch.Add(time.Duration(i) * time.Second))
		start := clk.Now()
		rec = chain.Record{}
		o := a.do(ctx, validBody)
		d := clk.Now().Sub(start)
		row.requests++
		row.latency += d
		row.slowest = max(row.slowest, d)
		if o.ok() {
			row.answered++
			if o.answeredBy == last {
				row.byLast++
			}
		}
		called := map[string]bool{}
		for _, at := range rec.Attempts {
			if at.Outcome != chain.OutcomeSkipped {
				called[at.Upstream] = true
			}
		}
		row.switches += max(0, len(called)-1)
	}
	for _, h := range hosts {
		row.calls += net.callsTo(h)
	}
	return row, nil
}

func (r lengthResult) write(w io.Writer) {
	fmt.Fprintln(w, "## (f) Chain length against rate limits, timeouts and quotas")
	fmt.Fprintln(w)
	fmt.Fprintf(w, "Chains [u1 … uk]; every upstream fails the same way, independently: %g %% of its calls get 429 `rate_limit_exceeded` "+
		"with `retry-after: 1`, %g %% never answer (the attempt ends at `timeouts.first_byte`, %s), and its quota is gone "+
		"for %s (429 `insufficient_quota`), uᵢ's starting i/6 of the way into the run (u1 at minute 10 of an hour, u2 at 20, …), so that each outage overlaps the next. An answer takes %s of virtual time, an error %s. "+
		"%d requests, one per virtual second. Every class keeps detour's default: `rate_limited` retried once (here after the vendor's 1 s), "+
		"`quota_exhausted` cools the upstream down for %s, `timeout` falls over at once; breaker and never_skip_last on. "+
		"Switches are upstreams called after the first one a request called; last-engine share is the share of answers that came from uk; "+
		"latency is per request, answered or not.\n\n",
		100*lengthRateLimited, 100*lengthTimeout, shortDuration(lengthFirstByte), shortDuration(r.setup.quotaOut),
		lengthAnswer, lengthRefusal, r.setup.requests, shortDuration(policy.DefaultQuotaCooldown))
	t := newTable("k", "answered", "success", "switches per request", "last-engine share", "mean latency", "slowest", "calls per request")
	for _, row := range r.rows {
		t.add(strconv.Itoa(row.k), strconv.Itoa(row.answered), percent(ratio(row.answered, row.requests)),
			fmt.Sprintf("%.3f", ratio(row.switches, row.requests)), percent(ratio(row.byLast, row.answered)),
			fmt.Sprintf("%.2f s", (row.latency/time.Duration(row.requests)).Seconds()),
			fmt.Sprintf("%.1f s", row.slowest.Seconds()),
			fmt.Sprintf("%.3f", ratio(row.calls, row.requests)))
	}
	t.write(w)
}
