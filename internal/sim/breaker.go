package sim

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/detour-proxy/detour/internal/fakevendor"
	"github.com/detour-proxy/detour/policy"
	"github.com/detour-proxy/detour/rewrite"
)

// Table (d): how many calls a dead first upstream still gets, with the
// circuit breaker off and on.

// breakerInterval is the gap between table (d)'s requests: ten per virtual
// second.
const breakerInterval = 100 * time.Millisecond

// The ways table (d)'s first upstream is dead.
const (
	dead503     = "503 on every call"
	deadRefused = "connection refused"
)

// breakerRow is one row of table (d).
type breakerRow struct {
	dead    string
	breaker bool
	// perMinute counts the calls that reached the dead upstream in each
	// virtual minute.
	perMinute []int
	requests  int
	answered  int
}

func (r breakerRow) total() int {
	n := 0
	for _, c := range r.perMinute {
		n += c
	}
	return n
}

type breakerResult struct {
	run   time.Duration
	rows  []breakerRow
	notes []string
}

func runBreaker(ctx context.Context, opts Options) (breakerResult, error) {
	res := breakerResult{run: opts.BreakerRun}
	for _, dead := range []string{dead503, deadRefused} {
		for _, on := range []bool{false, true} {
			row, err := runBreakerRow(ctx, opts, dead, on)
			if err != nil {
				return res, err
			}
			res.rows = append(res.rows, row)
		}
	}
	for i := 0; i+1 < len(res.rows); i += 2 {
		if off, on := res.rows[i], res.rows[i+1]; on.total() >= off.total() {
			// Said in the table, so that a regression cannot hide in a
			// README that is pasted without being read.
			res.notes = append(res.notes, fmt.Sprintf("With the upstream dead by %s the breaker saved no calls.", off.dead))
		}
	}
	return res, nil
}

func runBreakerRow(ctx context.Context, opts Options, dead string, on bool) (breakerRow, error) {
	minutes := int((opts.BreakerRun + time.Minute - 1) / time.Minute)
	row := breakerRow{dead: dead, breaker: on, perMinute: make([]int, minutes)}
	clk, net := newClock(), newMemNet()
	var deadHost, deadBase string
	if dead == dead503 {
		v := fakevendor.New(rewrite.OpenAI, fakevendor.Options{Name: "dead", Now: clk.Now})
		v.SetDefault(overloaded)
		deadHost, deadBase = net.add(v)
	} else {
		deadHost, deadBase = net.add(nil)
	}
	_, backupBase := net.add(fakevendor.New(rewrite.OpenAI, fakevendor.Options{Name: "backup", Now: clk.Now}))
	net.onCall = func(host string) {
		if host == deadHost {
			if m := int(clk.Now().Sub(epoch) / time.Minute); m < len(row.perMinute) {
				row.perMinute[m]++
			}
		}
	}
	section := breakerOff()
	if on {
		section = breakerOn()
	}
	extra := map[string]any{
		"errors": map[string]any{"classes": map[string]any{
			"overloaded":  class("0s"),
			"unreachable": class("0s"),
		}},
		"breaker": section,
	}
	pol, err := compile(policyDoc(fmt.Sprintf("sim-d-%t", on), []upstream{{"dead", deadBase}, {"backup", backupBase}}, extra))
	if err != nil {
		return row, err
	}
	a := newApp(pol, clk, net)
	n := int(opts.BreakerRun / breakerInterval)
	for i := range n {
		if i%512 == 0 && ctx.Err() != nil {
			return row, ctx.Err()
		}
		clk.SetAtLeast(epoch.Add(time.Duration(i) * breakerInterval))
		o := a.do(ctx, validBody)
		row.requests++
		if o.ok() {
			row.answered++
		}
	}
	return row, nil
}

func (r breakerResult) write(w io.Writer) {
	fmt.Fprintln(w, "## (d) Circuit breaker against a dead upstream")
	fmt.Fprintln(w)
	fmt.Fprintf(w, "Chain [dead, backup]; ten requests per virtual second for %s (%d requests). "+
		"The cells count the calls that reached the dead upstream in each virtual minute. "+
		"Breaker on is `\"breaker\": {\"enabled\": true}` with every default "+
		"(consecutive_failures %d, open_for %s, half_open_probes %d); no retries, no cooldown.\n\n",
		shortDuration(r.run), int(r.run/breakerInterval),
		policy.DefaultBreakerConsecutiveFailures, shortDuration(policy.DefaultBreakerOpenFor), policy.DefaultBreakerHalfOpenProbes)
	var head []string
	head = append(head, "dead upstream", "breaker")
	minutes := 0
	if len(r.rows) > 0 {
		minutes = len(r.rows[0].perMinute)
	}
	for m := 1; m <= minutes; m++ {
		head = append(head, "min "+strconv.Itoa(m))
	}
	head = append(head, "total", "app answered")
	t := newTable(head...)
	t.right[1] = false
	for _, row := range r.rows {
		state := "off"
		if row.breaker {
			state = "on"
		}
		cells := []string{row.dead, state}
		for _, c := range row.perMinute {
			cells = append(cells, strconv.Itoa(c))
		}
		cells = append(cells, strconv.Itoa(row.total()), percent(ratio(row.answered, row.requests)))
		t.add(cells...)
	}
	t.write(w)
	writeNotes(w, r.notes)
}
