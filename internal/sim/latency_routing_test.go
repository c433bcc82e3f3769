package sim

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// While the primary is slow, scored sends most first attempts to the
// backup and cuts the median and the p95 the app sees, against the chain as
// written; every request of every row is answered. The
// virtual rows print the same bytes for the same seed.
func TestRoutingScoredAndHedgedBeatOrderedWhileThePrimaryIsSlow(t *testing.T) {
	t.Parallel()
	opts := small()
	opts.RoutingRequests = 600
	res, err := runRouting(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]routingRow{}
	for _, r := range res.rows {
		rows[r.clock+"/"+r.name[:6]] = r
		if r.failed != 0 {
			t.Errorf("%s: %d requests got no answer", r.name, r.failed)
		}
	}
	ordered, scored, hedged := rows["virtual/ordere"], rows["virtual/scored"], rows["real (scaled)/ordere"]
	p95 := func(r routingRow) float64 { return quantile(r.latency[1], 0.95).Seconds() }
	p50 := func(r routingRow) float64 { return quantile(r.latency[1], 0.5).Seconds() }
	if p95(scored) >= p95(ordered) || p50(scored) >= p50(ordered) {
		t.Errorf("degraded: scored p50 %.2fs p95 %.2fs; ordered p50 %.2fs p95 %.2fs; want scored lower", p50(scored), p95(scored), p50(ordered), p95(ordered))
	}
	if share := ratio(scored.primaryFirst[1], scored.requests[1]); share > 0.5 {
		t.Errorf("degraded: scored sent %.0f %% of first attempts to the slow primary; want most to the backup", 100*share)
	}
	if ordered.primaryFirst[1] != ordered.requests[1] {
		t.Errorf("ordered sent %d of %d first attempts to the primary; want all", ordered.primaryFirst[1], ordered.requests[1])
	}
	// The hedged row runs in real time: its figures are measured and
	// printed, never asserted (it must only answer every request, above).
	if hedged.requests[1] == 0 {
		t.Error("the hedged row ran no request while the primary was slow")
	}

	// The table's own scored row against a fresh run of it.
	var a, b bytes.Buffer
	routingResult{requests: opts.RoutingRequests, rows: []routingRow{scored}}.write(&a)
	r1, _ := runRoutingVirtual(context.Background(), opts, "scored", routingScoredSelection)
	routingResult{requests: opts.RoutingRequests, rows: []routingRow{r1}}.write(&b)
	if a.String() != b.String() || !strings.Contains(a.String(), "## Latency-aware routing") {
		t.Errorf("two runs of the scored row differ or lack the heading:\n%s\n---\n%s", a.String(), b.String())
	}
}
