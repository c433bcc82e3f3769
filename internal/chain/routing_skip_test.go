package chain_test

import (
	"io"
	"testing"

	"github.com/detour-proxy/detour/internal/chain"
	"github.com/detour-proxy/detour/internal/detourtest"
	fv "github.com/detour-proxy/detour/internal/fakevendor"
	"github.com/detour-proxy/detour/rewrite"
)

// TestSkipsSayWhetherTheyAreRouting: an upstream passed for what the
// request needs (no models entry for its model) is marked Routing; one
// passed for its state (cooling down after a quota 429) is not. detour
// run's summary counts only the second kind as a failover.
func TestSkipsSayWhetherTheyAreRouting(t *testing.T) {
	t.Parallel()
	claude := detourtest.NewVendor(t, rewrite.OpenAI, "claude-only")
	primary := detourtest.NewVendor(t, rewrite.OpenAI, "primary")
	backup := detourtest.NewVendor(t, rewrite.OpenAI, "backup")
	primary.SetDefault(fv.Fault{Kind: fv.Status, Class: fv.ClassInsufficientQuota})
	r := newRunner(t, "api.openai.com", openaiPolicy([]string{
		upstreamJSON("claude-only", claude, `, "models": {"claude-*": "claude-haiku-4-5"}`),
		upstreamJSON("primary", primary, ""),
		upstreamJSON("backup", backup, ""),
	}, `["claude-only", "primary", "backup"]`, ""))
	body := `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`

	for i, want := range []struct {
		outcome []string
		routing []bool
	}{
		// primary fails with quota and cools down ...
		{[]string{chain.OutcomeSkipped, chain.OutcomeFallback, chain.OutcomeOK}, []bool{true, false, false}},
		// ... so the next request skips it for its state.
		{[]string{chain.OutcomeSkipped, chain.OutcomeSkipped, chain.OutcomeOK}, []bool{true, false, false}},
	} {
		resp := post(t, r.srv.URL+"/v1/chat/completions", body)
		io.Copy(io.Discard, resp.Body)
		rec := r.record(t)
		if resp.StatusCode != 200 || rec.AnsweredBy != "backup" || len(rec.Attempts) != 3 {
			t.Fatalf("request %d: status %d answered by %q, attempts %+v", i, resp.StatusCode, rec.AnsweredBy, rec.Attempts)
		}
		for j, a := range rec.Attempts {
			if a.Outcome != want.outcome[j] || a.Routing != want.routing[j] {
				t.Errorf("request %d, attempt %d (%s): outcome %q routing %v; want %q %v (%s)", i, j, a.Upstream, a.Outcome, a.Routing, want.outcome[j], want.routing[j], a.Reason)
			}
		}
	}
	if claude.Calls() != 0 || primary.Calls() != 1 {
		t.Errorf("calls: claude-only %d, primary %d; want 0 and 1", claude.Calls(), primary.Calls())
	}
}
