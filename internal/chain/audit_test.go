package chain_test

// Audit tests: each requirement of the resilience issue proven end to end
// through the chain runner against the fake vendor (or a raw upstream where
// the fake cannot send what the requirement is about).

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/detour-proxy/detour/internal/chain"
	"github.com/detour-proxy/detour/internal/detourtest"
	fv "github.com/detour-proxy/detour/internal/fakevendor"
	"github.com/detour-proxy/detour/internal/health"
	"github.com/detour-proxy/detour/policy"
	"github.com/detour-proxy/detour/rewrite"
)

// auditLog is a log sink safe for concurrent writes.
type auditLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *auditLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// lines returns the canonical log lines as decoded JSON.
func (l *auditLog) lines(t *testing.T) []map[string]any {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, ln := range strings.Split(strings.TrimSpace(l.b.String()), "\n") {
		if ln == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(ln), &m); err != nil {
			t.Fatalf("log line %q: %v", ln, err)
		}
		out = append(out, m)
	}
	return out
}

// newAuditRunner is newClockedRunner (clk may be nil: the real clock) with
// the canonical log line kept.
func newAuditRunner(t *testing.T, host, policyJSON string, clk *clock) (*runner, *auditLog) {
	t.Helper()
	logs := &auditLog{}
	r := startRunner(t, host, policyJSON, func(cr *chain.Runner) {
		cr.Log = zerolog.New(logs)
		if clk != nil {
			cr.Now, cr.Sleep = clk.Now, clk.Sleep
		}
	})
	return r, logs
}

// newTimedVendor is detourtest.NewVendor with the fake's clock set (the
// Anthropic spend-limit message names the 1st of the fake's next month).
func newTimedVendor(t *testing.T, shape rewrite.Shape, name string, now func() time.Time) *detourtest.Vendor {
	t.Helper()
	return detourtest.NewVendorWith(t, shape, fv.Options{Name: name, Now: now})
}

// rawShapedUpstream is rawUpstream for any shape.
func rawShapedUpstream(t *testing.T, name string, shape rewrite.Shape, handler http.HandlerFunc) string {
	t.Helper()
	up := httptest.NewTLSServer(handler)
	t.Cleanup(up.Close)
	caFile := filepath.Join(t.TempDir(), name+".pem")
	writeCert(t, caFile, up)
	base := up.URL
	if shape == rewrite.OpenAI {
		base += "/v1"
	}
	return fmt.Sprintf(`%q: {"shape": %q, "base_url": %q, "ca_file": %q, "auth": {"from": "client"}}`, name, shape, base, caFile)
}

func routePolicy(shape rewrite.Shape, ups []string, chainNames, extra string) string {
	path := map[rewrite.Shape]string{rewrite.OpenAI: "/v1/chat/completions", rewrite.Anthropic: "/v1/messages", rewrite.Gemini: "/v1beta/models/*"}[shape]
	return fmt.Sprintf(`{"upstreams": {%s},
  "routes": [{"name": "r", "match": {"host": %q, "path": %q}, "chain": %s}]%s}`,
		strings.Join(ups, ","), shape.DefaultHost(), path, chainNames, extra)
}

// requestFor is a minimal request of shape: path and body.
func requestFor(shape rewrite.Shape, stream bool) (string, string) {
	switch shape {
	case rewrite.Anthropic:
		s := ""
		if stream {
			s = `"stream":true,`
		}
		return "/v1/messages", `{"model":"claude-sonnet-4-5","max_tokens":50,` + s + `"messages":[{"role":"user","content":"hi"}]}`
	case rewrite.Gemini:
		p := "/v1beta/models/gemini-2.5-flash:generateContent"
		if stream {
			p = "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
		}
		return p, `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`
	}
	if stream {
		return "/v1/chat/completions", streamBody
	}
	return "/v1/chat/completions", chatBody
}

const geminiOK = `{"candidates":[{"content":{"role":"model","parts":[{"text":"Hello from raw."}]},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":1,"candidatesTokenCount":3,"totalTokenCount":4},"modelVersion":"gemini-2.5-flash"}`

const openaiOK = `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"Hello from raw."},"finish_reason":"stop"}]}`

// --- 1. Retries ----------------------------------------------------------

