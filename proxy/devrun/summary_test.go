package devrun

import (
	"testing"

	"github.com/detour-proxy/detour/proxy/chain"
)

func attempts(outcomes ...string) []chain.AttemptRecord {
	var as []chain.AttemptRecord
	for i := 0; i+1 < len(outcomes); i += 2 {
		as = append(as, chain.AttemptRecord{Upstream: outcomes[i], Outcome: outcomes[i+1]})
	}
	return as
}

func TestSummary(t *testing.T) {
	for _, tc := range []struct {
		name    string
		records []*chain.Record
		want    string
	}{
		{"none", nil, "detour: no requests were intercepted (does the app call a host of the policy's routes, honour HTTPS_PROXY and trust detour's CA?)"},
		{"one direct", []*chain.Record{
			{AnsweredBy: "primary", Status: 200, Attempts: attempts("primary", chain.OutcomeOK)},
		}, "detour: 1 request: 1 answered directly, 0 failed over; answered by primary 1; 0 errors"},
		{"failovers, a skip, an error, a cancel, a passthrough", []*chain.Record{
			{AnsweredBy: "primary", Status: 200, Attempts: attempts("primary", chain.OutcomeOK)},
			{AnsweredBy: "backup", Status: 200, Attempts: attempts("primary", chain.OutcomeFallback, "backup", chain.OutcomeOK)},
			// Cooling down: skipped, so the backup answered; still a failover.
			{AnsweredBy: "backup", Status: 200, Attempts: attempts("primary", chain.OutcomeSkipped, "backup", chain.OutcomeOK)},
			{AnsweredBy: "local", Status: 200, Attempts: attempts("primary", chain.OutcomeFallback, "backup", chain.OutcomeFallback, "local", chain.OutcomeOK)},
			{AnsweredBy: "", Status: 503, Error: "every upstream failed", Attempts: attempts("primary", chain.OutcomeFallback, "backup", chain.OutcomeExhausted)},
			{AnsweredBy: "", Status: 400, Error: "stopped: invalid_request", Attempts: attempts("primary", chain.OutcomeStop)},
			{Status: 499, Error: "client went away", Attempts: attempts("primary", chain.OutcomeClientGone)},
			{AnsweredBy: "passthrough", Status: 200},
		}, "detour: 8 requests: 1 answered directly, 3 failed over (primary→backup 2, primary→local 1); answered by backup 2, local 1, primary 1; 1 passed through; 2 errors, 1 cancelled by the app"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tl := newTally()
			for _, r := range tc.records {
				tl.add(r)
			}
			if got := tl.summary().String(); got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}

// The summary handed out is a copy: later requests do not change it.
func TestSummaryIsACopy(t *testing.T) {
	tl := newTally()
	tl.add(&chain.Record{AnsweredBy: "b", Attempts: attempts("a", chain.OutcomeFallback, "b", chain.OutcomeOK)})
	s := tl.summary()
	tl.add(&chain.Record{AnsweredBy: "b", Attempts: attempts("a", chain.OutcomeFallback, "b", chain.OutcomeOK)})
	if s.Failovers["a→b"] != 1 || s.AnsweredBy["b"] != 1 {
		t.Errorf("summary changed after it was taken: %+v", s)
	}
}
