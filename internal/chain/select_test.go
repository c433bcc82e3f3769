package chain_test

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rs/zerolog"

	"github.com/detour-proxy/detour/internal/chain"
	fv "github.com/detour-proxy/detour/internal/fakevendor"
	"github.com/detour-proxy/detour/internal/health"
	"github.com/detour-proxy/detour/internal/testsupport"
)

// selectPolicy is a chat route over in-memory upstreams (memUpstream) with
// a select section, breaker off (a failing canary must stay a candidate).
func selectPolicy(ups []string, chainNames, sel string) string {
	return fmt.Sprintf(`{"upstreams": {%s},
  "routes": [{"name": "chat", "match": {"host": "api.openai.com", "path": "/v1/chat/completions"}, "chain": %s, "select": %s}],
  "breaker": {"enabled": false}}`,
		strings.Join(ups, ","), chainNames, sel)
}

// postAs sends body as the app holding key would, in process.
func (r *runner) postAs(t *testing.T, key, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, "http://api.openai.com/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp := r.serveMem(req)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// seeded is a Runner.Rand with a fixed seed: the draws, and so the test,
// are the same on every run.
func seeded(seed uint64) func(*chain.Runner) {
	rng := rand.New(rand.NewPCG(seed, 0x5e1ec7))
	return func(cr *chain.Runner) { cr.Rand = rng.Uint64 }
}

// A 10 % canary gets 10 % of first places within binomial noise (four
// standard errors), and a canary that fails falls over to the primary: the
// chain order stays the failover order.
func TestWeightedCanaryShare(t *testing.T) {
	t.Parallel()
	vs := newMemVendors("primary", "canary")
	r := newInlineVendorRunner(t, vs, selectPolicy([]string{memUpstream("primary", ""), memUpstream("canary", "")}, `["primary","canary"]`,
		`{"strategy": "weighted", "weights": {"primary": 90, "canary": 10}}`), seeded(1))
	const n = 1000
	for range n {
		if resp := r.postInline(t, "sk-app", chatBody); resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
	}
	got := vs["canary"].Calls()
	assertShare(t, got, n, 0.10)
	if vs["primary"].Calls()+got != n {
		t.Errorf("primary %d + canary %d calls; want %d, one per request", vs["primary"].Calls(), got, n)
	}

	vs["canary"].SetDefault(fv.Fault{Kind: fv.Status, Class: fv.ClassServerError})
	fellOver := 0
	for range 200 {
		if by := r.postInline(t, "sk-app", chatBody).Header.Get(chain.HeaderAnsweredBy); by != "primary" {
			t.Fatalf("answered by %q; want primary (the canary fails)", by)
		}
		if rec := r.record(t); len(rec.Attempts) == 2 {
			fellOver++
			if got := trail(rec); got != "canary:fallback:server_error primary:ok" {
				t.Fatalf("attempts %q; want the canary first, then the primary", got)
			}
		}
	}
	if fellOver == 0 {
		t.Error("the canary was never chosen first in 200 requests")
	}
}

// assertShare checks that got of n is within four standard errors of p.
func assertShare(t *testing.T, got, n int, p float64) {
	t.Helper()
	sigma := math.Sqrt(float64(n) * p * (1 - p))
	if z := (float64(got) - float64(n)*p) / sigma; math.Abs(z) > 4 {
		t.Errorf("%d of %d (%.2f %%); want %.0f %% within four standard errors (z = %.2f)", got, n, 100*float64(got)/float64(n), 100*p, z)
	}
}

// Sticky: every turn of a conversation (same key, same first user turn,
// more turns after it) goes to the same upstream, and conversations split
// by the weights.
func TestWeightedStickyKeepsAConversationOnOneUpstream(t *testing.T) {
	t.Parallel()
	vs := newMemVendors("primary", "canary")
	r := newInlineVendorRunner(t, vs, selectPolicy([]string{memUpstream("primary", ""), memUpstream("canary", "")}, `["primary","canary"]`,
		`{"strategy": "weighted", "weights": {"primary": 80, "canary": 20}, "sticky": true}`), nil)
	const conversations = 500
	canary := 0
	for c := range conversations {
		first := fmt.Sprintf(`{"role":"system","content":"You help."},{"role":"user","content":"question %d"}`, c)
		by := ""
		for turn := range 3 {
			msgs := first
			for k := range turn {
				msgs += fmt.Sprintf(`,{"role":"assistant","content":"answer %d"},{"role":"user","content":"more %d"}`, k, k)
			}
			r.postInline(t, "sk-app", `{"model":"gpt-4o","messages":[`+msgs+`]}`)
			got := r.record(t).AnsweredBy
			if turn == 0 {
				by = got
			} else if got != by {
				t.Fatalf("conversation %d turn %d went to %s; turn 0 went to %s", c, turn, got, by)
			}
		}
		if by == "canary" {
			canary++
		}
	}
	assertShare(t, canary, conversations, 0.20)

	// The credential is part of the conversation's key: the same first
	// turn from other keys spreads too.
	keys := map[string]int{}
	for k := range 200 {
		r.postInline(t, fmt.Sprintf("sk-app-%d", k), chatBody)
		keys[r.record(t).AnsweredBy]++
	}
	if keys["canary"] == 0 || keys["primary"] == 0 {
		t.Errorf("one first turn from 200 keys went %v; want both upstreams", keys)
	}
}

// Scored, on a virtual clock (a synctest bubble: the fakes' delays pass in
// virtual time): both upstreams are first tried for min_samples requests;
// then the faster goes first; a primary that turns 3× slower than the
// backup loses first place within min_samples requests; and once it has
// recovered and its slow samples are older than the window's age, it is
// tried again and wins first place back (ties keep chain order).
func TestScoredSlowPrimaryLosesAndWinsBack(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		const minSamples = 5
		vs := newMemVendors("primary", "backup")
		logs := &testsupport.SyncBuffer{}
		r := newMemVendorRunner(t, vs, selectPolicy([]string{memUpstream("primary", ""), memUpstream("backup", "")}, `["primary","backup"]`,
			fmt.Sprintf(`{"strategy": "scored", "score": {"latency": 1}, "min_samples": %d}`, minSamples)),
			func(cr *chain.Runner) { cr.Log = zerolog.New(logs) })
		latency := func(name string, d time.Duration) {
			vs[name].SetDefault(fv.Fault{Kind: fv.SlowFirstByte, Delay: d})
		}
		latency("primary", 100*time.Millisecond)
		latency("backup", 100*time.Millisecond)
		first := func() string {
			t.Helper()
			r.postAs(t, "sk-app", chatBody)
			return r.record(t).AnsweredBy
		}
		var got []string
		for range 2*minSamples + 3 {
			got = append(got, first())
		}
		want := strings.Repeat("primary ", minSamples) + strings.Repeat("backup ", minSamples) + "primary primary primary"
		if strings.Join(got, " ")+" " != want+" " {
			t.Fatalf("first places %v; want %s (each on trial, then the tie to chain order)", got, want)
		}

		latency("primary", 300*time.Millisecond)
		lost := 0
		for i := 1; i <= minSamples; i++ {
			if first() == "backup" {
				lost = i
				break
			}
		}
		if lost == 0 {
			t.Fatalf("a primary 3× slower than the backup still goes first after %d requests", minSamples)
		}
		for range 20 {
			if by := first(); by != "backup" {
				t.Fatalf("the slow primary went first again (%s) before it was tried again", by)
			}
		}
		line := logLines(t, logs)
		sel, _ := line[len(line)-1]["selection"].(map[string]any)
		if sel["strategy"] != "scored" || sel["chosen"] != "backup" {
			t.Errorf("log selection %v; want scored, chosen backup", sel)
		}

		latency("primary", 100*time.Millisecond)
		// Traffic goes on, a request every 10 virtual seconds, all to the
		// backup, whose window stays fresh; the primary's slow samples age
		// out of its window, it is on trial again, and wins first place
		// back: min_samples+3 requests in a row go to it.
		start, run := time.Now(), 0
		for run < minSamples+3 {
			if time.Since(start) > 2*health.WindowAge {
				t.Fatalf("the recovered primary has not won first place back after %s", 2*health.WindowAge)
			}
			time.Sleep(10 * time.Second)
			if first() == "primary" {
				run++
			} else {
				run = 0
			}
		}
		if since := time.Since(start); since < health.WindowAge-time.Minute {
			t.Errorf("the primary was back after %s, before its slow samples could age out", since)
		}
	})
}

