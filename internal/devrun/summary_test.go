package devrun

import (
	"testing"

	"github.com/detour-proxy/detour/internal/chain"
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

// Every request lands in exactly one of the summary's counts, and an
// answer the app did not get whole is an error, not an answer: a stream cut
// after it began, the failover whose stream was cut, a failover that ended
// in an error.
func TestSummaryCountsCutStreamsAndFailedFailovers(t *testing.T) {
	t.Parallel()
	cut := "detour: upstream primary ended the stream before it was complete"
	for _, tc := range []struct {
		name string
		rec  *chain.Record
		want string
	}{
		{"a stream cut after it began",
			&chain.Record{AnsweredBy: "primary", Status: 200, Error: cut, Attempts: attempts("primary", chain.OutcomeCut)},
			"detour: 1 request: 0 answered directly, 0 failed over; 1 error (1 stream cut after it began)"},
		{"a failover whose stream was then cut",
			&chain.Record{AnsweredBy: "backup", Status: 200, Error: cut, Attempts: attempts("primary", chain.OutcomeFallback, "backup", chain.OutcomeCut)},
			"detour: 1 request: 0 answered directly, 0 failed over; 1 error (1 stream cut after it began)"},
		{"a failover that ended in every upstream failing",
			&chain.Record{Status: 503, Error: "every upstream failed", Attempts: attempts("primary", chain.OutcomeFallback, "backup", chain.OutcomeExhausted)},
			"detour: 1 request: 0 answered directly, 0 failed over; 1 error"},
		{"a failover stopped by the next upstream's 401",
			&chain.Record{Status: 401, Error: "stopped: auth", Attempts: attempts("primary", chain.OutcomeFallback, "backup", chain.OutcomeStop)},
			"detour: 1 request: 0 answered directly, 0 failed over; 1 error"},
		{"a request refused without an error text",
			&chain.Record{Status: 400, Attempts: attempts("primary", chain.OutcomeStop)},
			"detour: 1 request: 0 answered directly, 0 failed over; 1 error"},
		{"a passthrough that could not reach the vendor",
			&chain.Record{AnsweredBy: "passthrough", Status: 502, Error: "passthrough: dial tcp: connection refused"},
			"detour: 1 request: 0 answered directly, 0 failed over; 1 error"},
		{"the app left while the answer was written",
			&chain.Record{AnsweredBy: "primary", Status: 200, Error: "client went away while the answer was written", Attempts: attempts("primary", chain.OutcomeOK)},
			"detour: 1 request: 0 answered directly, 0 failed over; 0 errors, 1 cancelled by the app"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tl := newTally()
			tl.add(tc.rec)
			s := tl.summary()
			if got := s.String(); got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
			if n := s.Direct + s.FailedOver + s.Passthrough + s.Errors + s.Cancelled; n != s.Requests {
				t.Errorf("%d requests counted %d times: %+v", s.Requests, n, s)
			}
		})
	}
}
