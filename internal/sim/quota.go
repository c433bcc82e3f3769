package sim

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/detour-proxy/detour/internal/fakevendor"
	"github.com/detour-proxy/detour/rewrite"
)

// Table (b): what a quota_exhausted cooldown saves once the primary's quota
// runs out, and what never_skip_last does to a chain of one.

// quotaCooldowns are the quota_exhausted cooldowns of table (b).
var quotaCooldowns = []string{"0s", "60s", "600s"}

// quotaRow is one row of table (b).
type quotaRow struct {
	chain         []string
	cooldown      string
	neverSkipLast bool
	requests      int
	// wasted counts the primary's calls answered 429 insufficient_quota:
	// every call from the QuotaAt-th on.
	wasted int
	// after and answeredAfter count the requests from the one that first
	// met the 429 on, and those the app got an answer to.
	after, answeredAfter int
	answered             int
}

type quotaResult struct {
	quotaAt int
	run     time.Duration
	rows    []quotaRow
}

func runQuota(ctx context.Context, opts Options) (quotaResult, error) {
	res := quotaResult{quotaAt: opts.QuotaAt, run: opts.QuotaRun}
	for _, chain := range [][]string{{"primary", "backup"}, {"primary"}} {
		for _, cd := range quotaCooldowns {
			for _, nsl := range []bool{true, false} {
				row, err := runQuotaRow(ctx, opts, chain, cd, nsl)
				if err != nil {
					return res, err
				}
				res.rows = append(res.rows, row)
			}
		}
	}
	return res, nil
}

func runQuotaRow(ctx context.Context, opts Options, chain []string, cooldown string, nsl bool) (quotaRow, error) {
	row := quotaRow{chain: chain, cooldown: cooldown, neverSkipLast: nsl}
	clk, net := newClock(), newMemNet()
	primary := fakevendor.New(rewrite.OpenAI, fakevendor.Options{Name: "primary", Now: clk.Now})
	// Calls 1 … QuotaAt-1 are answered; from then on every call gets
	// OpenAI's 429 insufficient_quota.
	primary.Script(make([]fakevendor.Fault, opts.QuotaAt-1)...)
	primary.SetDefault(fakevendor.Fault{Kind: fakevendor.Status, Class: fakevendor.ClassInsufficientQuota})
	primaryHost, primaryBase := net.add(primary)
	ups := []upstream{{"primary", primaryBase}}
	if len(chain) > 1 {
		_, base := net.add(fakevendor.New(rewrite.OpenAI, fakevendor.Options{Name: "backup", Now: clk.Now}))
		ups = append(ups, upstream{"backup", base})
	}
	extra := map[string]any{
		"errors":          map[string]any{"classes": map[string]any{"quota_exhausted": class(cooldown)}},
		"never_skip_last": nsl,
		"breaker":         breakerOff(),
	}
	pol, err := compile(policyDoc(fmt.Sprintf("sim-b-%s-%s-%t", strings.Join(chain, "-"), cooldown, nsl), ups, extra))
	if err != nil {
		return row, err
	}
	a := newApp(pol, clk, net)
	n := int(opts.QuotaRun / time.Second)
	exhausted := false
	for i := range n {
		if i%512 == 0 && ctx.Err() != nil {
			return row, ctx.Err()
		}
		clk.SetAtLeast(epoch.Add(time.Duration(i) * time.Second))
		o := a.do(ctx, validBody)
		row.requests++
		if !exhausted && net.callsTo(primaryHost) >= opts.QuotaAt {
			exhausted = true
		}
		if o.ok() {
			row.answered++
		}
		if exhausted {
			row.after++
			if o.ok() {
				row.answeredAfter++
			}
		}
	}
	row.wasted = max(0, net.callsTo(primaryHost)-(opts.QuotaAt-1))
	return row, nil
}

func (r quotaResult) write(w io.Writer) {
	fmt.Fprintln(w, "## (b) Cooldowns after quota runs out")
	fmt.Fprintln(w)
	fmt.Fprintf(w, "The primary answers its first %d calls; from its call %d on it answers 429 `insufficient_quota` "+
		"(OpenAI's exact body). Steady traffic, one request per virtual second for %s (%d requests). "+
		"The cooldown is errors.classes.quota_exhausted.cooldown (0s: none); no retries, breaker off. "+
		"Wasted calls are the primary's calls answered 429; \"after\" counts from the request that first met the 429.\n\n",
		r.quotaAt-1, r.quotaAt, shortDuration(r.run), int(r.run/time.Second))
	t := newTable("chain", "cooldown", "never_skip_last", "wasted primary calls", "success after", "success overall")
	t.right[1], t.right[2] = false, false
	for _, row := range r.rows {
		t.add("["+strings.Join(row.chain, ", ")+"]", row.cooldown, strconv.FormatBool(row.neverSkipLast),
			strconv.Itoa(row.wasted), percent(ratio(row.answeredAfter, row.after)), percent(ratio(row.answered, row.requests)))
	}
	t.write(w)
}
