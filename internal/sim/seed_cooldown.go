package sim

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/detour-proxy/detour/internal/fakevendor"
	"github.com/detour-proxy/detour/rewrite"
)

// Table (e): the cooldown experiment with the seed's set-up. The primary
// and the backup draw from one quota (two deployments on one account), which
// runs out and comes back; every call also fails at random 5 % of the time.
// Table (b) has neither, which is why its success is 100 % with a backup
// whatever the cooldown.

// seedRandomFailure is the share of calls each upstream fails at random
// (503 overloaded), quota or not: the seed's 5 %.
const seedRandomFailure = 0.05

// seedSetup is the traffic and the shared quota of table (e): limit
// answered calls per window of virtual time, for both upstreams together.
// Tests run it scaled down.
type seedSetup struct {
	requests int
	window   time.Duration
	limit    int
}

// seedDefault is table (e): the seed's 3,600 requests, one per virtual
// second. The quota is sized so that with no cooldown the wasted calls come
// out at the seed's figure (637; 636 here): it runs out about 53 s before
// each 10-minute window ends, so the hour holds six runs-out and six
// returns.
var seedDefault = seedSetup{requests: 3600, window: 10 * time.Minute, limit: 545}

// The seed's figures, as it reported them: wasted calls per cooldown (one
// figure per cooldown, for both never_skip_last settings), and success
// without and with never-skip-last (one figure per setting).
var (
	seedWasted  = map[string]int{"0s": 637, "60s": 22, "600s": 2}
	seedSuccess = map[bool]float64{false: 0.704, true: 0.973}
)

// seedCooldowns are the cooldowns of table (e).
var seedCooldowns = []string{"0s", "60s", "600s"}

// seedRow is one row of table (e).
type seedRow struct {
	cooldown      string
	neverSkipLast bool
	requests      int
	answered      int
	// wasted counts the calls answered 429 insufficient_quota, both
	// upstreams together.
	wasted int
	// exhausted counts the requests sent while the quota was gone, and
	// lostWithQuota those that failed although it was there (skipped by a
	// cooldown that outlived the quota's return, or both upstreams failing
	// at random).
	exhausted, lostWithQuota int
	// byBackup counts the answers that came from the backup.
	byBackup int
}

type seedResult struct {
	setup seedSetup
	rows  []seedRow
}

// sharedQuota is one quota that several fakes draw from: limit answered
// calls per window of virtual time. Once it is gone, every call to any of
// them gets OpenAI's 429 insufficient_quota until the window ends.
type sharedQuota struct {
	clk    *clock
	window time.Duration
	limit  int
	// cur is the current window's index, used its answered calls.
	cur, used int
	// out answers the calls that find the quota gone, with the exact body.
	out    *fakevendor.Vendor
	wasted int
}

func newSharedQuota(clk *clock, window time.Duration, limit int) *sharedQuota {
	out := fakevendor.New(rewrite.OpenAI, fakevendor.Options{Name: "quota", Now: clk.Now})
	out.SetDefault(fakevendor.Fault{Kind: fakevendor.Status, Class: fakevendor.ClassInsufficientQuota})
	return &sharedQuota{clk: clk, window: window, limit: limit, cur: -1, out: out}
}

// roll starts a new window when the clock has reached it.
func (q *sharedQuota) roll() {
	if i := int(q.clk.Now().Sub(epoch) / q.window); i != q.cur {
		q.cur, q.used = i, 0
	}
}

// gone reports whether the quota is used up now.
func (q *sharedQuota) gone() bool {
	q.roll()
	return q.used >= q.limit
}

// gate puts next behind the quota: a call that finds it gone is answered
// 429; a call next answers 200 uses one unit of it. The simulation is
// sequential, so no lock is needed.
func (q *sharedQuota) gate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if q.gone() {
			q.wasted++
			q.out.ServeHTTP(w, r)
			return
		}
		sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
		next.ServeHTTP(sw, r)
		if sw.code == http.StatusOK {
			q.used++
		}
	})
}

// statusWriter remembers the status a handler wrote.
type statusWriter struct {
	http.ResponseWriter
	code  int
	wrote bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.code, w.wrote = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	w.wrote = true
	return w.ResponseWriter.Write(p)
}