// Gemini's RetryInfo.retryDelay alone (no retry-after header, no hint in
// the message) sets the retry wait.
func TestAuditGeminiRetryInfoDrivesTheRetryWait(t *testing.T) {
	var calls atomic.Int64
	raw := rawShapedUpstream(t, "a", rewrite.Gemini, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if calls.Add(1) == 1 {
			w.WriteHeader(429)
			io.WriteString(w, `{"error":{"code":429,"message":"Resource has been exhausted (e.g. check quota).","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"3.5s"}]}}`)
			return
		}
		io.WriteString(w, geminiOK)
	})
	b := detourtest.NewVendor(t, rewrite.Gemini, "b")
	r, clk := newClockedRunner(t, rewrite.Gemini.DefaultHost(), routePolicy(rewrite.Gemini, []string{raw, upstreamJSON("b", b, "")}, `["a","b"]`, ""))
	path, body := requestFor(rewrite.Gemini, false)
	resp := post(t, r.srv.URL+path, body)
	all, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.Contains(string(all), "Hello from raw.") {
		t.Fatalf("%d %s; want a's answer after one retry", resp.StatusCode, all)
	}
	if s := clk.Sleeps(); len(s) != 1 || s[0] != 3500*time.Millisecond {
		t.Errorf("waits %v; want [3.5s] from RetryInfo.retryDelay", s)
	}
	rec := r.record(t)
	if got := trail(rec); got != "a:retry:rate_limited a:ok#1" {
		t.Errorf("attempts %q", got)
	}
	if !strings.Contains(rec.Attempts[0].Reason, "retry in 3.5s (retry-after)") {
		t.Errorf("reason %q", rec.Attempts[0].Reason)
	}
}

// The same through the fake vendor: its Gemini rate limit sends no
// retry-after header, only RetryInfo (26s by default).
func TestAuditGeminiFakeRetryInfoHonouredWithinTheLimit(t *testing.T) {
	a := detourtest.NewVendor(t, rewrite.Gemini, "a")
	b := detourtest.NewVendor(t, rewrite.Gemini, "b")
	r, clk := newClockedRunner(t, rewrite.Gemini.DefaultHost(), routePolicy(rewrite.Gemini, []string{upstreamJSON("a", a, ""), upstreamJSON("b", b, "")}, `["a","b"]`,
		`, "retry": {"honor_retry_after_up_to": "30s"}`))
	a.Script(fv.Fault{Kind: fv.Status, Status: 429, Class: fv.ClassRateLimit})
	path, body := requestFor(rewrite.Gemini, false)
	resp := post(t, r.srv.URL+path, body)
	all, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.Contains(string(all), "Hello from a.") {
		t.Fatalf("%d %s; want a's answer after one retry", resp.StatusCode, all)
	}
	if s := clk.Sleeps(); len(s) != 1 || s[0] != 26*time.Second {
		t.Errorf("waits %v; want [26s]", s)
	}
	if h := a.Requests(); len(h) != 2 {
		t.Errorf("a called %d times; want 2", len(h))
	}
}

// retry-after-ms wins over retry-after and sets the wait.
func TestAuditRetryAfterMsDrivesTheRetryWait(t *testing.T) {
	var calls atomic.Int64
	raw := rawShapedUpstream(t, "a", rewrite.OpenAI, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if calls.Add(1) == 1 {
			w.Header().Set("retry-after-ms", "1500")
			w.Header().Set("retry-after", "2")
			w.WriteHeader(429)
			io.WriteString(w, `{"error":{"message":"Rate limit reached for gpt-4o on requests per min (RPM): Limit 3, Used 3, Requested 1.","type":"requests","param":null,"code":"rate_limit_exceeded"}}`)
			return
		}
		io.WriteString(w, openaiOK)
	})
	b := detourtest.NewVendor(t, rewrite.OpenAI, "b")
	r, clk := newClockedRunner(t, "api.openai.com", openaiPolicy([]string{raw, upstreamJSON("b", b, "")}, `["a","b"]`, ""))
	if got := openaiText(t, post(t, r.srv.URL+"/v1/chat/completions", chatBody)); got != "Hello from raw." {
		t.Fatalf("answer %q", got)
	}
	if s := clk.Sleeps(); len(s) != 1 || s[0] != 1500*time.Millisecond {
		t.Errorf("waits %v; want [1.5s] from retry-after-ms", s)
	}
	if b.Calls() != 0 {
		t.Errorf("b called %d times", b.Calls())
	}
}

