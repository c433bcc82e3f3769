package chain_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rs/zerolog"

	"github.com/detour-proxy/detour/internal/chain"
	"github.com/detour-proxy/detour/internal/detourtest"
	fv "github.com/detour-proxy/detour/internal/fakevendor"
	"github.com/detour-proxy/detour/internal/health"
	"github.com/detour-proxy/detour/internal/testsupport"
	"github.com/detour-proxy/detour/policy"
	"github.com/detour-proxy/detour/rewrite"
)

// clock is a virtual clock for breakers, cooldowns and retry waits: sleeps
// are recorded and advance it at once.
type clock struct {
	mu     sync.Mutex
	now    time.Time
	sleeps []time.Duration
}

func newClock() *clock { return &clock{now: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func (c *clock) Sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	c.sleeps = append(c.sleeps, d)
	c.now = c.now.Add(d)
	c.mu.Unlock()
	return ctx.Err()
}

func (c *clock) Sleeps() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.sleeps...)
}

// newClockedRunner is newRunner with a virtual clock.
func newClockedRunner(t *testing.T, host, policyJSON string) (*runner, *clock) {
	t.Helper()
	c := newClock()
	r := startRunner(t, host, policyJSON, func(cr *chain.Runner) { cr.Now, cr.Sleep = c.Now, c.Sleep })
	return r, c
}

const chatBody = `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`

