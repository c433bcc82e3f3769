package chain_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/detour-proxy/detour/internal/chain"
	fv "github.com/detour-proxy/detour/internal/fakevendor"
	"github.com/detour-proxy/detour/internal/health"
	"github.com/detour-proxy/detour/internal/testsupport"
	"github.com/detour-proxy/detour/policy"
)

// A dollar a token, in and out: an answer's cost is its token count.
const dollarPerToken = `, "prices": {"gpt-4o*": {"input": 1000000, "output": 1000000}}`

// budgetRunner is a runner over in-memory fakes "primary" (priced) and
// "backup", on a virtual clock, with the canonical log kept and a policy
// that swap replaces (a reload: the registry stays).
type budgetRunner struct {
	*runner
	clk     *clock
	vendors memVendors
	logs    *testsupport.SyncBuffer
	pol     atomic.Pointer[policy.Compiled]
}

func budgetPolicyJSON(budgets string) string {
	return `{"upstreams": {` + memUpstream("primary", dollarPerToken) + `,` + memUpstream("backup", "") + `},
  "routes": [{"name": "chat", "match": {"host": "api.openai.com", "path": "/v1/chat/completions"}, "chain": ["primary", "backup"]}],
  "budgets": [` + budgets + `]}`
}

func newBudgetRunner(t *testing.T, budgets string) *budgetRunner {
	t.Helper()
	b := &budgetRunner{clk: newClock(), vendors: newMemVendors("primary", "backup"), logs: &testsupport.SyncBuffer{}}
	b.runner = newMemVendorRunner(t, b.vendors, budgetPolicyJSON(budgets), func(cr *chain.Runner) {
		cr.Now, cr.Sleep = b.clk.Now, b.clk.Sleep
		cr.Log = zerolog.New(b.logs)
		b.pol.Store(cr.Policy())
		cr.Policy = b.pol.Load
	})
	return b
}

// swap compiles policyJSON and makes it the policy in effect.
func (b *budgetRunner) swap(t *testing.T, policyJSON string) {
	t.Helper()
	c, err := policy.Compile("policy.json", []byte(policyJSON), policy.Options{BaseDir: t.TempDir(), DefaultCADir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	b.pol.Store(c)
}

// do sends one request, reads the answer whole and returns it with its
// record.
func (b *budgetRunner) do(t *testing.T, body string, header ...string) (*http.Response, []byte, *chain.Record) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, "http://api.openai.com/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer sk-app")
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp := b.serveMem(req)
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, data, b.record(t)
}

// messages counts the log lines with this message.
func (b *budgetRunner) messages(t *testing.T, msg string) int {
	n := 0
	for _, l := range logLines(t, b.logs) {
		if l["message"] == msg {
			n++
		}
	}
	return n
}

func TestCostUSDIsTheUsageAtTheUpstreamsPrice(t *testing.T) {
	t.Parallel()
	b := newBudgetRunner(t, "")
	_, _, rec := b.do(t, chatBody)
	if rec.AnsweredBy != "primary" || rec.Usage.Input == 0 || rec.Usage.Output == 0 {
		t.Fatalf("answered by %q, usage %+v", rec.AnsweredBy, rec.Usage)
	}
	if want := float64(rec.Usage.Input + rec.Usage.Output); rec.CostUSD != want {
		t.Errorf("cost_usd = %g; want %g (a dollar a token)", rec.CostUSD, want)
	}
	// The backup has no prices: its answers cost nothing.
	b.vendors["primary"].Script(fv.Fault{Kind: fv.Status, Status: 503, Class: fv.ClassOverloaded})
	_, _, rec = b.do(t, chatBody)
	if rec.AnsweredBy != "backup" || rec.CostUSD != 0 {
		t.Errorf("backup answer: by %q cost %g; want backup, 0", rec.AnsweredBy, rec.CostUSD)
	}
	var line map[string]any
	for _, l := range logLines(t, b.logs) {
		if l["message"] == "request" {
			line = l
			break
		}
	}
	if c, ok := line["cost_usd"].(float64); !ok || c <= 0 {
		t.Errorf("the first log line's cost_usd = %v; want the primary's cost", line["cost_usd"])
	}
	if line["priority"] != "normal" {
		t.Errorf("log line priority = %v; want normal", line["priority"])
	}
}