// A retry-after within honor_retry_after_up_to but past what is left of the
// deadline falls over at once.
func TestAuditRetryAfterPastTheDeadlineFallsOverAtOnce(t *testing.T) {
	a := detourtest.NewVendor(t, rewrite.OpenAI, "a")
	b := detourtest.NewVendor(t, rewrite.OpenAI, "b")
	r, clk := newClockedRunner(t, "api.openai.com", openaiPolicy([]string{upstreamJSON("a", a, ""), upstreamJSON("b", b, "")}, `["a","b"]`,
		`, "deadline": "5s", "retry": {"honor_retry_after_up_to": "10s"}`))
	a.Script(fv.Fault{Kind: fv.Status, Status: 429, Class: fv.ClassRateLimit, RetryAfter: "8"})
	if got := openaiText(t, post(t, r.srv.URL+"/v1/chat/completions", chatBody)); got != "Hello from b." {
		t.Fatalf("answer %q", got)
	}
	if len(clk.Sleeps()) != 0 || a.Calls() != 1 {
		t.Errorf("waits %v, a calls %d; want no wait, 1 call", clk.Sleeps(), a.Calls())
	}
	rec := r.record(t)
	if !strings.Contains(rec.Attempts[0].Reason, "left of the deadline") {
		t.Errorf("reason %q; want the deadline named", rec.Attempts[0].Reason)
	}
}

// --- 2. Breaker ----------------------------------------------------------

// The failure-rate trigger, with its minimum of requests, through the chain.
func TestAuditBreakerOpensOnFailureRateAfterMinRequests(t *testing.T) {
	a := detourtest.NewVendor(t, rewrite.OpenAI, "a")
	b := detourtest.NewVendor(t, rewrite.OpenAI, "b")
	r, clk := newClockedRunner(t, "api.openai.com", openaiPolicy([]string{upstreamJSON("a", a, ""), upstreamJSON("b", b, "")}, `["a","b"]`,
		`, "breaker": {"consecutive_failures": 100, "failure_rate": 0.5, "window": 4, "min_requests": 4}`))
	a.Script(fv.Fault{Kind: fv.Status, Status: 500}, fv.Fault{}, fv.Fault{Kind: fv.Status, Status: 500}, fv.Fault{})
	for i := range 3 {
		io.Copy(io.Discard, post(t, r.srv.URL+"/v1/chat/completions", chatBody).Body)
		if st := r.health.Breaker("a", clk.Now()); st.State != health.BreakerClosed {
			t.Fatalf("after %d requests (below min_requests): %v", i+1, st.State)
		}
	}
	io.Copy(io.Discard, post(t, r.srv.URL+"/v1/chat/completions", chatBody).Body)
	// 2 failures of 4: 50%, once the window holds min_requests.
	a.SetDefault(fv.Fault{Kind: fv.Status, Status: 500})
	io.Copy(io.Discard, post(t, r.srv.URL+"/v1/chat/completions", chatBody).Body)
	st := r.health.Breaker("a", clk.Now())
	if st.State != health.BreakerOpen || !strings.Contains(st.Reason, "failure rate") {
		t.Fatalf("breaker %+v; want open on failure rate", st)
	}
	calls := a.Calls()
	openaiText(t, post(t, r.srv.URL+"/v1/chat/completions", chatBody))
	if a.Calls() != calls {
		t.Error("an open breaker let a request through")
	}
}

// bad_response counts as a hard failure; rate limits and local limits never
// count.
func TestAuditBreakerCountsBadResponseNotRateLimits(t *testing.T) {
	a := detourtest.NewVendor(t, rewrite.OpenAI, "a")
	b := detourtest.NewVendor(t, rewrite.OpenAI, "b")
	r, clk := newClockedRunner(t, "api.openai.com", openaiPolicy([]string{upstreamJSON("a", a, ""), upstreamJSON("b", b, "")}, `["a","b"]`,
		`, "breaker": {"consecutive_failures": 2}, "errors": {"classes": {"rate_limited": {"retries": 0}}}`))
	a.SetDefault(fv.Fault{Kind: fv.Status, Status: 429, Class: fv.ClassRateLimit})
	for range 5 {
		openaiText(t, post(t, r.srv.URL+"/v1/chat/completions", chatBody))
	}
	if st := r.health.Breaker("a", clk.Now()); st.State != health.BreakerClosed || st.WindowCount != 0 {
		t.Fatalf("after 429s: %+v; want closed, nothing counted", st)
	}
	a.SetDefault(fv.Fault{Kind: fv.HTML200})
	for range 2 {
		openaiText(t, post(t, r.srv.URL+"/v1/chat/completions", chatBody))
	}
	if st := r.health.Breaker("a", clk.Now()); st.State != health.BreakerOpen {
		t.Fatalf("after 2 bad responses: %+v; want open", st)
	}
}