// Scored with min_samples: an upstream with fewer samples is on trial and
// gets the requests it needs, one at a time in chain order; it is not
// judged on them until it has min_samples.
func TestScoredTrialLogsSamplesAndScores(t *testing.T) {
	t.Parallel()
	vs := newMemVendors("a", "b")
	logs := &testsupport.SyncBuffer{}
	r := newMemVendorRunner(t, vs, selectPolicy([]string{memUpstream("a", ""), memUpstream("b", "")}, `["a","b"]`,
		`{"strategy": "scored", "min_samples": 2}`), func(cr *chain.Runner) { cr.Log = zerolog.New(logs) })
	for range 5 {
		r.postAs(t, "sk-app", chatBody)
		r.record(t)
	}
	lines := logLines(t, logs)
	var chosen []string
	for _, l := range lines {
		sel, _ := l["selection"].(map[string]any)
		c, _ := sel["chosen"].(string)
		chosen = append(chosen, c)
	}
	if got := strings.Join(chosen, " "); !strings.HasPrefix(got, "a a b b ") {
		t.Errorf("chosen %s; want a twice and b twice on trial first", got)
	}
	last, _ := lines[len(lines)-1]["selection"].(map[string]any)
	cands, _ := last["candidates"].([]any)
	if len(cands) != 2 {
		t.Fatalf("candidates %v; want 2", cands)
	}
	for _, c := range cands {
		m := c.(map[string]any)
		if _, ok := m["score"]; !ok || m["samples"].(float64) < 2 || m["trial"] != nil {
			t.Errorf("candidate %v; want judged with a score and at least 2 samples", m)
		}
	}
}

