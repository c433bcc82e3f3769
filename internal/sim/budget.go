package sim

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/detour-proxy/detour/internal/chain"
	"github.com/detour-proxy/detour/internal/fakevendor"
	"github.com/detour-proxy/detour/rewrite"
)

// Table "budget": the primary's daily budget runs out at noon. Steady
// traffic, one request per virtual minute from midnight UTC for 26 hours;
// the primary is priced, the backup is cheaper, and the primary's daily
// budget holds exactly 719.5 of its answers, so the 720th (11:59) crosses
// it and the 721st (12:00) is the first one skipped. At midnight the
// budget resets and the primary answers again.

// TableBudget names the budget cut-off table in Options.Only.
const TableBudget = "budget"

const (
	// budgetStep is the time between two requests of the table.
	budgetStep = time.Minute
	// budgetRun is the table's length: a day and two hours of the next.
	budgetRun = 26 * time.Hour
	// budgetNoonAnswers is how many primary answers the budget pays for,
	// 719 whole and half of the 720th, which crosses it.
	budgetNoonAnswers = 719.5
)

// Prices of the table's upstreams, in USD per 1M tokens.
var (
	budgetPrimaryPrice = map[string]any{"*": map[string]any{"input": 2.5, "output": 10}}
	budgetBackupPrice  = map[string]any{"*": map[string]any{"input": 0.15, "output": 0.6}}
)

// budgetHour is one hour of the table.
type budgetHour struct {
	hour                    int
	primary, backup, failed int
	primaryUSD, backupUSD   float64
	// spent is the primary budget's spend at the hour's end.
	spent float64
}

type budgetResult struct {
	limit, answerUSD float64
	firstSkip        string
	hours            []budgetHour
}

// budgetApp is the table's runner over a primary and a backup fake; cost
// receives each answer's cost.
func budgetApp(clk *clock, budgets []any, cost *float64) (*app, *memNet, error) {
	net := newMemNet()
	_, pBase := net.add(fakevendor.New(rewrite.OpenAI, fakevendor.Options{Name: "primary", Now: clk.Now}))
	_, bBase := net.add(fakevendor.New(rewrite.OpenAI, fakevendor.Options{Name: "backup", Now: clk.Now}))
	doc := policyDoc("sim-budget", []upstream{{"primary", pBase}, {"backup", bBase}}, map[string]any{"breaker": breakerOff()})
	ups := doc["upstreams"].(map[string]any)
	ups["primary"].(map[string]any)["prices"] = budgetPrimaryPrice
	ups["backup"].(map[string]any)["prices"] = budgetBackupPrice
	if budgets != nil {
		doc["budgets"] = budgets
	}
	pol, err := compile(doc)
	if err != nil {
		return nil, nil, err
	}
	a := newApp(pol, clk, net)
	record := a.runner.OnRecord
	a.runner.OnRecord = func(r *chain.Record) {
		record(r)
		*cost = r.CostUSD
	}
	return a, net, nil
}

func runBudget(ctx context.Context, _ Options) (budgetResult, error) {
	var res budgetResult
	// What one primary answer costs: the fakes' usage is a function of
	// the request, so one answer on a runner without budgets says it.
	var cost float64
	probe, _, err := budgetApp(newClock(), nil, &cost)
	if err != nil {
		return res, err
	}
	if o := probe.do(ctx, validBody); !o.ok() || cost <= 0 {
		return res, fmt.Errorf("the probe answer (status %d) cost %g", o.status, cost)
	}
	res.answerUSD = cost
	res.limit = budgetNoonAnswers * cost
	clk := newClock()
	a, _, err := budgetApp(clk, []any{map[string]any{"name": "primary-daily", "upstream": "primary", "daily": res.limit}}, &cost)
	if err != nil {
		return res, err
	}
	day := func(t time.Time) string { return t.Format("2006-01-02") }
	var h *budgetHour
	for i := range int(budgetRun / budgetStep) {
		if i%512 == 0 && ctx.Err() != nil {
			return res, ctx.Err()
		}
		now := epoch.Add(time.Duration(i) * budgetStep)
		clk.SetAtLeast(now)
		if hr := int(now.Sub(epoch) / time.Hour); h == nil || h.hour != hr {
			res.hours = append(res.hours, budgetHour{hour: hr})
			h = &res.hours[len(res.hours)-1]
		}
		cost = 0
		o := a.do(ctx, validBody)
		switch o.answeredBy {
		case "primary":
			h.primary++
			h.primaryUSD += cost
		case "backup":
			h.backup++
			h.backupUSD += cost
			if res.firstSkip == "" {
				res.firstSkip = now.Format("15:04")
			}
		default:
			h.failed++
		}
		h.spent = a.runner.Health.Spent("primary-daily/daily/" + day(now))
	}
	return res, nil
}

func usdCell(v float64) string { return "$" + strconv.FormatFloat(v, 'f', 6, 64) }

func (r budgetResult) write(w io.Writer) {
	fmt.Fprintln(w, "## Budget cut-off")
	fmt.Fprintln(w)
	fmt.Fprintf(w, "Chain [primary, backup], one request per virtual minute from midnight UTC for %s. "+
		"Prices per 1M tokens: primary $2.50 in / $10 out, backup $0.15 / $0.60; a primary answer costs %s. "+
		"The primary's daily budget (`budgets[]`, UTC) is %s, 719.5 answers: the 720th (11:59) crosses it, "+
		"and from the next request on the primary is skipped (`budget_exhausted`) until midnight. First backup answer: %s. "+
		"\"spent\" is the budget's spend at the end of the hour (today's period).\n\n",
		shortDuration(budgetRun), usdCell(r.answerUSD), usdCell(r.limit), r.firstSkip)
	// The hours where something changes, and the totals of the runs
	// between them.
	t := newTable("hours (UTC)", "primary answers", "backup answers", "failed", "primary $", "backup $", "spent / budget")
	type span struct{ from, to int }
	for _, s := range []span{{0, 10}, {11, 11}, {12, 12}, {13, 23}, {24, 25}} {
		var sum budgetHour
		for _, h := range r.hours[s.from : s.to+1] {
			sum.primary += h.primary
			sum.backup += h.backup
			sum.failed += h.failed
			sum.primaryUSD += h.primaryUSD
			sum.backupUSD += h.backupUSD
			sum.spent = h.spent
		}
		label := fmt.Sprintf("%02d:00–%02d:59", s.from%24, s.to%24)
		if s.from >= 24 {
			label += " (next day)"
		}
		t.add(label, strconv.Itoa(sum.primary), strconv.Itoa(sum.backup), strconv.Itoa(sum.failed),
			usdCell(sum.primaryUSD), usdCell(sum.backupUSD), percent(sum.spent/r.limit))
	}
	t.write(w)
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Per hour:")
	fmt.Fprintln(w)
	d := newTable("hour", "primary", "backup", "primary $", "backup $", "spent")
	for _, h := range r.hours {
		d.add(fmt.Sprintf("%02d", h.hour%24), strconv.Itoa(h.primary), strconv.Itoa(h.backup), usdCell(h.primaryUSD), usdCell(h.backupUSD), usdCell(h.spent))
	}
	d.write(w)
}