// --- 3. Quota cooldowns from the body -------------------------------------

func TestAuditQuotaCooldownLastsAsTheBodySays(t *testing.T) {
	cases := []struct {
		name  string
		shape rewrite.Shape
		class string
		extra string
		until string
	}{
		// The test clock is 2026-11-30 12:00 UTC.
		{"anthropic monthly spend limit", rewrite.Anthropic, fv.ClassSpendLimit, "", "2026-12-01T00:00:00Z"},
		{"anthropic monthly spend limit capped", rewrite.Anthropic, fv.ClassSpendLimit,
			`, "errors": {"classes": {"quota_exhausted": {"max_cooldown": "1h"}}}`, "2026-11-30T13:00:00Z"},
		// Pacific midnight: 08:00 UTC in winter.
		{"gemini per-day quota", rewrite.Gemini, fv.ClassQuotaPerDay, "", "2026-12-01T08:00:00Z"},
		{"gemini per-day quota capped", rewrite.Gemini, fv.ClassQuotaPerDay,
			`, "errors": {"classes": {"quota_exhausted": {"max_cooldown": "2h"}}}`, "2026-11-30T14:00:00Z"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			clk := newClock()
			a := newTimedVendor(t, c.shape, "a", clk.Now)
			b := detourtest.NewVendor(t, c.shape, "b")
			r, logs := newAuditRunner(t, c.shape.DefaultHost(), routePolicy(c.shape, []string{upstreamJSON("a", a, ""), upstreamJSON("b", b, "")}, `["a","b"]`, c.extra), clk)
			a.SetDefault(fv.Fault{Kind: fv.Status, Class: c.class})
			path, body := requestFor(c.shape, false)
			resp := post(t, r.srv.URL+path, body)
			io.Copy(io.Discard, resp.Body)
			if resp.StatusCode != 200 || resp.Header.Get(chain.HeaderAnsweredBy) != "b" {
				t.Fatalf("%d by %q; want b", resp.StatusCode, resp.Header.Get(chain.HeaderAnsweredBy))
			}
			rec := r.record(t)
			at := rec.Attempts[0]
			if at.Class != string(policy.ClassQuotaExhausted) {
				t.Fatalf("a's attempt %+v; want quota_exhausted", at)
			}
			cd, ok := r.health.CoolingDown("a", clk.Now())
			if !ok {
				t.Fatal("no cooldown")
			}
			want := c.until
			if got := cd.Until.UTC().Format(time.RFC3339); got != want {
				t.Errorf("cooldown until %s; want %s", got, want)
			}
			if !strings.Contains(at.Reason, "cooldown until "+want) {
				t.Errorf("reason %q; want the end time in it", at.Reason)
			}
			// The log line carries the end time.
			ls := logs.lines(t)
			if len(ls) == 0 || !strings.Contains(fmt.Sprint(ls[len(ls)-1]["attempts"]), "cooldown until "+want) {
				t.Errorf("log line %v; want cooldown until %s", ls, want)
			}
			// The next request skips a, naming the end.
			resp = post(t, r.srv.URL+path, body)
			io.Copy(io.Discard, resp.Body)
			rec = r.record(t)
			if a.Calls() != 1 || rec.Attempts[0].Outcome != chain.OutcomeSkipped || !strings.Contains(rec.Attempts[0].Reason, "cooling down until "+want) {
				t.Errorf("second request: a calls %d, attempts %+v", a.Calls(), rec.Attempts)
			}
		})
	}
}