// A route without select logs no selection and walks the chain as written.
func TestOrderedRouteHasNoSelection(t *testing.T) {
	t.Parallel()
	vs := newMemVendors("a", "b")
	logs := &testsupport.SyncBuffer{}
	r := newMemVendorRunner(t, vs, openaiPolicy([]string{memUpstream("a", ""), memUpstream("b", "")}, `["a","b"]`, ""),
		func(cr *chain.Runner) { cr.Log = zerolog.New(logs) })
	r.postAs(t, "sk-app", chatBody)
	if rec := r.record(t); rec.AnsweredBy != "a" {
		t.Errorf("answered by %s; want a", rec.AnsweredBy)
	}
	if sel, ok := logLines(t, logs)[0]["selection"]; ok {
		t.Errorf("log line has selection %v; want none", sel)
	}
}

// The pre-filters skip, before sending anything, an upstream the request
// does not fit or that lacks what it needs, each logged as a skipped
// attempt with its reason; the next upstream answers.
func TestPreFiltersSkipBeforeSending(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("word ", 1000) // 5000 characters: about 1250 tokens
	for _, tc := range []struct {
		name, small, body, trail, reason string
	}{
		{"context window", `, "context_window": 1000`, `{"model":"gpt-4o","max_tokens":100,"messages":[{"role":"user","content":"` + long + `"}]}`,
			"small:skipped:context_too_long big:ok", "estimated 1250 input tokens + 100 max_tokens exceed its context_window 1000"},
		{"tools", `, "capabilities": ["json"]`, `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}]}`,
			"small:skipped:invalid_request big:ok", "lacks capability tools that the request needs (capabilities)"},
		{"vision", `, "capabilities": ["tools"]`, `{"model":"gpt-4o","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://example.com/a.png"}}]}]}`,
			"small:skipped:invalid_request big:ok", "lacks capability vision that the request needs (capabilities)"},
		{"json", `, "capabilities": []`, `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_object"}}`,
			"small:skipped:invalid_request big:ok", "lacks capability json that the request needs (capabilities)"},
		{"fits", `, "context_window": 1000, "capabilities": ["tools", "vision", "json"]`, chatBody, "small:ok", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			vs := newMemVendors("small", "big")
			logs := &testsupport.SyncBuffer{}
			r := newMemVendorRunner(t, vs, openaiPolicy([]string{memUpstream("small", tc.small), memUpstream("big", "")}, `["small","big"]`, ""),
				func(cr *chain.Runner) { cr.Log = zerolog.New(logs) })
			resp := r.postAs(t, "sk-app", tc.body)
			rec := r.record(t)
			if resp.StatusCode != 200 || trail(rec) != tc.trail {
				t.Fatalf("status %d, attempts %q; want 200, %q", resp.StatusCode, trail(rec), tc.trail)
			}
			if vs["small"].Calls() != 0 && tc.reason != "" {
				t.Errorf("the filtered upstream was called %d times", vs["small"].Calls())
			}
			if tc.reason == "" {
				return
			}
			if rec.Attempts[0].Reason != tc.reason {
				t.Errorf("skip reason %q; want %q", rec.Attempts[0].Reason, tc.reason)
			}
			sel, _ := logLines(t, logs)[0]["selection"].(map[string]any)
			cands, _ := sel["candidates"].([]any)
			if len(cands) != 2 {
				t.Fatalf("log selection %v; want two candidates", sel)
			}
			c0, _ := cands[0].(map[string]any)
			if sel["strategy"] != "ordered" || sel["chosen"] != "big" || c0["skipped_reason"] != tc.reason {
				t.Errorf("log selection %v", sel)
			}
		})
	}
}