func runSeedCooldown(ctx context.Context, opts Options) (seedResult, error) {
	return runSeedCooldownWith(ctx, opts, seedDefault)
}

func runSeedCooldownWith(ctx context.Context, opts Options, setup seedSetup) (seedResult, error) {
	res := seedResult{setup: setup}
	for _, cd := range seedCooldowns {
		for _, nsl := range []bool{false, true} {
			row, err := runSeedRow(ctx, opts, setup, cd, nsl)
			if err != nil {
				return res, err
			}
			res.rows = append(res.rows, row)
		}
	}
	return res, nil
}

func runSeedRow(ctx context.Context, opts Options, setup seedSetup, cooldown string, nsl bool) (seedRow, error) {
	row := seedRow{cooldown: cooldown, neverSkipLast: nsl}
	clk, net := newClock(), newMemNet()
	q := newSharedQuota(clk, setup.window, setup.limit)
	var ups []upstream
	for _, name := range []string{"primary", "backup"} {
		v := fakevendor.New(rewrite.OpenAI, fakevendor.Options{Name: name, Now: clk.Now})
		// The same draws in every row, so that the rows differ only by
		// what detour does.
		v.SetRandomFaults([]fakevendor.WeightedFault{{Fault: overloaded, P: seedRandomFailure}}, seedFor(opts.Seed, "e", name))
		_, base := net.add(q.gate(v))
		ups = append(ups, upstream{name, base})
	}
	extra := map[string]any{
		"errors": map[string]any{"classes": map[string]any{
			"quota_exhausted": class(cooldown),
			"overloaded":      class("0s"),
		}},
		"never_skip_last": nsl,
		"breaker":         breakerOff(),
	}
	pol, err := compile(policyDoc(fmt.Sprintf("sim-e-%s-%t", cooldown, nsl), ups, extra))
	if err != nil {
		return row, err
	}
	a := newApp(pol, clk, net)
	for i := range setup.requests {
		if i%512 == 0 && ctx.Err() != nil {
			return row, ctx.Err()
		}
		clk.SetAtLeast(epoch.Add(time.Duration(i) * time.Second))
		gone := q.gone()
		o := a.do(ctx, validBody)
		row.requests++
		if gone {
			row.exhausted++
		}
		switch {
		case o.ok():
			row.answered++
			if o.answeredBy == "backup" {
				row.byBackup++
			}
		case !gone:
			row.lostWithQuota++
		}
	}
	row.wasted = q.wasted
	return row, nil
}

func (r seedResult) write(w io.Writer) {
	fmt.Fprintln(w, "## (e) Cooldowns with the seed's set-up: a shared quota and random failures")
	fmt.Fprintln(w)
	fmt.Fprintf(w, "Chain [primary, backup]; both draw from one quota of %d answered calls per %s of virtual time "+
		"(two deployments on one account): once it is gone, every call to either gets 429 `insufficient_quota` "+
		"(OpenAI's exact body) until the window ends. Every call also fails at random with probability %g "+
		"(503 `server_is_overloaded`; no retries, no cooldown for it). %d requests, one per virtual second; breaker off. "+
		"The cooldown is errors.classes.quota_exhausted.cooldown. Wasted calls are the calls answered 429, both upstreams together; "+
		"\"lost with quota left\" counts the requests that failed while the quota was there. "+
		"The seed's columns are its reported figures: one wasted-calls figure per cooldown and one success figure per never_skip_last setting.\n\n",
		r.setup.limit, shortDuration(r.setup.window), seedRandomFailure, r.setup.requests)
	t := newTable("cooldown", "never_skip_last", "wasted calls", "seed: wasted", "success", "seed: success",
		"requests while quota gone", "lost with quota left", "answered by backup")
	t.right[1] = false
	for _, row := range r.rows {
		t.add(row.cooldown, strconv.FormatBool(row.neverSkipLast),
			strconv.Itoa(row.wasted), strconv.Itoa(seedWasted[row.cooldown]),
			percent(ratio(row.answered, row.requests)), fmt.Sprintf("%.1f %%", 100*seedSuccess[row.neverSkipLast]),
			strconv.Itoa(row.exhausted), strconv.Itoa(row.lostWithQuota), strconv.Itoa(row.byBackup))
	}
	t.write(w)
}