// A reset the body names that comes sooner than the class's cooldown ends
// the cooldown then: five minutes before Pacific midnight, a Gemini per-day
// quota is back in five minutes, not after the default ten.
func TestAuditQuotaCooldownEndsAtASoonerResetFromTheBody(t *testing.T) {
	clk := newClock()
	clk.Advance(19*time.Hour + 55*time.Minute) // 2026-12-01 07:55 UTC, 23:55 in Los Angeles
	a := newTimedVendor(t, rewrite.Gemini, "a", clk.Now)
	b := detourtest.NewVendor(t, rewrite.Gemini, "b")
	r, _ := newAuditRunner(t, rewrite.Gemini.DefaultHost(), routePolicy(rewrite.Gemini, []string{upstreamJSON("a", a, ""), upstreamJSON("b", b, "")}, `["a","b"]`, ""), clk)
	a.SetDefault(fv.Fault{Kind: fv.Status, Class: fv.ClassQuotaPerDay})
	path, body := requestFor(rewrite.Gemini, false)
	io.Copy(io.Discard, post(t, r.srv.URL+path, body).Body)
	cd, ok := r.health.CoolingDown("a", clk.Now())
	if want := "2026-12-01T08:00:00Z"; !ok || cd.Until.UTC().Format(time.RFC3339) != want {
		t.Errorf("cooldown until %v (%v); want %s, the daily reset the body names", cd.Until.UTC(), ok, want)
	}
}

// --- 4. Hedging -----------------------------------------------------------

// The first upstream, though slow enough to be hedged, commits first: the
// hedge loses, is cancelled, and is logged hedge_lost with hedge true — for
// a stream too.
func TestAuditHedgedStreamFirstLaneWins(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			a := detourtest.NewVendor(t, rewrite.OpenAI, "a")
			b := detourtest.NewVendor(t, rewrite.OpenAI, "b")
			r, logs := newAuditRunner(t, "api.openai.com", openaiPolicy([]string{upstreamJSON("a", a, ""), upstreamJSON("b", b, "")}, `["a","b"]`, `, "hedge_after": "50ms"`), nil)
			a.Script(fv.Fault{Kind: fv.SlowFirstByte, Delay: 250 * time.Millisecond})
			b.Script(fv.Fault{Kind: fv.SlowFirstByte, Delay: 10 * time.Second})
			body := chatBody
			if stream {
				body = streamBody
			}
			resp := post(t, r.srv.URL+"/v1/chat/completions", body)
			all, _ := io.ReadAll(resp.Body)
			if !strings.Contains(string(all), "from a") && !strings.Contains(string(all), "Hello") {
				t.Fatalf("answer %s", all)
			}
			if by := resp.Header.Get(chain.HeaderAnsweredBy); by != "a" {
				t.Fatalf("answered by %q; want a", by)
			}
			rec := r.record(t)
			got := map[string]chain.AttemptRecord{}
			for _, at := range rec.Attempts {
				got[at.Upstream] = at
			}
			if got["a"].Outcome != chain.OutcomeOK || got["b"].Outcome != chain.OutcomeHedgeLost || !got["b"].Hedge {
				t.Errorf("attempts %q (b hedge %v); want a ok, b hedge_lost as a hedge", trail(rec), got["b"].Hedge)
			}
			waitIdle(t, b, "the losing hedge is still in flight")
			ls := logs.lines(t)
			line := fmt.Sprint(ls[len(ls)-1]["attempts"])
			if !strings.Contains(line, "hedge_lost") || !strings.Contains(line, "hedge:true") {
				t.Errorf("log attempts %s; want hedge_lost and hedge:true", line)
			}
		})
	}
}

// A hedged stream whose first lane hangs: the hedge, itself slow to its
// first byte, answers the whole stream.
func TestAuditHedgedStreamHangingFirstLaneLosesToTheHedge(t *testing.T) {
	a := detourtest.NewVendor(t, rewrite.OpenAI, "a")
	b := detourtest.NewVendor(t, rewrite.OpenAI, "b")
	r := newRunner(t, "api.openai.com", openaiPolicy([]string{upstreamJSON("a", a, ""), upstreamJSON("b", b, "")}, `["a","b"]`, `, "hedge_after": "30ms"`))
	a.Script(fv.Fault{Kind: fv.Hang, Delay: 200 * time.Millisecond})
	b.Script(fv.Fault{Kind: fv.SlowFirstByte, Delay: 100 * time.Millisecond})
	resp := post(t, r.srv.URL+"/v1/chat/completions", streamBody)
	evs := events(t, resp.Body)
	if resp.Header.Get(chain.HeaderAnsweredBy) != "b" || len(evs) == 0 || string(evs[len(evs)-1].Data) != "[DONE]" {
		t.Fatalf("answered by %q, %d events", resp.Header.Get(chain.HeaderAnsweredBy), len(evs))
	}
}

// --- 6. Tiers through real requests ----------------------------------------