// A spent daily budget skips its upstream (class budget_exhausted: no
// breaker, no cooldown) until midnight in its time zone — 08:00 UTC for
// Los Angeles in winter, not 00:00 UTC — and the backup answers meanwhile.
func TestSpentBudgetSkipsUntilMidnightInItsTimeZone(t *testing.T) {
	t.Parallel()
	b := newBudgetRunner(t, `{"name": "primary-daily", "upstream": "primary", "daily": 1, "time_zone": "America/Los_Angeles"}`)
	// The clock starts at 12:00 UTC on Nov 30: 04:00 in Los Angeles.
	_, _, rec := b.do(t, chatBody)
	if rec.AnsweredBy != "primary" || rec.CostUSD < 1 {
		t.Fatalf("first answer by %q cost %g; want primary, over the $1 budget", rec.AnsweredBy, rec.CostUSD)
	}
	resp, _, rec := b.do(t, chatBody)
	if resp.StatusCode != 200 || rec.AnsweredBy != "backup" || trail(rec) != "primary:skipped:budget_exhausted backup:ok" {
		t.Fatalf("after the budget: %d by %q, %s; want the backup, primary skipped budget_exhausted", resp.StatusCode, rec.AnsweredBy, trail(rec))
	}
	if !strings.Contains(rec.Attempts[0].Reason, "budget primary-daily spent") || !strings.Contains(rec.Attempts[0].Reason, "until 2026-12-01T08:00:00Z") {
		t.Errorf("skip reason %q", rec.Attempts[0].Reason)
	}
	if n := b.vendors["primary"].Calls(); n != 1 {
		t.Errorf("primary called %d times; want 1", n)
	}
	if br := b.health.Breaker("primary", b.clk.Now()); br.State != health.BreakerClosed || br.WindowCount != 1 || br.WindowFailures != 0 {
		t.Errorf("breaker %+v; want closed with the one success only", br)
	}
	if _, cooling := b.health.CoolingDown("primary", b.clk.Now()); cooling {
		t.Error("a spent budget started a cooldown")
	}
	// Past midnight UTC it is still Nov 30 in Los Angeles.
	b.clk.Advance(12*time.Hour + 30*time.Minute) // 00:30 UTC, Dec 1
	if _, _, rec = b.do(t, chatBody); rec.AnsweredBy != "backup" {
		t.Errorf("at 00:30 UTC answered by %q; want backup (LA's day is not over)", rec.AnsweredBy)
	}
	b.clk.Advance(7*time.Hour + 29*time.Minute) // 07:59 UTC
	if _, _, rec = b.do(t, chatBody); rec.AnsweredBy != "backup" {
		t.Errorf("at 07:59 UTC answered by %q; want backup", rec.AnsweredBy)
	}
	b.clk.Advance(time.Minute) // 08:00 UTC: midnight in Los Angeles
	if _, _, rec = b.do(t, chatBody); rec.AnsweredBy != "primary" {
		t.Errorf("at 08:00 UTC answered by %q; want primary (a new day)", rec.AnsweredBy)
	}
}

// A monthly budget resets on the 1st, and spend survives a reload that
// keeps the budget's name.
func TestMonthlyBudgetSurvivesReloadAndResetsOnTheFirst(t *testing.T) {
	t.Parallel()
	budget := `{"name": "m", "upstream": "primary", "monthly": 1}`
	b := newBudgetRunner(t, budget)
	b.do(t, chatBody)
	// A reload that changes something else (the backup's models).
	b.swap(t, `{"upstreams": {`+memUpstream("primary", dollarPerToken)+`,`+memUpstream("backup", `, "models": {"*": "gpt-4o"}`)+`},
  "routes": [{"name": "chat", "match": {"host": "api.openai.com", "path": "/v1/chat/completions"}, "chain": ["primary", "backup"]}],
  "budgets": [`+budget+`]}`)
	if _, _, rec := b.do(t, chatBody); rec.AnsweredBy != "backup" {
		t.Fatalf("after the reload answered by %q; want backup (the spend survived)", rec.AnsweredBy)
	}
	b.clk.Advance(11*time.Hour + 59*time.Minute) // 23:59 UTC on Nov 30
	if _, _, rec := b.do(t, chatBody); rec.AnsweredBy != "backup" {
		t.Errorf("on Nov 30 answered by %q; want backup", rec.AnsweredBy)
	}
	b.clk.Advance(time.Minute) // Dec 1
	if _, _, rec := b.do(t, chatBody); rec.AnsweredBy != "primary" {
		t.Errorf("on Dec 1 answered by %q; want primary (a new month)", rec.AnsweredBy)
	}
}