// When the pre-filters take out every upstream, the app gets a 400 in its
// vendor's envelope that says why, and nothing is sent.
func TestPreFiltersRefuseWhenNothingFits(t *testing.T) {
	t.Parallel()
	vs := newMemVendors("a", "b")
	r := newMemVendorRunner(t, vs, openaiPolicy([]string{memUpstream("a", `, "context_window": 10`), memUpstream("b", `, "context_window": 20`)}, `["a","b"]`, ""), nil)
	resp := r.post(t, "/v1/chat/completions", `{"model":"gpt-4o","max_tokens":50,"messages":[{"role":"user","content":"hi"}]}`)
	body, _ := io.ReadAll(resp.Body)
	var e struct {
		Error struct{ Message, Type, Code string }
	}
	if err := json.Unmarshal(body, &e); err != nil || resp.StatusCode != 400 {
		t.Fatalf("status %d body %s; want an OpenAI 400", resp.StatusCode, body)
	}
	for _, want := range []string{"no upstream of route chat can take this request",
		"a: estimated 1 input tokens + 50 max_tokens exceed its context_window 10",
		"b: estimated 1 input tokens + 50 max_tokens exceed its context_window 20"} {
		if !strings.Contains(e.Error.Message, want) {
			t.Errorf("message %q lacks %q", e.Error.Message, want)
		}
	}
	if e.Error.Type != "invalid_request_error" {
		t.Errorf("type %q; want invalid_request_error", e.Error.Type)
	}
	if vs["a"].Calls()+vs["b"].Calls() != 0 {
		t.Error("a filtered upstream was called")
	}
}

// A static last resort is never filtered: it answers when nothing else fits.
func TestPreFiltersLeaveTheStaticLastResort(t *testing.T) {
	t.Parallel()
	vs := newMemVendors("a")
	r := newMemVendorRunner(t, vs, openaiPolicy([]string{memUpstream("a", `, "capabilities": []`), `"sorry": {"shape": "static", "text": "Busy."}`}, `["a","sorry"]`, ""), nil)
	resp := r.post(t, "/v1/chat/completions", `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_object"}}`)
	if got := openaiText(t, resp); got != "Busy." {
		t.Errorf("answer %q; want the static one", got)
	}
}

// A scored route with a cost weight puts the cheaper upstream first once
// both are judged, from the upstreams' own prices (blended 3:1 input to
// output): the latency and errors of two in-memory vendors are alike, so
// only the price tells them apart.
func TestScoredCostTermReadsTheUpstreamsPrices(t *testing.T) {
	t.Parallel()
	vs := newMemVendors("dear", "cheap")
	logs := &testsupport.SyncBuffer{}
	r := newMemVendorRunner(t, vs, selectPolicy([]string{
		memUpstream("dear", `, "prices": {"*": {"input": 2.5, "output": 10}}`),
		memUpstream("cheap", `, "prices": {"*": {"input": 0.15, "output": 0.6}}`),
	}, `["dear","cheap"]`, `{"strategy": "scored", "score": {"latency": 0, "errors": 0, "cost": 1}, "min_samples": 1}`),
		func(cr *chain.Runner) { cr.Log = zerolog.New(logs) })
	for range 4 {
		r.postAs(t, "sk-app", chatBody)
		r.record(t)
	}
	lines := logLines(t, logs)
	last, _ := lines[len(lines)-1]["selection"].(map[string]any)
	if last["chosen"] != "cheap" {
		t.Fatalf("chosen %v; want the cheaper upstream (selection %v)", last["chosen"], last)
	}
	for _, c := range last["candidates"].([]any) {
		m := c.(map[string]any)
		want := map[string]float64{"dear": (3*2.5 + 10) / 4, "cheap": (3*0.15 + 0.6) / 4}[m["upstream"].(string)]
		if got, _ := m["score"].(float64); math.Abs(got-want) > 1e-9 {
			t.Errorf("%v: score %v; want its blended price %v", m["upstream"], got, want)
		}
	}
}