func TestAuditTiersFromCodeBlocksAndFiles(t *testing.T) {
	hard := detourtest.NewVendor(t, rewrite.OpenAI, "hard")
	easy := detourtest.NewVendor(t, rewrite.OpenAI, "easy")
	pol := fmt.Sprintf(`{"upstreams": {%s, %s},
  "routes": [{"name": "chat", "match": {"host": "api.openai.com", "path": "/v1/chat/completions"}, "tiers": {"hard": ["hard", "easy"], "easy": ["easy", "hard"]}}],
  "classifier": {"easy_patterns": ["summar"]}}`,
		upstreamJSON("hard", hard, ""), upstreamJSON("easy", easy, ""))
	r, logs := newAuditRunner(t, "api.openai.com", pol, nil)
	fence := "```"
	img := map[string]any{"type": "image_url", "image_url": map[string]any{"url": "data:image/png;base64,iVBORw0KGgo="}}
	cases := []struct {
		name    string
		content any
		want    string
		reason  string
	}{
		{"two code blocks", "Summarize these:\n" + fence + "go\nfunc a() {}\n" + fence + "\nand\n" + fence + "py\ndef b(): pass\n" + fence, "hard", "code_blocks:2>=2"},
		{"one code block", "Summarize this:\n" + fence + "go\nfunc a() {}\n" + fence, "easy", `easy_pattern:"summar"`},
		{"two images", []any{map[string]any{"type": "text", "text": "Summarize these pictures"}, img, img}, "hard", "files:2>=2"},
		{"one image", []any{map[string]any{"type": "text", "text": "Summarize this picture"}, img}, "easy", `easy_pattern:"summar"`},
	}
	for _, c := range cases {
		body, _ := json.Marshal(map[string]any{"model": "gpt-4o", "messages": []any{map[string]any{"role": "user", "content": c.content}}})
		resp := post(t, r.srv.URL+"/v1/chat/completions", string(body))
		got := openaiText(t, resp)
		rec := r.record(t)
		if rec.Tier != c.want || got != "Hello from "+c.want+"." {
			t.Errorf("%s: tier %q answered %q; want %s", c.name, rec.Tier, got, c.want)
		}
		// Pattern reasons quote the matched word in the app's letter case.
		if !strings.Contains(strings.ToLower(strings.Join(rec.Reasons, " ")), c.reason) {
			t.Errorf("%s: reasons %q; want %q", c.name, rec.Reasons, c.reason)
		}
		ls := logs.lines(t)
		last := ls[len(ls)-1]
		if last["tier"] != c.want || !strings.Contains(strings.ToLower(fmt.Sprint(last["reasons"])), c.reason) {
			t.Errorf("%s: log tier %v reasons %v", c.name, last["tier"], last["reasons"])
		}
	}
}

// --- 7. Cache -------------------------------------------------------------

// By default a request without temperature (the vendors' default is 1) is
// neither stored nor served; TTL and entries bound what is served.
func TestAuditCacheDefaultsTTLAndEntries(t *testing.T) {
	a := detourtest.NewVendor(t, rewrite.OpenAI, "a")
	clk := newClock()
	r, _ := newAuditRunner(t, "api.openai.com", openaiPolicy([]string{upstreamJSON("a", a, "")}, `["a"]`, `, "cache": {"entries": 1, "ttl": "10m"}`), clk)
	q := func(s string) string {
		return `{"model":"gpt-4o","temperature":0,"messages":[{"role":"user","content":"` + s + `"}]}`
	}
	// No temperature: bypass.
	openaiText(t, post(t, r.srv.URL+"/v1/chat/completions", chatBody))
	if rec := r.record(t); rec.Cache != chain.CacheBypass {
		t.Errorf("no temperature: cache %q; want bypass", rec.Cache)
	}
	openaiText(t, post(t, r.srv.URL+"/v1/chat/completions", q("one")))
	openaiText(t, post(t, r.srv.URL+"/v1/chat/completions", q("two"))) // evicts "one"
	a.SetDefault(fv.Fault{Kind: fv.Status, Status: 503})

	status := func(body string) (int, string) {
		resp := post(t, r.srv.URL+"/v1/chat/completions", body)
		io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, resp.Header.Get(chain.HeaderAnsweredBy)
	}
	if code, _ := status(chatBody); code != 503 {
		t.Errorf("no temperature, all down: %d; want 503", code)
	}
	if code, _ := status(q("one")); code != 503 {
		t.Errorf("evicted entry: %d; want 503 (entries 1)", code)
	}
	if code, by := status(q("two")); code != 200 || by != "cache" {
		t.Errorf("kept entry: %d by %q; want 200 by cache", code, by)
	}
	clk.Advance(11 * time.Minute)
	if code, _ := status(q("two")); code != 503 {
		t.Errorf("after the ttl: %d; want 503", code)
	}
}