// trail is a record's attempts as upstream:outcome[:class][#retry], for
// assertions that read like the log line.
func trail(rec *chain.Record) string {
	var parts []string
	for _, a := range rec.Attempts {
		s := a.Upstream + ":" + a.Outcome
		if a.Class != "" {
			s += ":" + a.Class
		}
		if a.Retry > 0 {
			s += fmt.Sprintf("#%d", a.Retry)
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, " ")
}

func openaiText(t *testing.T, resp *http.Response) string {
	t.Helper()
	b, _ := io.ReadAll(resp.Body)
	var v struct {
		Choices []struct {
			Message struct{ Content string } `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(b, &v); err != nil || len(v.Choices) == 0 {
		t.Fatalf("status %d, body %s: not an OpenAI answer", resp.StatusCode, b)
	}
	return v.Choices[0].Message.Content
}

func TestRetryHonoursRetryAfterThenAnswers(t *testing.T) {
	t.Parallel()
	a := detourtest.NewVendor(t, rewrite.OpenAI, "a")
	b := detourtest.NewVendor(t, rewrite.OpenAI, "b")
	r, clk := newClockedRunner(t, "api.openai.com", openaiPolicy([]string{upstreamJSON("a", a, ""), upstreamJSON("b", b, "")}, `["a","b"]`, ""))
	a.Script(fv.Fault{Kind: fv.Status, Status: 429, Class: fv.ClassRateLimit, RetryAfter: "2"})

	resp := post(t, r.srv.URL+"/v1/chat/completions", chatBody)
	if got := openaiText(t, resp); got != "Hello from a." {
		t.Fatalf("answer %q; want a's after one retry", got)
	}
	if a.Calls() != 2 || b.Calls() != 0 {
		t.Errorf("calls a=%d b=%d; want 2 and 0", a.Calls(), b.Calls())
	}
	if s := clk.Sleeps(); len(s) != 1 || s[0] != 2*time.Second {
		t.Errorf("waits %v; want [2s] from retry-after", s)
	}
	rec := r.record(t)
	if got := trail(rec); got != "a:retry:rate_limited a:ok#1" {
		t.Errorf("attempts %q", got)
	}
	if !strings.Contains(rec.Attempts[0].Reason, "retry in 2s (retry-after)") {
		t.Errorf("reason %q", rec.Attempts[0].Reason)
	}
}

func TestRetryAfterBeyondLimitFallsOverAtOnce(t *testing.T) {
	t.Parallel()
	a := detourtest.NewVendor(t, rewrite.OpenAI, "a")
	b := detourtest.NewVendor(t, rewrite.OpenAI, "b")
	r, clk := newClockedRunner(t, "api.openai.com", openaiPolicy([]string{upstreamJSON("a", a, ""), upstreamJSON("b", b, "")}, `["a","b"]`,
		`, "retry": {"honor_retry_after_up_to": "5s"}`))
	a.Script(fv.Fault{Kind: fv.Status, Status: 429, Class: fv.ClassRateLimit, RetryAfter: "30"})

	resp := post(t, r.srv.URL+"/v1/chat/completions", chatBody)
	if got := openaiText(t, resp); got != "Hello from b." {
		t.Fatalf("answer %q; want b's", got)
	}
	if a.Calls() != 1 || len(clk.Sleeps()) != 0 {
		t.Errorf("a called %d times, waits %v; want 1 call and no wait", a.Calls(), clk.Sleeps())
	}
	rec := r.record(t)
	if got := trail(rec); got != "a:fallback:rate_limited b:ok" {
		t.Errorf("attempts %q", got)
	}
	if !strings.Contains(rec.Attempts[0].Reason, "no retry: retry-after 30s exceeds honor_retry_after_up_to 5s") {
		t.Errorf("reason %q", rec.Attempts[0].Reason)
	}
}

func TestRetryBackoffIsJitteredAndBounded(t *testing.T) {
	t.Parallel()
	a := detourtest.NewVendor(t, rewrite.OpenAI, "a")
	b := detourtest.NewVendor(t, rewrite.OpenAI, "b")
	r, clk := newClockedRunner(t, "api.openai.com", openaiPolicy([]string{upstreamJSON("a", a, ""), upstreamJSON("b", b, "")}, `["a","b"]`,
		`, "retry": {"base": "100ms", "max": "150ms"}, "errors": {"classes": {"server_error": {"retries": 3}}}`))
	a.Script(fv.Fault{Kind: fv.Status, Status: 500}, fv.Fault{Kind: fv.Status, Status: 500}, fv.Fault{Kind: fv.Status, Status: 500}, fv.Fault{Kind: fv.Status, Status: 500})

	resp := post(t, r.srv.URL+"/v1/chat/completions", chatBody)
	if got := openaiText(t, resp); got != "Hello from b." {
		t.Fatalf("answer %q; want b's after a's retries ran out", got)
	}
	if a.Calls() != 4 {
		t.Errorf("a called %d times; want 1 + 3 retries", a.Calls())
	}
	waits := clk.Sleeps()
	if len(waits) != 3 {
		t.Fatalf("waits %v; want 3", waits)
	}
	for i, w := range waits {
		ceil := min(100*time.Millisecond<<i, 150*time.Millisecond)
		if w < 0 || w >= ceil {
			t.Errorf("wait %d = %v; want in [0, %v)", i, w, ceil)
		}
	}
	if got := trail(r.record(t)); got != "a:retry:server_error a:retry:server_error#1 a:retry:server_error#2 a:fallback:server_error#3 b:ok" {
		t.Errorf("attempts %q", got)
	}
}

func TestNoRetryAfterCommitOrForStopClasses(t *testing.T) {
	t.Parallel()
	a := detourtest.NewVendor(t, rewrite.OpenAI, "a")
	b := detourtest.NewVendor(t, rewrite.OpenAI, "b")
	r, _ := newClockedRunner(t, "api.openai.com", openaiPolicy([]string{upstreamJSON("a", a, ""), upstreamJSON("b", b, "")}, `["a","b"]`,
		`, "errors": {"classes": {"server_error": {"retries": 2}, "overloaded": {"retries": 2}}}`))

	// After the commit point the app has part of an answer: nothing is
	// replayed, not even on the same upstream.
	a.Script(fv.Fault{Kind: fv.StreamErrorMid})
	resp := post(t, r.srv.URL+"/v1/chat/completions", streamBody)
	io.Copy(io.Discard, resp.Body)
	if a.Calls() != 1 || b.Calls() != 0 {
		t.Errorf("after commit: calls a=%d b=%d; want 1 and 0", a.Calls(), b.Calls())
	}

	a.Reset()
	a.Script(fv.Fault{Kind: fv.Status, Status: 400, Class: fv.ClassInvalidRequest})
	resp = post(t, r.srv.URL+"/v1/chat/completions", chatBody)
	io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != 400 || a.Calls() != 1 || b.Calls() != 0 {
		t.Errorf("400: status %d, calls a=%d b=%d; want 400, 1, 0", resp.StatusCode, a.Calls(), b.Calls())
	}
}

// Gemini's RetryInfo.retryDelay alone (no retry-after header, no hint in
// the message) sets the retry wait.
func TestGeminiRetryInfoSetsTheRetryWait(t *testing.T) {
	t.Parallel()
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
func TestGeminiRateLimitRetryInfoIsHonouredWithinTheLimit(t *testing.T) {
	t.Parallel()
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
func TestRetryAfterMsWinsOverRetryAfter(t *testing.T) {
	t.Parallel()
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
func TestRetryAfterPastTheDeadlineFallsOverAtOnce(t *testing.T) {
	t.Parallel()
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

// A failure that was to be retried stays the chain's failure when the
// retry does not happen — the deadline passed during the wait, or a gate
// refuses the retry (local limit, a breaker or cooldown another request
// started): the app hears the upstream's own 5xx, not a 400 "no upstream
// serves model" or a 429 "local limit" as if nothing had been sent.
func TestRetryThatDoesNotHappenKeepsItsFailure(t *testing.T) {
	t.Parallel()
	t.Run("deadline passes during the wait", func(t *testing.T) {
		t.Parallel()
		a := detourtest.NewVendor(t, rewrite.OpenAI, "a")
		a.SetDefault(fv.Fault{Kind: fv.Status, Status: 500})
		r := startRunner(t, "api.openai.com", openaiPolicy([]string{upstreamJSON("a", a, "")}, `["a"]`,
			`, "deadline": "2s", "retry": {"base": "1ms", "max": "1ms"}, "errors": {"classes": {"server_error": {"retries": 1}}}`),
			func(cr *chain.Runner) {
				// A wait that ends late (a loaded scheduler, a GC pause): the
				// wait was shorter than what was left, the wake-up is not.
				// The deadline runs on the Runner's clock, so the late
				// wake-up is the clock moving 2.2 s.
				clk := newClock()
				cr.Now = clk.Now
				cr.Sleep = func(ctx context.Context, d time.Duration) error {
					clk.Advance(2200 * time.Millisecond)
					return ctx.Err()
				}
			})
		resp := post(t, r.srv.URL+"/v1/chat/completions", chatBody)
		body, _ := io.ReadAll(resp.Body)
		rec := r.record(t)
		if resp.StatusCode < 500 {
			t.Errorf("status %d body %s (attempts %q); want a's 5xx failure (or a 504), not a client error", resp.StatusCode, body, trail(rec))
		}
		if a.Calls() != 1 {
			t.Errorf("a called %d times; want 1 (the retry came after the deadline)", a.Calls())
		}
	})
	t.Run("local limit refuses the retry", func(t *testing.T) {
		t.Parallel()
		a := detourtest.NewVendor(t, rewrite.OpenAI, "a")
		a.SetDefault(fv.Fault{Kind: fv.Status, Status: 500})
		r, _ := newClockedRunner(t, "api.openai.com", openaiPolicy([]string{upstreamJSON("a", a, `, "limits": {"rpm": 1, "burst": 1}`)}, `["a"]`,
			`, "errors": {"classes": {"server_error": {"retries": 1}}}`))
		resp := post(t, r.srv.URL+"/v1/chat/completions", chatBody)
		body, _ := io.ReadAll(resp.Body)
		rec := r.record(t)
		if resp.StatusCode != 500 && resp.StatusCode != 502 {
			t.Errorf("status %d body %s (attempts %q); want a's server_error: a was sent the request and failed", resp.StatusCode, body, trail(rec))
		}
	})
}

func TestBreakerOpensSkipsAndRecovers(t *testing.T) {
	t.Parallel()
	a := detourtest.NewVendor(t, rewrite.OpenAI, "a")
	b := detourtest.NewVendor(t, rewrite.OpenAI, "b")
	r, clk := newClockedRunner(t, "api.openai.com", openaiPolicy([]string{upstreamJSON("a", a, ""), upstreamJSON("b", b, "")}, `["a","b"]`,
		`, "breaker": {"consecutive_failures": 3, "open_for": "30s", "half_open_probes": 2}`))
	a.SetDefault(fv.Fault{Kind: fv.Status, Status: 503})

	for range 10 {
		resp := post(t, r.srv.URL+"/v1/chat/completions", chatBody)
		if got := openaiText(t, resp); got != "Hello from b." {
			t.Fatalf("answer %q", got)
		}
	}
	if a.Calls() != 3 {
		t.Errorf("dead upstream called %d times; want 3 (the breaker opens after 3 consecutive failures)", a.Calls())
	}
	if st := r.health.Breaker("a", clk.Now()); st.State != health.BreakerOpen {
		t.Fatalf("breaker %v; want open", st.State)
	}
	rec := r.record(t)
	if rec.Attempts[0].Outcome != chain.OutcomeSkipped || !strings.Contains(rec.Attempts[0].Reason, "breaker open") {
		t.Errorf("attempt %+v; want skipped, breaker open", rec.Attempts[0])
	}

	// After open_for: half-open. A failing probe reopens it at once.
	clk.Advance(31 * time.Second)
	post(t, r.srv.URL+"/v1/chat/completions", chatBody)
	if a.Calls() != 4 {
		t.Fatalf("a called %d times; want one probe", a.Calls())
	}
	if st := r.health.Breaker("a", clk.Now()); st.State != health.BreakerOpen {
		t.Fatalf("after a failed probe: %v; want open", st.State)
	}

	// The upstream recovers: two successful probes close it.
	a.SetDefault(fv.Fault{})
	clk.Advance(31 * time.Second)
	for range 2 {
		if got := openaiText(t, post(t, r.srv.URL+"/v1/chat/completions", chatBody)); got != "Hello from a." {
			t.Fatalf("probe answer %q; want a's", got)
		}
	}
	if st := r.health.Breaker("a", clk.Now()); st.State != health.BreakerClosed {
		t.Errorf("after 2 good probes: %v; want closed", st.State)
	}
}

func TestBreakerCountsTimeoutsApartAndIgnoresClientErrors(t *testing.T) {
	t.Parallel()
	// In a synctest bubble, app and upstreams in memory: a's first_byte
	// timeouts pass on virtual time, so a prompt 400 is never late.
	synctest.Test(t, testBreakerCountsTimeoutsApartAndIgnoresClientErrors)
}

func testBreakerCountsTimeoutsApartAndIgnoresClientErrors(t *testing.T) {
	var aHangs atomic.Bool
	rt := rtFunc(func(req *http.Request) (*http.Response, error) {
		if req.URL.Hostname() == "b.test" {
			return jsonResponse(req, 200, openaiOK), nil
		}
		if aHangs.Load() {
			<-req.Context().Done()
			return nil, req.Context().Err()
		}
		return jsonResponse(req, 400, invalidRequestBody), nil
	})
	clk := newClock()
	r := newMemRunner(t, "api.openai.com", openaiPolicy([]string{memUpstream("a", `, "timeouts": {"first_byte": "250ms"}`), memUpstream("b", "")}, `["a","b"]`,
		`, "breaker": {"consecutive_failures": 2, "consecutive_timeouts": 4, "min_requests": 20}`),
		func(cr *chain.Runner) {
			cr.Transports = &chain.Transports{Override: rt}
			cr.Now, cr.Sleep = clk.Now, clk.Sleep
		})
	send := func() {
		req, _ := http.NewRequest(http.MethodPost, "http://api.openai.com/v1/chat/completions", strings.NewReader(chatBody))
		io.Copy(io.Discard, r.serveMem(req).Body)
	}

	// Client errors never count, however many.
	for range 5 {
		send()
	}
	if st := r.health.Breaker("a", clk.Now()); st.State != health.BreakerClosed || st.ConsecutiveFailures != 0 || st.ConsecutiveTimeouts != 0 {
		t.Fatalf("after 400s: %+v; want closed, nothing counted", st)
	}

	// Three slow answers are soft failures: below their own threshold,
	// though above the hard one.
	aHangs.Store(true)
	for range 3 {
		send()
	}
	st := r.health.Breaker("a", clk.Now())
	if st.State != health.BreakerClosed || st.ConsecutiveTimeouts != 3 {
		t.Fatalf("after 3 timeouts: %+v; want closed with 3 timeouts counted", st)
	}
	send()
	if st := r.health.Breaker("a", clk.Now()); st.State != health.BreakerOpen {
		t.Errorf("after 4 timeouts: %v; want open", st.State)
	}
}

func TestBreakerNeverSkipsTheLastUpstream(t *testing.T) {
	t.Parallel()
	a := detourtest.NewVendor(t, rewrite.OpenAI, "a")
	r, _ := newClockedRunner(t, "api.openai.com", openaiPolicy([]string{upstreamJSON("a", a, "")}, `["a"]`,
		`, "breaker": {"consecutive_failures": 2}`))
	a.SetDefault(fv.Fault{Kind: fv.Status, Status: 503})
	for range 5 {
		io.Copy(io.Discard, post(t, r.srv.URL+"/v1/chat/completions", chatBody).Body)
	}
	if a.Calls() != 5 {
		t.Errorf("last upstream called %d times; want 5 (never_skip_last)", a.Calls())
	}
}

// The failure-rate trigger, with its minimum of requests, through the chain.
func TestBreakerOpensOnFailureRateAfterMinRequests(t *testing.T) {
	t.Parallel()
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
func TestBreakerCountsBadResponseNotRateLimits(t *testing.T) {
	t.Parallel()
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

func TestConcurrencyLimitSkipsToTheNextUpstream(t *testing.T) {
	t.Parallel()
	// a holds its first request until the second one has been answered:
	// in memory, so that "slow" is a channel, not a fixed delay.
	var aCalls atomic.Int32
	aHas, release := make(chan struct{}), make(chan struct{})
	rt := rtFunc(func(req *http.Request) (*http.Response, error) {
		name := req.URL.Hostname()
		if name == "a.test" {
			if aCalls.Add(1) == 1 {
				close(aHas)
				<-release
			}
			return jsonResponse(req, 200, helloFrom("a")), nil
		}
		return jsonResponse(req, 200, helloFrom("b")), nil
	})
	r := startRunner(t, "api.openai.com", openaiPolicy([]string{memUpstream("a", `, "limits": {"concurrency": 1}`), memUpstream("b", "")}, `["a","b"]`, ""),
		func(cr *chain.Runner) { cr.Transports = &chain.Transports{Override: rt} })

	first := make(chan string)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, r.srv.URL+"/v1/chat/completions", strings.NewReader(chatBody))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			first <- err.Error()
			return
		}
		defer resp.Body.Close()
		first <- openaiText(t, resp)
	}()
	waitFor(t, "a's first request", aHas)
	if got := openaiText(t, post(t, r.srv.URL+"/v1/chat/completions", chatBody)); got != "Hello from b." {
		t.Errorf("second answer %q; want b's (a is at its concurrency limit)", got)
	}
	close(release)
	if got := <-first; got != "Hello from a." {
		t.Errorf("first answer %q", got)
	}
	var limited *chain.Record
	for _, rec := range r.settled(t) {
		if rec.AnsweredBy == "b" {
			limited = rec
		}
	}
	if limited == nil || trail(limited) != "a:skipped:local_limit b:ok" {
		t.Fatalf("records: want one with a skipped for local_limit")
	}
	if aCalls.Load() != 1 {
		t.Errorf("a called %d times; want 1", aCalls.Load())
	}
}

func TestRPMLimitOnTheOnlyUpstreamAnswers429(t *testing.T) {
	t.Parallel()
	a := detourtest.NewVendor(t, rewrite.OpenAI, "a")
	r, clk := newClockedRunner(t, "api.openai.com", openaiPolicy([]string{upstreamJSON("a", a, `, "limits": {"rpm": 60, "burst": 2}`)}, `["a"]`, ""))
	for range 2 {
		openaiText(t, post(t, r.srv.URL+"/v1/chat/completions", chatBody))
	}
	resp := post(t, r.srv.URL+"/v1/chat/completions", chatBody)
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 429 || !strings.Contains(string(body), `"type":"rate_limit_exceeded"`) && !strings.Contains(string(body), "local limit") {
		t.Fatalf("status %d body %s; want an OpenAI-shaped 429", resp.StatusCode, body)
	}
	if resp.Header.Get("Retry-After") == "" {
		t.Error("no Retry-After on a local limit")
	}
	if a.Calls() != 2 {
		t.Errorf("a called %d times; want 2 (burst)", a.Calls())
	}
	clk.Advance(time.Second)
	openaiText(t, post(t, r.srv.URL+"/v1/chat/completions", chatBody))
	if a.Calls() != 3 {
		t.Errorf("after a second's refill a called %d times; want 3", a.Calls())
	}
}

func TestHedgeStartsNextWhenSlowAndLoserIsCancelled(t *testing.T) {
	t.Parallel()
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				vs := newMemVendors("a", "b")
				a := vs["a"]
				r := newMemVendorRunner(t, vs, openaiPolicy([]string{memUpstream("a", ""), memUpstream("b", "")}, `["a","b"]`, `, "hedge_after": "50ms"`), nil)
				a.Script(fv.Fault{Kind: fv.Hang, Delay: 10 * time.Second})

				body := chatBody
				if stream {
					body = streamBody
				}
				resp := r.post(t, "/v1/chat/completions", body)
				all, _ := io.ReadAll(resp.Body)
				if !strings.Contains(string(all), "Hello") || !strings.Contains(string(all), "b") {
					t.Fatalf("answer %s; want b's", all)
				}
				if by := resp.Header.Get(chain.HeaderAnsweredBy); by != "b" {
					t.Errorf("answered by %q", by)
				}
				rec := r.record(t)
				got := map[string]chain.AttemptRecord{}
				for _, at := range rec.Attempts {
					got[at.Upstream] = at
				}
				if got["a"].Outcome != chain.OutcomeHedgeLost || got["b"].Outcome != chain.OutcomeOK || !got["b"].Hedge {
					t.Errorf("attempts %q (b hedge=%v); want a hedge_lost, b ok as a hedge", trail(rec), got["b"].Hedge)
				}
				// The loser's request is cancelled, not left to hang.
				waitIdle(t, a, "the losing upstream's request is still in flight")
				if st := r.health.Breaker("a", time.Now()); st.ConsecutiveTimeouts != 0 || st.ConsecutiveFailures != 0 {
					t.Errorf("a hedge loser counted against its breaker: %+v", st)
				}
			})
		})
	}
}

func TestHedgeNotStartedWhenFirstAnswersInTime(t *testing.T) {
	t.Parallel()
	a := detourtest.NewVendor(t, rewrite.OpenAI, "a")
	b := detourtest.NewVendor(t, rewrite.OpenAI, "b")
	r := newRunner(t, "api.openai.com", openaiPolicy([]string{upstreamJSON("a", a, ""), upstreamJSON("b", b, "")}, `["a","b"]`, `, "hedge_after": "2s"`))
	for range 3 {
		if got := openaiText(t, post(t, r.srv.URL+"/v1/chat/completions", chatBody)); got != "Hello from a." {
			t.Fatalf("answer %q", got)
		}
	}
	// A fast failure still falls over at once, hedging or not.
	a.Script(fv.Fault{Kind: fv.Status, Status: 503})
	if got := openaiText(t, post(t, r.srv.URL+"/v1/chat/completions", chatBody)); got != "Hello from b." {
		t.Fatalf("answer %q", got)
	}
	if b.Calls() != 1 {
		t.Errorf("b called %d times; want 1", b.Calls())
	}
	if got := trail(r.record(t)); got != "a:fallback:overloaded b:ok" {
		t.Errorf("attempts %q", got)
	}
}

// The first upstream, though slow enough to be hedged, commits first: the
// hedge loses, is cancelled, and is logged hedge_lost with hedge true — for
// a stream too.
func TestHedgedFirstLaneThatCommitsFirstWins(t *testing.T) {
	t.Parallel()
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				vs := newMemVendors("a", "b")
				a, b := vs["a"], vs["b"]
				logs := &testsupport.SyncBuffer{}
				r := newMemVendorRunner(t, vs, openaiPolicy([]string{memUpstream("a", ""), memUpstream("b", "")}, `["a","b"]`, `, "hedge_after": "50ms"`),
					func(cr *chain.Runner) { cr.Log = zerolog.New(logs) })
				a.Script(fv.Fault{Kind: fv.SlowFirstByte, Delay: 250 * time.Millisecond})
				b.Script(fv.Fault{Kind: fv.SlowFirstByte, Delay: 10 * time.Second})
				body := chatBody
				if stream {
					body = streamBody
				}
				resp := r.post(t, "/v1/chat/completions", body)
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
				ls := logLines(t, logs)
				line := fmt.Sprint(ls[len(ls)-1]["attempts"])
				if !strings.Contains(line, "hedge_lost") || !strings.Contains(line, "hedge:true") {
					t.Errorf("log attempts %s; want hedge_lost and hedge:true", line)
				}
			})
		})
	}
}

// A hedged stream whose first lane hangs: the hedge, itself slow to its
// first byte, answers the whole stream.
func TestHedgeAnswersTheStreamWhenTheFirstLaneHangs(t *testing.T) {
	t.Parallel()
	synctest.Test(t, testHedgeAnswersTheStreamWhenTheFirstLaneHangs)
}

func testHedgeAnswersTheStreamWhenTheFirstLaneHangs(t *testing.T) {
	vs := newMemVendors("a", "b")
	a, b := vs["a"], vs["b"]
	r := newMemVendorRunner(t, vs, openaiPolicy([]string{memUpstream("a", ""), memUpstream("b", "")}, `["a","b"]`, `, "hedge_after": "30ms"`), nil)
	a.Script(fv.Fault{Kind: fv.Hang, Delay: 200 * time.Millisecond})
	b.Script(fv.Fault{Kind: fv.SlowFirstByte, Delay: 100 * time.Millisecond})
	resp := r.post(t, "/v1/chat/completions", streamBody)
	evs := events(t, resp.Body)
	if resp.Header.Get(chain.HeaderAnsweredBy) != "b" || len(evs) == 0 || string(evs[len(evs)-1].Data) != "[DONE]" {
		t.Fatalf("answered by %q, %d events", resp.Header.Get(chain.HeaderAnsweredBy), len(evs))
	}
}

// Once a lane has claimed the answer no new lane starts, though the
// winner's result reaches runHedged only when it ends (for a stream: after
// the whole pump): neither a loser's failure classified before the claim
// nor the hedge timer may start the next upstream, whose call could only
// end hedge_lost, with a lane the claim did not cancel and that Serve would
// wait for.
func TestHedgeStartsNoUpstreamAfterAWinner(t *testing.T) {
	t.Parallel()
	// In a synctest bubble, app and upstreams in memory: synctest.Wait
	// tells when b's failure has reached runHedged, on virtual time.
	synctest.Test(t, testHedgeStartsNoUpstreamAfterAWinner)
}

func testHedgeStartsNoUpstreamAfterAWinner(t *testing.T) {
	releaseA, finishA := make(chan struct{}), make(chan struct{})
	bClose := &closeGate{Reader: strings.NewReader(overloadedBody), closing: make(chan struct{}), release: make(chan struct{})}
	var claimed atomic.Bool
	var cAfterClaim atomic.Int32
	rt := rtFunc(func(req *http.Request) (*http.Response, error) {
		ctx := req.Context()
		switch req.URL.Hostname() {
		case "a.test":
			select {
			case <-releaseA:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			pr, pw := io.Pipe()
			go func() {
				io.WriteString(pw, roleChunk)
				io.WriteString(pw, `data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"one"}}]}`+"\n\n")
				select {
				case <-finishA:
					io.WriteString(pw, `data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`+"\n\ndata: [DONE]\n\n")
					pw.Close()
				case <-ctx.Done():
					pw.CloseWithError(ctx.Err())
				}
			}()
			return &http.Response{StatusCode: 200, Status: "200 OK", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
				Header: http.Header{"Content-Type": {"text/event-stream"}}, Body: pr, Request: req}, nil
		case "b.test":
			resp := jsonResponse(req, 503, overloadedBody)
			resp.Body = bClose
			return resp, nil
		default: // c.test
			if claimed.Load() {
				cAfterClaim.Add(1)
			}
			return jsonResponse(req, 503, overloadedBody), nil
		}
	})
	r := newMemRunner(t, "api.openai.com", openaiPolicy([]string{memUpstream("a", ""), memUpstream("b", ""), memUpstream("c", "")}, `["a","b","c"]`,
		`, "hedge_after": "100ms", "breaker": {"enabled": false}`), func(cr *chain.Runner) { cr.Transports = &chain.Transports{Override: rt} })

	type result struct {
		resp *http.Response
		err  error
	}
	got := make(chan result, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, "http://api.openai.com/v1/chat/completions", strings.NewReader(streamBody))
		req.Header.Set("Authorization", "Bearer sk-app")
		got <- result{r.serveMem(req), nil}
	}()

	// a is slow: b starts as a hedge and fails with a 503. Its failure is
	// classified; its lane is about to report kindNext.
	waitFor(t, "b's attempt to finish", bClose.closing)
	// Now a answers and commits: it wins and the app gets its first event.
	close(releaseA)
	res := <-got
	if res.err != nil {
		t.Fatal(res.err)
	}
	defer res.resp.Body.Close()
	br := bufio.NewReader(res.resp.Body)
	for {
		line, err := br.ReadString('\n')
		if strings.Contains(line, `"one"`) {
			break
		}
		if err != nil {
			t.Fatalf("stream ended before a's first content: %v", err)
		}
	}
	claimed.Store(true)
	// b's lane reports its failure only now, after a's claim.
	close(bClose.release)
	// Every goroutine of the request is blocked again: b's result has
	// reached runHedged and started whatever it was going to start.
	synctest.Wait()
	close(finishA)
	io.Copy(io.Discard, br)
	rec := r.record(t)
	if n := cAfterClaim.Load(); n != 0 {
		t.Errorf("upstream c was called %d time(s) after a had already answered the app (attempts %q); a decided request must start no lane", n, trail(rec))
	}
	if res.resp.Header.Get(chain.HeaderAnsweredBy) != "a" {
		t.Errorf("answered by %q; want a", res.resp.Header.Get(chain.HeaderAnsweredBy))
	}
}

// Without hedging a panic in an attempt unwinds through the attempt's
// deferred end, so the upstream's concurrency slot and breaker ticket are
// given back, and net/http recovers the handler.
func TestPanicInSequentialAttemptReleasesItsSlot(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	rt := rtFunc(func(req *http.Request) (*http.Response, error) {
		if calls.Add(1) == 1 {
			panic("boom in an attempt")
		}
		return jsonResponse(req, 200, `{"id":"x","object":"chat.completion","created":1,"model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"Hello from a."},"finish_reason":"stop"}]}`), nil
	})
	r := startRunner(t, "api.openai.com", openaiPolicy([]string{memUpstream("a", `, "limits": {"concurrency": 1}`)}, `["a"]`, ""),
		func(cr *chain.Runner) { cr.Transports = &chain.Transports{Override: rt} })
	r.srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	req, _ := http.NewRequest(http.MethodPost, r.srv.URL+"/v1/chat/completions", strings.NewReader(chatBody))
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
	}
	if got := openaiText(t, post(t, r.srv.URL+"/v1/chat/completions", chatBody)); got != "Hello from a." {
		t.Fatalf("answer %q", got)
	}
	if n := r.health.Limit("a", time.Now()).InFlight; n != 0 {
		t.Errorf("%d slots still held", n)
	}
}