// warn_at is logged once per period, and so is the budget being spent.
func TestBudgetWarnsOncePerPeriod(t *testing.T) {
	t.Parallel()
	b := newBudgetRunner(t, `{"name": "w", "upstream": "primary", "daily": 1000, "warn_at": 0.8}`)
	_, _, rec := b.do(t, chatBody)
	cost := rec.CostUSD
	if cost <= 0 || cost > 50 {
		t.Fatalf("an answer costs %g; the test wants a few dollars", cost)
	}
	if n := b.messages(t, "budget warning"); n != 0 {
		t.Fatalf("%d warnings at $%g of $1000", n, cost)
	}
	// Just under 80 %: the next answer crosses it.
	key := "w/daily/2026-11-30"
	b.health.AddSpend(key, 800-cost-cost/2, time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	for range 3 {
		b.do(t, chatBody)
	}
	if n := b.messages(t, "budget warning"); n != 1 {
		t.Errorf("%d warnings after crossing 80 %% and two more answers; want 1", n)
	}
	var warn map[string]any
	for _, l := range logLines(t, b.logs) {
		if l["message"] == "budget warning" {
			warn = l
		}
	}
	if warn["budget"] != "w" || warn["period"] != "daily" || warn["level"] != "warn" || warn["limit_usd"] != 1000.0 || warn["resets_at"] != "2026-12-01T00:00:00Z" {
		t.Errorf("warning line %v", warn)
	}
	// Spend it: "budget spent" once, however many answers land after.
	b.health.AddSpend(key, 200, time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	// Spent now, but only an answer notices: in flight ones are counted.
	if _, _, rec := b.do(t, chatBody); rec.AnsweredBy != "backup" {
		t.Errorf("answered by %q once spent; want backup", rec.AnsweredBy)
	}
	if n := b.messages(t, "budget spent"); n != 0 {
		t.Errorf("%d spent lines without a priced answer; want 0 (the backup's cost nothing)", n)
	}
	// The next day warns again.
	b.clk.Advance(12 * time.Hour)
	b.health.AddSpend("w/daily/2026-12-01", 900, time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC))
	b.do(t, chatBody)
	if n := b.messages(t, "budget warning"); n != 2 {
		t.Errorf("%d warnings after the next day's crossing; want 2", n)
	}
}

// A stream admitted under the budget completes even when its cost crosses
// it (its answer was already the app's), is counted at its end, and the
// next request skips the upstream.
func TestStreamCrossingTheBudgetCompletesAndTheNextIsSkipped(t *testing.T) {
	t.Parallel()
	b := newBudgetRunner(t, `{"name": "s", "upstream": "primary", "daily": 100}`)
	b.health.AddSpend("s/daily/2026-11-30", 99, time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	resp, body, rec := b.do(t, streamBody)
	if resp.StatusCode != 200 || rec.AnsweredBy != "primary" || !strings.Contains(string(body), "data: [DONE]") {
		t.Fatalf("stream: %d by %q, body %q; want primary's whole stream", resp.StatusCode, rec.AnsweredBy, body)
	}
	if rec.Usage.Input == 0 || rec.CostUSD != float64(rec.Usage.Input+rec.Usage.Output) {
		t.Fatalf("stream usage %+v cost %g: the usage chunk at its end was not priced", rec.Usage, rec.CostUSD)
	}
	if got := b.health.Spent("s/daily/2026-11-30"); got != 99+rec.CostUSD {
		t.Errorf("spent %g; want %g", got, 99+rec.CostUSD)
	}
	if n := b.messages(t, "budget spent"); n != 1 {
		t.Errorf("%d budget spent lines; want 1", n)
	}
	if _, _, rec = b.do(t, streamBody); rec.AnsweredBy != "backup" || rec.Attempts[0].Class != string(policy.ClassBudgetExhausted) {
		t.Errorf("next stream: by %q, %s; want the backup with primary skipped", rec.AnsweredBy, trail(rec))
	}
}

// A route's budget, spent, skips every upstream of the route; the app
// hears its vendor's out-of-quota error with retry-after until the reset.
func TestSpentRouteBudgetAnswersQuotaErrorWithRetryAfter(t *testing.T) {
	t.Parallel()
	b := newBudgetRunner(t, `{"name": "chat-daily", "route": "chat", "daily": 1}`)
	b.do(t, chatBody)
	resp, body, rec := b.do(t, chatBody)
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("status %d, body %s; want 429", resp.StatusCode, body)
	}
	var e struct {
		Error struct{ Type, Code, Message string }
	}
	if err := json.Unmarshal(body, &e); err != nil || e.Error.Code != "insufficient_quota" || !strings.Contains(e.Error.Message, "budget") {
		t.Errorf("body %s; want OpenAI's insufficient_quota naming the budget", body)
	}
	// 12:00 UTC to midnight UTC.
	if ra := resp.Header.Get("Retry-After"); ra != "43200" {
		t.Errorf("retry-after %q; want 43200 (until midnight)", ra)
	}
	if trail(rec) != "primary:skipped:budget_exhausted backup:skipped:budget_exhausted" || rec.Error != "every upstream's budget is spent" {
		t.Errorf("trail %s, error %q", trail(rec), rec.Error)
	}
	if n := b.vendors["primary"].Calls() + b.vendors["backup"].Calls(); n != 1 {
		t.Errorf("%d upstream calls; want the first request's only", n)
	}
}

// x-detour-priority is read, logged, and never reaches the upstream.
func TestPriorityHeaderIsReadAndNotForwarded(t *testing.T) {
	t.Parallel()
	b := newBudgetRunner(t, "")
	_, _, rec := b.do(t, chatBody, chain.HeaderPriority, "HIGH")
	if rec.Priority != "high" {
		t.Errorf("priority %q; want high", rec.Priority)
	}
	_, _, rec = b.do(t, chatBody, chain.HeaderPriority, "urgent")
	if rec.Priority != "normal" || len(rec.Reasons) != 1 || !strings.Contains(rec.Reasons[0], "x-detour-priority names no priority") {
		t.Errorf("unknown priority: %q, reasons %q", rec.Priority, rec.Reasons)
	}
	for _, r := range b.vendors["primary"].Requests() {
		for k := range r.Header {
			if strings.EqualFold(k, chain.HeaderPriority) {
				t.Errorf("the upstream received %s", k)
			}
		}
	}
}

// Cached prompt tokens, where the vendor reports them, cost cached_input.
func TestCachedInputIsChargedAtItsOwnPrice(t *testing.T) {
	t.Parallel()
	body := `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-4o-2024-08-06","choices":[{"index":0,"message":{"role":"assistant","content":"Hi"},"finish_reason":"stop"}],` +
		`"usage":{"prompt_tokens":1000000,"completion_tokens":100000,"total_tokens":1100000,"prompt_tokens_details":{"cached_tokens":400000}}}`
	r := newMemRunner(t, "api.openai.com", `{"upstreams": {`+memUpstream("o", `, "prices": {"gpt-4o*": {"input": 2.5, "output": 10, "cached_input": 1.25}}`)+`},
  "routes": [{"name": "chat", "match": {"host": "api.openai.com", "path": "/v1/chat/completions"}, "chain": ["o"]}]}`, func(cr *chain.Runner) {
		cr.Transports = &chain.Transports{Override: rtFunc(func(req *http.Request) (*http.Response, error) { return jsonResponse(req, 200, body), nil })}
	})
	resp := r.post(t, "/v1/chat/completions", chatBody)
	io.Copy(io.Discard, resp.Body)
	rec := r.record(t)
	want := 0.6*2.5 + 0.4*1.25 + 0.1*10
	if rec.CachedInput != 400000 || rec.CostUSD < want-1e-9 || rec.CostUSD > want+1e-9 {
		t.Errorf("cached %d cost %g; want 400000, %g", rec.CachedInput, rec.CostUSD, want)
	}
}
