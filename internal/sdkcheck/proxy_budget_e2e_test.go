package sdkcheck

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/detour-proxy/detour/internal/admin"
	"github.com/detour-proxy/detour/internal/chain"
	"github.com/detour-proxy/detour/internal/detourtest"
	fv "github.com/detour-proxy/detour/internal/fakevendor"
	"github.com/detour-proxy/detour/internal/testsupport"
	"github.com/detour-proxy/detour/rewrite"
)

// adminGet reads an admin endpoint from loopback (no token needed).
func adminGet(t *testing.T, h *detourtest.Harness, path string) []byte {
	t.Helper()
	resp, err := http.Get(h.AdminURL.String() + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
	}
	return b
}

// A budget at 100 % takes its upstream out of the chain: the official SDK
// keeps getting answers, from the backup; the primary is not called again;
// the log says budget_exhausted; its breaker has counted nothing against
// it; /status and /metrics show the budget spent.
func TestSpentBudgetSkipsItsUpstreamAndTheAppStillGetsAnswers(t *testing.T) {
	t.Parallel()
	primary := detourtest.NewVendor(t, rewrite.OpenAI, "primary")
	backup := detourtest.NewVendor(t, rewrite.OpenAI, "backup")
	pol := detourtest.TwoUpstreamsWith(t, rewrite.OpenAI, primary, backup,
		`, "prices": {"gpt-4o*": {"input": 2.5, "output": 10}, "*": {"input": 1000000, "output": 1000000}}`,
		`, "budgets": [{"name": "primary-daily", "upstream": "primary", "daily": 1, "warn_at": 0.5}]`)
	h := detourtest.Start(t, pol)
	client := openaiThrough(h)

	// The first answer costs a dollar a token (the "*" price: the model is
	// "gpt-4.1"), far over the $1 budget; the rest go to the backup.
	params := chatParams()
	params.Model = "gpt-4.1"
	const n = 4
	for i := range n {
		got, err := client.Chat.Completions.New(detourtest.TestContext(t), params)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		want := "Hello from backup."
		if i == 0 {
			want = "Hello from primary."
		}
		if text := got.Choices[0].Message.Content; text != want {
			t.Errorf("request %d answered %q; want %q", i, text, want)
		}
	}
	if p, b := primary.Calls(), backup.Calls(); p != 1 || b != n-1 {
		t.Errorf("calls: primary %d, backup %d; want 1, %d", p, b, n-1)
	}
	recs := h.WaitRecords(t, n)
	if recs[0].CostUSD <= 1 {
		t.Errorf("the first answer cost %g; want over the budget", recs[0].CostUSD)
	}
	skipped := 0
	for _, l := range h.LogLines("request") {
		atts, _ := l["attempts"].([]any)
		if len(atts) > 0 {
			if a, _ := atts[0].(map[string]any); a["class"] == "budget_exhausted" && a["outcome"] == "skipped" && a["upstream"] == "primary" {
				skipped++
			}
		}
	}
	if skipped != n-1 {
		t.Errorf("%d log lines with primary skipped budget_exhausted; want %d\n%s", skipped, n-1, h.Log())
	}
	if len(h.LogLines("budget spent")) != 1 {
		t.Errorf("want one \"budget spent\" line\n%s", h.Log())
	}

	var st admin.StatusJSON
	if err := json.Unmarshal(adminGet(t, h, "/status"), &st); err != nil {
		t.Fatal(err)
	}
	br := st.Upstreams["primary"].Breaker
	if br == nil || br.State != "closed" || br.WindowFailures != 0 || br.ConsecutiveFailures != 0 || br.Opens != 0 {
		t.Errorf("primary's breaker %+v; want closed with no failures", br)
	}
	if cd := st.Upstreams["primary"].CooldownUntil; cd != nil {
		t.Errorf("primary cooling down until %s; a budget is no cooldown", cd)
	}
	if len(st.Budgets) != 1 || st.Budgets[0].Daily == nil || !st.Budgets[0].Daily.Exhausted ||
		st.Budgets[0].Daily.SpentUSD != recs[0].CostUSD || st.Budgets[0].Daily.LimitUSD != 1 || st.Budgets[0].Monthly != nil {
		t.Errorf("/status budgets = %+v", st.Budgets)
	}
	if d := st.Budgets[0].Daily; d != nil && (d.ResetsAt.Hour() != 0 || !d.ResetsAt.After(time.Now())) {
		t.Errorf("resets_at %s; want the next midnight UTC", d.ResetsAt)
	}
	metrics := string(adminGet(t, h, "/metrics"))
	for _, want := range []string{`detour_budget_used_ratio{budget="primary-daily",period="daily"}`, `detour_cost_usd_total{upstream="primary"}`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// hedge_after_by_priority {"high": …}: a slow primary is hedged for a
// high-priority request, never for a low one.
func TestOnlyHighPriorityRequestsHedge(t *testing.T) {
	t.Parallel()
	primary := detourtest.NewVendor(t, rewrite.OpenAI, "primary")
	backup := detourtest.NewVendor(t, rewrite.OpenAI, "backup")
	h := detourtest.Start(t, detourtest.TwoUpstreams(t, rewrite.OpenAI, primary, backup, `, "hedge_after_by_priority": {"high": "50ms"}`))
	client := openaiThrough(h)

	// High: the primary hangs; the hedge to the backup answers.
	primary.Script(fv.Fault{Kind: fv.Hang})
	got, err := client.Chat.Completions.New(detourtest.TestContext(t), chatParams(), option.WithHeader(chain.HeaderPriority, "high"))
	if err != nil {
		t.Fatal(err)
	}
	if text := got.Choices[0].Message.Content; text != "Hello from backup." {
		t.Errorf("high: %q; want the hedge's answer", text)
	}
	rec := h.WaitRecord(t, h.LastRequestID(t))
	if rec.Priority != "high" || detourtest.Outcomes(rec) != "primary:hedge_lost,backup:ok" || !rec.Attempts[1].Hedge {
		t.Errorf("high: priority %q, %s; want primary hedge_lost, backup ok (hedge)", rec.Priority, detourtest.Outcomes(rec))
	}

	// Low: the primary is slow to answer but answers; nothing is hedged.
	primary.Script(fv.Fault{Kind: fv.SlowFirstByte, Delay: 300 * time.Millisecond})
	got, err = client.Chat.Completions.New(detourtest.TestContext(t), chatParams(), option.WithHeader(chain.HeaderPriority, "low"))
	if err != nil {
		t.Fatal(err)
	}
	if text := got.Choices[0].Message.Content; text != "Hello from primary." {
		t.Errorf("low: %q; want the primary's answer", text)
	}
	rec = h.WaitRecord(t, h.LastRequestID(t))
	if rec.Priority != "low" || detourtest.Outcomes(rec) != "primary:ok" {
		t.Errorf("low: priority %q, %s; want primary ok alone", rec.Priority, detourtest.Outcomes(rec))
	}
	if n := backup.Calls(); n != 1 {
		t.Errorf("backup called %d times; want once (the high request's hedge)", n)
	}
	for _, r := range append(primary.Requests(), backup.Requests()...) {
		if r.Header.Get(chain.HeaderPriority) != "" {
			t.Errorf("an upstream received %s", chain.HeaderPriority)
		}
	}
}

// limits.shed_low_at: with half of the primary's concurrency in use, a
// low-priority request is refused 429 with retry-after in OpenAI's shape
// (the SDK's RateLimitError), and a high-priority one still passes.
func TestLowPriorityIsShedBeforeHigh(t *testing.T) {
	t.Parallel()
	primary := detourtest.NewVendor(t, rewrite.OpenAI, "primary")
	pol := `{
  "upstreams": {"primary": {"shape": "openai", "base_url": "` + primary.BaseURL() + `", "ca_file": "` + primary.CAFile + `", "auth": {"from": "client"},
                            "limits": {"concurrency": 2, "shed_low_at": 0.5}}},
  "routes": [{"name": "r", "match": {"host": "api.openai.com", "path": "/v1/chat/completions"}, "chain": ["primary"]}]
}`
	h := detourtest.Start(t, pol)
	client := openaiThrough(h)

	// One request holds a slot: the primary hangs until it is cancelled.
	primary.Script(fv.Fault{Kind: fv.Hang})
	holdCtx, release := context.WithCancel(detourtest.TestContext(t))
	held := make(chan error, 1)
	go func() {
		_, err := client.Chat.Completions.New(holdCtx, chatParams(), option.WithHeader(chain.HeaderPriority, "high"))
		held <- err
	}()
	t.Cleanup(func() { release(); <-held })
	testsupport.Eventually(t, 10*time.Second, "the holding request reaches the primary", func() bool { return primary.InFlight() == 1 })

	var httpResp *http.Response
	_, err := client.Chat.Completions.New(detourtest.TestContext(t), chatParams(), option.WithHeader(chain.HeaderPriority, "low"), option.WithResponseInto(&httpResp))
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("low: err %v; want the SDK's 429", err)
	}
	if ra := apiErr.Response.Header.Get("Retry-After"); ra == "" {
		t.Error("low: 429 without retry-after")
	}
	if apiErr.Type != "rate_limit_error" && apiErr.Code != "rate_limit_exceeded" {
		t.Errorf("low: error type %q code %q; want OpenAI's rate limit error", apiErr.Type, apiErr.Code)
	}
	rec := h.WaitRecord(t, h.LastRequestID(t))
	if detourtest.Outcomes(rec) != "primary:skipped:local_limit" || !strings.Contains(rec.Attempts[0].Reason, "low priority shed") {
		t.Errorf("low: %s (%q); want primary skipped, shed", detourtest.Outcomes(rec), rec.Attempts[0].Reason)
	}

	// High takes the second slot.
	got, err := client.Chat.Completions.New(detourtest.TestContext(t), chatParams(), option.WithHeader(chain.HeaderPriority, "high"))
	if err != nil {
		t.Fatalf("high while one is in flight: %v", err)
	}
	if text := got.Choices[0].Message.Content; text != "Hello from primary." {
		t.Errorf("high: %q", text)
	}
	if n := primary.Calls(); n != 2 {
		t.Errorf("primary called %d times; want 2 (the holder and high; low never reached it)", n)
	}
}