// A panic in a hedged lane's attempt (a translator, a transport, a dialer)
// does not kill the process: hedged lanes run in goroutines of their own,
// and the panic is handed to the handler's goroutine, where net/http
// recovers it as it does when the chain runs sequentially. The child
// process below serves one hedged request whose first upstream panics; it
// must survive.
func TestPanicInAHedgedLaneIsNotFatal(t *testing.T) {
	t.Parallel()
	if os.Getenv("DETOUR_PANIC_CHILD") == "1" {
		rt := rtFunc(func(req *http.Request) (*http.Response, error) {
			if req.URL.Hostname() == "a.test" {
				panic("boom in a hedged lane")
			}
			return jsonResponse(req, 200, `{"id":"x","object":"chat.completion","created":1,"model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"Hello from b."},"finish_reason":"stop"}]}`), nil
		})
		r := startRunner(t, "api.openai.com", openaiPolicy([]string{memUpstream("a", ""), memUpstream("b", "")}, `["a","b"]`, `, "hedge_after": "50ms"`),
			func(cr *chain.Runner) { cr.Transports = &chain.Transports{Override: rt} })
		req, _ := http.NewRequest(http.MethodPost, r.srv.URL+"/v1/chat/completions", strings.NewReader(chatBody))
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
		// Still serving.
		req, _ = http.NewRequest(http.MethodGet, r.srv.URL+"/v1/models", nil)
		_, _ = (&http.Client{Timeout: 2 * time.Second}).Do(req)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestPanicInAHedgedLaneIsNotFatal$", "-test.count=1")
	cmd.Env = testsupport.ChildEnv("DETOUR_PANIC_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		i := strings.Index(string(out), "panic: ")
		msg := string(out)
		if i >= 0 {
			msg = msg[i:min(len(msg), i+300)]
		}
		t.Errorf("a panic in a hedged lane killed the process (%v):\n%s", err, msg)
	}
}

func TestTiersPickTheChain(t *testing.T) {
	t.Parallel()
	hard := detourtest.NewVendor(t, rewrite.OpenAI, "hard")
	easy := detourtest.NewVendor(t, rewrite.OpenAI, "easy")
	pol := fmt.Sprintf(`{"upstreams": {%s, %s},
  "routes": [{"name": "chat", "match": {"host": "api.openai.com", "path": "/v1/chat/completions"}, "tiers": {"hard": ["hard", "easy"], "easy": ["easy", "hard"]}}],
  "classifier": {"hard_patterns": ["refactor|设计"], "easy_patterns": ["summar|翻译"], "long_input_chars": 200}}`,
		upstreamJSON("hard", hard, ""), upstreamJSON("easy", easy, ""))
	r := newRunner(t, "api.openai.com", pol)
	cases := []struct {
		prompt, header, want, reason string
	}{
		{"Summarize this paragraph.", "", "easy", `easy_pattern:"Summar"`},
		{"Please refactor this function.", "", "hard", `hard_pattern:"refactor"`},
		{"请翻译这句话", "", "easy", `easy_pattern:"翻译"`},
		{"What is the weather?", "", "hard", "undecided"},
		{"Summarize: " + strings.Repeat("x", 300), "", "hard", "long_input:"},
		{"Please refactor this function.", "easy", "easy", "header:x-detour-tier"},
		{"Summarize this paragraph.", "nonsense", "easy", "names no tier"},
	}
	for _, c := range cases {
		body, _ := json.Marshal(map[string]any{"model": "gpt-4o", "messages": []any{map[string]any{"role": "user", "content": c.prompt}}})
		req, _ := http.NewRequest(http.MethodPost, r.srv.URL+"/v1/chat/completions", strings.NewReader(string(body)))
		if c.header != "" {
			req.Header.Set(chain.HeaderTier, c.header)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got := openaiText(t, resp)
		resp.Body.Close()
		rec := r.record(t)
		if rec.Tier != c.want || got != "Hello from "+c.want+"." {
			t.Errorf("%q (header %q): tier %q answered %q (attempts %s); want %s", c.prompt, c.header, rec.Tier, got, trail(rec), c.want)
		}
		if !strings.Contains(strings.Join(rec.Reasons, " "), c.reason) {
			t.Errorf("%q: reasons %q; want %q among them", c.prompt, rec.Reasons, c.reason)
		}
	}
	for _, rq := range easy.Requests() {
		if rq.Header.Get(chain.HeaderTier) != "" {
			t.Error("x-detour-tier reached the upstream")
		}
	}
}

func TestTiersFromCodeBlocksAndFilesPickTheChain(t *testing.T) {
	t.Parallel()
	hard := detourtest.NewVendor(t, rewrite.OpenAI, "hard")
	easy := detourtest.NewVendor(t, rewrite.OpenAI, "easy")
	pol := fmt.Sprintf(`{"upstreams": {%s, %s},
  "routes": [{"name": "chat", "match": {"host": "api.openai.com", "path": "/v1/chat/completions"}, "tiers": {"hard": ["hard", "easy"], "easy": ["easy", "hard"]}}],
  "classifier": {"easy_patterns": ["summar"]}}`,
		upstreamJSON("hard", hard, ""), upstreamJSON("easy", easy, ""))
	r, logs := newLoggedRunner(t, "api.openai.com", pol, nil)
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
		ls := logLines(t, logs)
		last := ls[len(ls)-1]
		if last["tier"] != c.want || !strings.Contains(strings.ToLower(fmt.Sprint(last["reasons"])), c.reason) {
			t.Errorf("%s: log tier %v reasons %v", c.name, last["tier"], last["reasons"])
		}
	}
}

func TestHedgedClientGoneCancelsEveryLane(t *testing.T) {
	t.Parallel()
	a := detourtest.NewVendor(t, rewrite.OpenAI, "a")
	b := detourtest.NewVendor(t, rewrite.OpenAI, "b")
	r := newRunner(t, "api.openai.com", openaiPolicy([]string{upstreamJSON("a", a, ""), upstreamJSON("b", b, "")}, `["a","b"]`, `, "hedge_after": "20ms"`))
	a.SetDefault(fv.Fault{Kind: fv.Hang, Delay: 10 * time.Second})
	b.SetDefault(fv.Fault{Kind: fv.Hang, Delay: 10 * time.Second})

	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, r.srv.URL+"/v1/chat/completions", strings.NewReader(chatBody))
	done := make(chan struct{})
	go func() {
		defer close(done)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	waitUntil(t, "b's request", func() bool { return b.InFlight() != 0 })
	cancel()
	<-done
	rec := r.record(t)
	if rec.Status != 499 || trail(rec) != "a:client_gone b:client_gone" && trail(rec) != "b:client_gone a:client_gone" {
		t.Errorf("status %d attempts %q; want 499 and both lanes client_gone", rec.Status, trail(rec))
	}
	waitUntil(t, "both lanes to end", func() bool { return a.InFlight()+b.InFlight() == 0 })
	for _, n := range []string{"a", "b"} {
		if st := r.health.Breaker(n, time.Now()); st.ConsecutiveTimeouts+st.ConsecutiveFailures != 0 {
			t.Errorf("%s: the app going away counted against the breaker: %+v", n, st)
		}
	}
}

func TestEveryUpstreamOutOfQuotaSaysQuota(t *testing.T) {
	t.Parallel()
	a := detourtest.NewVendor(t, rewrite.OpenAI, "a")
	r, _ := newClockedRunner(t, "api.openai.com", openaiPolicy([]string{upstreamJSON("a", a, "")}, `["a"]`, `, "never_skip_last": false`))
	a.SetDefault(fv.Fault{Kind: fv.Status, Status: 429, Class: fv.ClassInsufficientQuota})
	io.Copy(io.Discard, post(t, r.srv.URL+"/v1/chat/completions", chatBody).Body)
	resp := post(t, r.srv.URL+"/v1/chat/completions", chatBody)
	body, _ := io.ReadAll(resp.Body)
	if a.Calls() != 1 || resp.StatusCode != 429 || !strings.Contains(string(body), "insufficient_quota") {
		t.Errorf("calls %d, %d %s; want 1 call and the app's own 429 insufficient_quota", a.Calls(), resp.StatusCode, body)
	}
	if ra := resp.Header.Get("Retry-After"); ra != "600" {
		t.Errorf("Retry-After %q; want 600 (the cooldown's end on detour's clock)", ra)
	}
}

func TestQuotaCooldownLastsAsTheBodySays(t *testing.T) {
	t.Parallel()
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
			t.Parallel()
			clk := newClock()
			a := newTimedVendor(t, c.shape, "a", clk.Now)
			b := detourtest.NewVendor(t, c.shape, "b")
			r, logs := newLoggedRunner(t, c.shape.DefaultHost(), routePolicy(c.shape, []string{upstreamJSON("a", a, ""), upstreamJSON("b", b, "")}, `["a","b"]`, c.extra), clk)
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
			ls := logLines(t, logs)
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
func TestQuotaCooldownEndsAtASoonerResetFromTheBody(t *testing.T) {
	t.Parallel()
	clk := newClock()
	clk.Advance(19*time.Hour + 55*time.Minute) // 2026-12-01 07:55 UTC, 23:55 in Los Angeles
	a := newTimedVendor(t, rewrite.Gemini, "a", clk.Now)
	b := detourtest.NewVendor(t, rewrite.Gemini, "b")
	r, _ := newLoggedRunner(t, rewrite.Gemini.DefaultHost(), routePolicy(rewrite.Gemini, []string{upstreamJSON("a", a, ""), upstreamJSON("b", b, "")}, `["a","b"]`, ""), clk)
	a.SetDefault(fv.Fault{Kind: fv.Status, Class: fv.ClassQuotaPerDay})
	path, body := requestFor(rewrite.Gemini, false)
	io.Copy(io.Discard, post(t, r.srv.URL+path, body).Body)
	cd, ok := r.health.CoolingDown("a", clk.Now())
	if want := "2026-12-01T08:00:00Z"; !ok || cd.Until.UTC().Format(time.RFC3339) != want {
		t.Errorf("cooldown until %v (%v); want %s, the daily reset the body names", cd.Until.UTC(), ok, want)
	}
}

// TestFailoverStormDoesNotFlattenTheBackup: the primary is dead and ten
// requests arrive at once; the backup, limited to 3 in flight, never sees
// more than 3 — the rest go on to the static last resort at once instead of
// queueing.
func TestFailoverStormDoesNotFlattenTheBackup(t *testing.T) {
	t.Parallel()
	a := detourtest.NewVendor(t, rewrite.OpenAI, "a")
	a.SetDefault(fv.Fault{Kind: fv.Status, Status: 503})
	release := make(chan struct{})
	var inFlight, peak atomic.Int64
	backup := detourtest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		<-release
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"from backup"},"finish_reason":"stop"}]}`)
	}))
	defer backup.Close()
	defer close(release)
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	writeCert(t, caFile, backup)
	b := fmt.Sprintf(`"b": {"shape": "openai", "base_url": %q, "ca_file": %q, "auth": {"from": "client"}, "limits": {"concurrency": 3}}`, backup.URL+"/v1", caFile)
	r := newRunner(t, "api.openai.com", openaiPolicy([]string{upstreamJSON("a", a, ""), b, sorry}, `["a","b","sorry"]`, `, "breaker": {"enabled": false}`))

	const n = 10
	answers := make(chan string, n)
	for range n {
		go func() {
			req, _ := http.NewRequest(http.MethodPost, r.srv.URL+"/v1/chat/completions", strings.NewReader(chatBody))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				answers <- err.Error()
				return
			}
			defer resp.Body.Close()
			answers <- resp.Header.Get(chain.HeaderAnsweredBy)
		}()
	}
	// Seven requests find the backup full and get the static answer
	// without waiting for it.
	for range n - 3 {
		if by := <-answers; by != "sorry" {
			t.Fatalf("answered by %q while the backup holds 3; want sorry", by)
		}
	}
	// The three that hold the backup's slots reach it (TLS and all).
	eventually(func() bool { return inFlight.Load() >= 3 })
	if got := inFlight.Load(); got != 3 {
		t.Errorf("backup in flight %d; want 3", got)
	}
	release <- struct{}{}
	release <- struct{}{}
	release <- struct{}{}
	for range 3 {
		if by := <-answers; by != "b" {
			t.Errorf("answered by %q; want b", by)
		}
	}
	if p := peak.Load(); p > 3 {
		t.Errorf("backup saw %d requests at once; want at most 3", p)
	}
	limited := 0
	for _, rec := range r.settled(t) {
		for _, at := range rec.Attempts {
			if at.Upstream == "b" && at.Class == "local_limit" {
				limited++
			}
		}
	}
	if limited != n-3 {
		t.Errorf("%d local_limit skips of b; want %d", limited, n-3)
	}
}
