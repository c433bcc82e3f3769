package chain_test

import (
	"context"
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

	"github.com/detour-proxy/detour/internal/chain"
	"github.com/detour-proxy/detour/internal/detourtest"
	fv "github.com/detour-proxy/detour/internal/fakevendor"
	"github.com/detour-proxy/detour/internal/health"
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

func TestBreakerOpensSkipsAndRecovers(t *testing.T) {
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
	a := detourtest.NewVendor(t, rewrite.OpenAI, "a")
	b := detourtest.NewVendor(t, rewrite.OpenAI, "b")
	r, clk := newClockedRunner(t, "api.openai.com", openaiPolicy([]string{upstreamJSON("a", a, `, "timeouts": {"first_byte": "250ms"}`), upstreamJSON("b", b, "")}, `["a","b"]`,
		`, "breaker": {"consecutive_failures": 2, "consecutive_timeouts": 4, "min_requests": 20}`))
	// first_byte is wall-clock time: it must be long enough that a prompt
	// 400 from the fake is never late on a loaded machine (30ms was, and
	// the stray timeout opened the breaker one request early).

	// Client errors never count, however many.
	a.SetDefault(fv.Fault{Kind: fv.Status, Status: 400, Class: fv.ClassInvalidRequest})
	for range 5 {
		io.Copy(io.Discard, post(t, r.srv.URL+"/v1/chat/completions", chatBody).Body)
	}
	if st := r.health.Breaker("a", clk.Now()); st.State != health.BreakerClosed || st.ConsecutiveFailures != 0 || st.ConsecutiveTimeouts != 0 {
		t.Fatalf("after 400s: %+v; want closed, nothing counted", st)
	}

	// Three slow answers are soft failures: below their own threshold,
	// though above the hard one.
	a.SetDefault(fv.Fault{Kind: fv.Hang, Delay: time.Second})
	for range 3 {
		io.Copy(io.Discard, post(t, r.srv.URL+"/v1/chat/completions", chatBody).Body)
	}
	st := r.health.Breaker("a", clk.Now())
	if st.State != health.BreakerClosed || st.ConsecutiveTimeouts != 3 {
		t.Fatalf("after 3 timeouts: %+v; want closed with 3 timeouts counted", st)
	}
	io.Copy(io.Discard, post(t, r.srv.URL+"/v1/chat/completions", chatBody).Body)
	if st := r.health.Breaker("a", clk.Now()); st.State != health.BreakerOpen {
		t.Errorf("after 4 timeouts: %v; want open", st.State)
	}
}

func TestBreakerNeverSkipsTheLastUpstream(t *testing.T) {
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

func TestConcurrencyLimitSkipsToTheNextUpstream(t *testing.T) {
	a := detourtest.NewVendor(t, rewrite.OpenAI, "a")
	b := detourtest.NewVendor(t, rewrite.OpenAI, "b")
	r := newRunner(t, "api.openai.com", openaiPolicy([]string{upstreamJSON("a", a, `, "limits": {"concurrency": 1}`), upstreamJSON("b", b, "")}, `["a","b"]`, ""))
	a.Script(fv.Fault{Kind: fv.SlowFirstByte, Delay: 300 * time.Millisecond})

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
	for a.InFlight() == 0 {
		time.Sleep(time.Millisecond)
	}
	if got := openaiText(t, post(t, r.srv.URL+"/v1/chat/completions", chatBody)); got != "Hello from b." {
		t.Errorf("second answer %q; want b's (a is at its concurrency limit)", got)
	}
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
	if a.Calls() != 1 {
		t.Errorf("a called %d times; want 1", a.Calls())
	}
}

func TestRPMLimitOnTheOnlyUpstreamAnswers429(t *testing.T) {
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
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			a := detourtest.NewVendor(t, rewrite.OpenAI, "a")
			b := detourtest.NewVendor(t, rewrite.OpenAI, "b")
			r := newRunner(t, "api.openai.com", openaiPolicy([]string{upstreamJSON("a", a, ""), upstreamJSON("b", b, "")}, `["a","b"]`, `, "hedge_after": "50ms"`))
			a.Script(fv.Fault{Kind: fv.Hang, Delay: 10 * time.Second})

			body := chatBody
			if stream {
				body = streamBody
			}
			resp := post(t, r.srv.URL+"/v1/chat/completions", body)
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
	}
}

func TestHedgeNotStartedWhenFirstAnswersInTime(t *testing.T) {
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

func TestTiersPickTheChain(t *testing.T) {
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
			t.Errorf("%q (header %q): tier %q answered %q; want %s", c.prompt, c.header, rec.Tier, got, c.want)
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

func TestHedgedClientGoneCancelsEveryLane(t *testing.T) {
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
	for b.InFlight() == 0 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	<-done
	rec := r.record(t)
	if rec.Status != 499 || trail(rec) != "a:client_gone b:client_gone" && trail(rec) != "b:client_gone a:client_gone" {
		t.Errorf("status %d attempts %q; want 499 and both lanes client_gone", rec.Status, trail(rec))
	}
	for a.InFlight()+b.InFlight() != 0 {
		time.Sleep(time.Millisecond)
	}
	for _, n := range []string{"a", "b"} {
		if st := r.health.Breaker(n, time.Now()); st.ConsecutiveTimeouts+st.ConsecutiveFailures != 0 {
			t.Errorf("%s: the app going away counted against the breaker: %+v", n, st)
		}
	}
}

func TestEveryUpstreamOutOfQuotaSaysQuota(t *testing.T) {
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

// TestFailoverStormDoesNotFlattenTheBackup: the primary is dead and ten
// requests arrive at once; the backup, limited to 3 in flight, never sees
// more than 3 — the rest go on to the static last resort at once instead of
// queueing.
func TestFailoverStormDoesNotFlattenTheBackup(t *testing.T) {
	a := detourtest.NewVendor(t, rewrite.OpenAI, "a")
	a.SetDefault(fv.Fault{Kind: fv.Status, Status: 503})
	release := make(chan struct{})
	var inFlight, peak atomic.Int64
	backup := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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
	deadline := time.Now().Add(5 * time.Second)
	for inFlight.Load() < 3 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
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
