package sim

import (
	"context"
	"fmt"
	"io"
	"math"
	"strconv"
	"time"

	"github.com/detour-proxy/detour/internal/fakevendor"
	"github.com/detour-proxy/detour/rewrite"
)

// Table (a): chains of k independent upstreams, each failing a request with
// probability p, should answer 1 − p^k of the requests; and a request the
// upstream refuses as invalid must reach the app, never a second upstream.

// chainPs are the failure probabilities of table (a).
var chainPs = []float64{0.05, 0.1, 0.2, 0.3, 0.5}

// chainMaxK is the longest chain of table (a).
const chainMaxK = 3

// invalidShare is the share of table (a)'s requests that lack messages.
const invalidShare = 0.02

// chainCell is one row of table (a).
type chainCell struct {
	p float64
	k int
	// valid and answered count the well-formed requests and those the app
	// got an answer to.
	valid, answered int
	// invalid counts the requests without messages; forwarded those sent
	// to any upstream but the first; refused those that reached the app as
	// a 400.
	invalid, forwarded, refused int
}

// theory is the success rate of k independent upstreams: 1 − p^k.
func (c chainCell) theory() float64 { return 1 - math.Pow(c.p, float64(c.k)) }

// measured is the share of valid requests answered.
func (c chainCell) measured() float64 { return ratio(c.answered, c.valid) }

// z is how many standard errors the measurement lies from the theory.
func (c chainCell) z() float64 {
	q := c.theory()
	se := math.Sqrt(q * (1 - q) / float64(c.valid))
	if se == 0 {
		return 0
	}
	return (c.measured() - q) / se
}

type chainsResult struct {
	requests int
	cells    []chainCell
}

func runChains(ctx context.Context, opts Options) (chainsResult, error) {
	res := chainsResult{requests: opts.Requests}
	for _, p := range chainPs {
		for k := 1; k <= chainMaxK; k++ {
			c, err := runChainCell(ctx, opts, p, k)
			if err != nil {
				return res, err
			}
			res.cells = append(res.cells, c)
		}
	}
	return res, nil
}

// overloaded is OpenAI's 503 server_is_overloaded.
var overloaded = fakevendor.Fault{Kind: fakevendor.Status, Class: fakevendor.ClassOverloaded}

func runChainCell(ctx context.Context, opts Options, p float64, k int) (chainCell, error) {
	cell := chainCell{p: p, k: k}
	clk, net := newClock(), newMemNet()
	var ups []upstream
	// others are the addresses of every upstream but the first.
	var others []string
	for i := range k {
		name := "u" + strconv.Itoa(i+1)
		v := fakevendor.New(rewrite.OpenAI, fakevendor.Options{Name: name, Strict: true, Now: clk.Now})
		v.SetRandomFaults([]fakevendor.WeightedFault{{Fault: overloaded, P: p}}, seedFor(opts.Seed, "a", p, k, name))
		host, base := net.add(v)
		ups = append(ups, upstream{name, base})
		if i > 0 {
			others = append(others, host)
		}
	}
	callsToOthers := func() int {
		n := 0
		for _, h := range others {
			n += net.callsTo(h)
		}
		return n
	}
	extra := map[string]any{
		"errors":  map[string]any{"classes": map[string]any{"overloaded": class("0s")}},
		"breaker": breakerOff(),
	}
	pol, err := compile(policyDoc(fmt.Sprintf("sim-a-p%g-k%d", p, k), ups, extra))
	if err != nil {
		return cell, err
	}
	a := newApp(pol, clk, net)
	marks := newRand(opts.Seed, "a", p, k, "invalid")
	for i := range opts.Requests {
		if i%512 == 0 && ctx.Err() != nil {
			return cell, ctx.Err()
		}
		// One request per virtual second; nothing here depends on time,
		// but a clock that moves is the honest setting.
		clk.SetAtLeast(epoch.Add(time.Duration(i) * time.Second))
		if marks.Float64() < invalidShare {
			// Counted on the wire, not from detour's own record of the
			// request: the invariant is about what reached the upstreams.
			before := callsToOthers()
			o := a.do(ctx, invalidBody)
			cell.invalid++
			if callsToOthers() > before {
				cell.forwarded++
			}
			if o.status == 400 {
				cell.refused++
			}
			continue
		}
		o := a.do(ctx, validBody)
		cell.valid++
		if o.ok() {
			cell.answered++
		}
	}
	return cell, nil
}

func (r chainsResult) write(w io.Writer) {
	fmt.Fprintln(w, "## (a) Chain success against theory")
	fmt.Fprintln(w)
	fmt.Fprintf(w, "A chain of k independent upstreams, each failing a request with probability p "+
		"(503 `server_is_overloaded`, OpenAI's body), should answer 1 − p^k of the requests. "+
		"No retries, no cooldown, breaker off; %d requests per row, one per virtual second. "+
		"%g %% of them lack `messages`, so the upstream refuses them with 400 `invalid_request_error`: "+
		"detour must hand that 400 to the app and send the request nowhere else. "+
		"Success is over the valid requests; z is (measured − theory) / standard error.\n\n",
		r.requests, 100*invalidShare)
	t := newTable("p", "k", "valid requests", "answered", "success", "1 − p^k", "z", "invalid requests", "invalid sent to a 2nd upstream", "invalid answered 400")
	for _, c := range r.cells {
		t.add(strconv.FormatFloat(c.p, 'f', -1, 64), strconv.Itoa(c.k),
			strconv.Itoa(c.valid), strconv.Itoa(c.answered),
			percent(c.measured()), percent(c.theory()), fmt.Sprintf("%+.2f", c.z()),
			strconv.Itoa(c.invalid), strconv.Itoa(c.forwarded), strconv.Itoa(c.refused))
	}
	t.write(w)
}

// writeNotes prints a table's notes under it.
func writeNotes(w io.Writer, notes []string) {
	for _, n := range notes {
		fmt.Fprintf(w, "\nNote: %s\n", n)
	}
}