// --- 8. bad_response ------------------------------------------------------

func TestAuditBadResponseFallsOver(t *testing.T) {
	for _, shape := range []rewrite.Shape{rewrite.OpenAI, rewrite.Anthropic, rewrite.Gemini} {
		for _, kind := range []fv.FaultKind{fv.HTML200, fv.Empty200, fv.Truncated200} {
			for _, stream := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/%s/stream=%v", shape, kind, stream), func(t *testing.T) {
					a := detourtest.NewVendor(t, shape, "a")
					b := detourtest.NewVendor(t, shape, "b")
					r := newRunner(t, shape.DefaultHost(), routePolicy(shape, []string{upstreamJSON("a", a, ""), upstreamJSON("b", b, "")}, `["a","b"]`, ""))
					a.Script(fv.Fault{Kind: kind})
					path, body := requestFor(shape, stream)
					resp := post(t, r.srv.URL+path, body)
					all, _ := io.ReadAll(resp.Body)
					if resp.StatusCode != 200 || resp.Header.Get(chain.HeaderAnsweredBy) != "b" || !strings.Contains(string(all), "from b") && !strings.Contains(string(all), "Hello") {
						t.Fatalf("%d by %q: %s; want b's answer", resp.StatusCode, resp.Header.Get(chain.HeaderAnsweredBy), all)
					}
					if got := trail(r.record(t)); got != "a:fallback:bad_response b:ok" {
						t.Errorf("attempts %q", got)
					}
				})
			}
		}
	}
}

// A 200 event stream that is not the vendor's SSE before any content: no
// events at all, an HTML page under text/event-stream, a first event whose
// JSON is cut off.
func TestAuditBadStreamBeforeContentFallsOver(t *testing.T) {
	cases := map[string]string{
		"no events":       "",
		"html page":       "<!DOCTYPE html>\n<html><body><h1>Sign in</h1></body></html>\n",
		"truncated event": `data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assis` + "\n\n",
	}
	for name, payload := range cases {
		t.Run(name, func(t *testing.T) {
			raw := rawUpstream(t, "a", "", func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				io.WriteString(w, payload)
			})
			b := detourtest.NewVendor(t, rewrite.OpenAI, "b")
			r := newRunner(t, "api.openai.com", openaiPolicy([]string{raw, upstreamJSON("b", b, "")}, `["a","b"]`, ""))
			resp := post(t, r.srv.URL+"/v1/chat/completions", streamBody)
			all, _ := io.ReadAll(resp.Body)
			if by := resp.Header.Get(chain.HeaderAnsweredBy); by != "b" {
				t.Errorf("answered by %q (%d %q); want b after a bad_response", by, resp.StatusCode, all)
			}
			if got := trail(r.record(t)); got != "a:fallback:bad_response b:ok" {
				t.Errorf("attempts %q", got)
			}
		})
	}
}

// A Gemini stream without alt=sse is one JSON array (application/json):
// the vendor's own format, not a bad response.
func TestAuditGeminiArrayStreamIsNotABadResponse(t *testing.T) {
	a := detourtest.NewVendor(t, rewrite.Gemini, "a")
	b := detourtest.NewVendor(t, rewrite.Gemini, "b")
	r := newRunner(t, rewrite.Gemini.DefaultHost(), routePolicy(rewrite.Gemini, []string{upstreamJSON("a", a, ""), upstreamJSON("b", b, "")}, `["a","b"]`, ""))
	resp := post(t, r.srv.URL+"/v1beta/models/gemini-2.5-flash:streamGenerateContent", `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`)
	all, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || resp.Header.Get(chain.HeaderAnsweredBy) != "a" {
		t.Errorf("%d by %q: %.200s; want a's array stream", resp.StatusCode, resp.Header.Get(chain.HeaderAnsweredBy), all)
	}
	if got := trail(r.record(t)); got != "a:ok" {
		t.Errorf("attempts %q; want a:ok", got)
	}
}
