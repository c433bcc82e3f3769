package devrun

import (
	"testing"

	"github.com/detour-proxy/detour/internal/chain"
)

// TestSummaryRoutingIsNotAFailover: an upstream the request was never for
// (no models entry for its model, AttemptRecord.Routing) does not make the
// next one's answer a failover; a failure or a cooldown after it still
// does, counted from the first upstream the request was for.
func TestSummaryRoutingIsNotAFailover(t *testing.T) {
	t.Parallel()
	routed := chain.AttemptRecord{Upstream: "claude-only", Outcome: chain.OutcomeSkipped, Routing: true}
	tl := newTally()
	tl.add(&chain.Record{AnsweredBy: "primary", Status: 200, Attempts: append([]chain.AttemptRecord{routed}, attempts("primary", chain.OutcomeOK)...)})
	tl.add(&chain.Record{AnsweredBy: "backup", Status: 200, Attempts: append([]chain.AttemptRecord{routed}, attempts("primary", chain.OutcomeSkipped, "backup", chain.OutcomeOK)...)})
	tl.add(&chain.Record{AnsweredBy: "backup", Status: 200, Attempts: append([]chain.AttemptRecord{routed}, attempts("primary", chain.OutcomeFallback, "backup", chain.OutcomeOK)...)})
	want := "detour: 3 requests: 1 answered directly, 2 failed over (primary→backup 2); answered by backup 2, primary 1; 0 errors"
	if got := tl.summary().String(); got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}
