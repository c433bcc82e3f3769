package sdkcheck

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/detour-proxy/detour/internal/chain"
	"github.com/detour-proxy/detour/internal/detourtest"
	fv "github.com/detour-proxy/detour/internal/fakevendor"
	"github.com/detour-proxy/detour/internal/testsupport"
	"github.com/detour-proxy/detour/rewrite"
)

// appAnthropicKey is the key the tests' Anthropic apps send
// (detourtest.AppOpenAIKey the OpenAI apps').
const appAnthropicKey = "sk-ant-app-SECRET"

// openaiThrough is openai-go as an app behind detour (h's proxy and CA),
// calling api.openai.com with the app's key and no retries.
func openaiThrough(h *detourtest.Harness) *openai.Client {
	c := openai.NewClient(
		option.WithBaseURL("https://api.openai.com/v1/"),
		option.WithAPIKey(detourtest.AppOpenAIKey),
		option.WithHTTPClient(h.Client()),
		option.WithMaxRetries(0),
	)
	return &c
}

// anthropicThrough is anthropic-sdk-go as openaiThrough is openai-go.
func anthropicThrough(h *detourtest.Harness) *anthropic.Client {
	c := anthropic.NewClient(
		aoption.WithBaseURL("https://api.anthropic.com/"),
		aoption.WithAPIKey(appAnthropicKey),
		aoption.WithHTTPClient(h.Client()),
		aoption.WithMaxRetries(0),
	)
	return &c
}

func chatParams() openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{
		Model:    "gpt-4o",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Say hello.")},
	}
}

func messageParams() anthropic.MessageNewParams {
	return anthropic.MessageNewParams{
		Model:     "claude-sonnet-4-5",
		MaxTokens: 64,
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Say hello."))},
	}
}

func TestQuotaExhaustedFailsOverAndCoolsDown(t *testing.T) {
	t.Parallel()
	primary := detourtest.NewVendor(t, rewrite.OpenAI, "primary")
	backup := detourtest.NewVendor(t, rewrite.OpenAI, "backup")
	h := detourtest.Start(t, detourtest.TwoUpstreams(t, rewrite.OpenAI, primary, backup, ""))
	client := openaiThrough(h)
	primary.Script(fv.Fault{Kind: fv.Status, Status: 429, Class: fv.ClassInsufficientQuota})

	var httpResp *http.Response
	got, err := client.Chat.Completions.New(detourtest.TestContext(t), chatParams(), option.WithResponseInto(&httpResp))
	if err != nil {
		t.Fatalf("chat completion through detour: %v", err)
	}
	if text := got.Choices[0].Message.Content; text != "Hello from backup." {
		t.Fatalf("answer = %q; want the backup's", text)
	}
	if by := httpResp.Header.Get(chain.HeaderAnsweredBy); by != "backup" {
		t.Errorf("%s = %q; want backup", chain.HeaderAnsweredBy, by)
	}
	if n := httpResp.Header.Get(chain.HeaderAttempts); n != "2" {
		t.Errorf("%s = %q; want 2", chain.HeaderAttempts, n)
	}
	if httpResp.Header.Get(chain.HeaderRequestID) == "" {
		t.Errorf("no %s header", chain.HeaderRequestID)
	}

	// During the cooldown the primary gets no further call.
	for i := 0; i < 3; i++ {
		if _, err := client.Chat.Completions.New(detourtest.TestContext(t), chatParams()); err != nil {
			t.Fatalf("call %d during cooldown: %v", i+2, err)
		}
	}
	if primary.Calls() != 1 || backup.Calls() != 4 {
		t.Errorf("calls: primary %d, backup %d; want 1 and 4 (primary cooling down)", primary.Calls(), backup.Calls())
	}
	// By request id: records and log lines are written as requests end,
	// which need not be the order they were sent in.
	ids := h.RequestIDs()
	if len(ids) != 4 {
		t.Fatalf("%d answers carried a request id; want 4", len(ids))
	}
	if got, want := detourtest.Outcomes(h.WaitRecord(t, ids[0])), "primary:fallback:quota_exhausted,backup:ok"; got != want {
		t.Errorf("first request attempts = %s; want %s", got, want)
	}
	if got := h.WaitRecord(t, ids[1]).Attempts[0]; got.Outcome != chain.OutcomeSkipped || !strings.Contains(got.Reason, "cooling down until") {
		t.Errorf("second request's first attempt = %+v; want skipped, cooling down", got)
	}
	h.WaitRecords(t, 4)
	var first map[string]any
	for _, l := range h.LogLines("request") {
		if l["id"] == ids[0] {
			first = l
		}
	}
	if first == nil {
		t.Fatalf("no request log line with id %s:\n%s", ids[0], h.Log())
	}
	for _, field := range []string{"id", "route", "tier", "reasons", "stream", "model", "attempts", "answered_by", "error", "ttfb_ms", "total_ms", "usage", "cache"} {
		if _, ok := first[field]; !ok {
			t.Errorf("log line lacks field %q: %v", field, first)
		}
	}
	if first["answered_by"] != "backup" || first["model"] != "gpt-4o" || first["route"] != "r" {
		t.Errorf("log line = %v", first)
	}
	if u := first["usage"].(map[string]any); u["output"].(float64) <= 0 {
		t.Errorf("log usage = %v; want output tokens", u)
	}
}

func TestRateLimitFailsOverWithoutCooldown(t *testing.T) {
	t.Parallel()
	primary := detourtest.NewVendor(t, rewrite.OpenAI, "primary")
	backup := detourtest.NewVendor(t, rewrite.OpenAI, "backup")
	h := detourtest.Start(t, detourtest.TwoUpstreams(t, rewrite.OpenAI, primary, backup, ""))
	client := openaiThrough(h)
	primary.Script(fv.Fault{Kind: fv.Status, Status: 429, Class: fv.ClassRateLimit})

	got, err := client.Chat.Completions.New(detourtest.TestContext(t), chatParams())
	if err != nil {
		t.Fatal(err)
	}
	if text := got.Choices[0].Message.Content; text != "Hello from backup." {
		t.Fatalf("first answer = %q; want the backup's", text)
	}
	got, err = client.Chat.Completions.New(detourtest.TestContext(t), chatParams())
	if err != nil {
		t.Fatal(err)
	}
	if text := got.Choices[0].Message.Content; text != "Hello from primary." {
		t.Fatalf("second answer = %q; want the primary's (no cooldown after a rate limit)", text)
	}
	if primary.Calls() != 2 || backup.Calls() != 1 {
		t.Errorf("calls: primary %d, backup %d; want 2 and 1", primary.Calls(), backup.Calls())
	}
	if got, want := detourtest.Outcomes(h.WaitRecord(t, h.RequestIDs()[0])), "primary:fallback:rate_limited,backup:ok"; got != want {
		t.Errorf("attempts = %s; want %s", got, want)
	}
}

func TestStopClassesReachTheAppUnmasked(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		shape  rewrite.Shape
		status int
		class  string
	}{
		{"openai 400", rewrite.OpenAI, 400, fv.ClassInvalidRequest},
		{"openai 401", rewrite.OpenAI, 401, fv.ClassAuth},
		{"anthropic 400", rewrite.Anthropic, 400, fv.ClassInvalidRequest},
		{"anthropic 401", rewrite.Anthropic, 401, fv.ClassAuth},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			primary := detourtest.NewVendor(t, tc.shape, "primary")
			backup := detourtest.NewVendor(t, tc.shape, "backup")
			h := detourtest.Start(t, detourtest.TwoUpstreams(t, tc.shape, primary, backup, ""))
			primary.Script(fv.Fault{Kind: fv.Status, Status: tc.status, Class: tc.class})
			wantStatus, wantBody := fv.ErrorBody(tc.shape, fv.Fault{Kind: fv.Status, Status: tc.status, Class: tc.class}, "m", "id")
			want := rewrite.ParseError(wantBody)

			var err error
			if tc.shape == rewrite.OpenAI {
				_, err = openaiThrough(h).Chat.Completions.New(detourtest.TestContext(t), chatParams())
				var apiErr *openai.Error
				if !errors.As(err, &apiErr) {
					t.Fatalf("err = %v; want *openai.Error", err)
				}
				if apiErr.StatusCode != wantStatus || apiErr.Type != want.Type || apiErr.Code != want.Code || apiErr.Message != want.Message {
					t.Errorf("SDK error = %d %q %q %q; want %d %q %q %q", apiErr.StatusCode, apiErr.Type, apiErr.Code, apiErr.Message, wantStatus, want.Type, want.Code, want.Message)
				}
			} else {
				_, err = anthropicThrough(h).Messages.New(detourtest.TestContext(t), messageParams())
				var apiErr *anthropic.Error
				if !errors.As(err, &apiErr) {
					t.Fatalf("err = %v; want *anthropic.Error", err)
				}
				if apiErr.StatusCode != wantStatus || !strings.Contains(apiErr.Error(), want.Type) || !strings.Contains(apiErr.Error(), want.Message) {
					t.Errorf("SDK error = %v; want status %d, type %q, message %q", apiErr, wantStatus, want.Type, want.Message)
				}
			}
			if backup.Calls() != 0 {
				t.Errorf("backup called %d times after a %d; a stop class must not fall over", backup.Calls(), tc.status)
			}
			rec := h.WaitRecords(t, 1)[0]
			if got := detourtest.Outcomes(rec); !strings.HasPrefix(got, "primary:stop:") {
				t.Errorf("attempts = %s; want primary stop", got)
			}
		})
	}
}

func TestHangingUpstreamTimesOutAndBackupAnswers(t *testing.T) {
	t.Parallel()
	primary := detourtest.NewVendor(t, rewrite.OpenAI, "primary")
	backup := detourtest.NewVendor(t, rewrite.OpenAI, "backup")
	pol := detourtest.TwoUpstreamsWith(t, rewrite.OpenAI, primary, backup, `, "timeouts": {"first_byte": "300ms"}`, `, "deadline": "10s"`)
	h := detourtest.Start(t, pol)
	primary.Script(fv.Fault{Kind: fv.Hang, Delay: time.Minute})

	start := time.Now()
	got, err := openaiThrough(h).Chat.Completions.New(detourtest.TestContext(t), chatParams())
	if err != nil {
		t.Fatal(err)
	}
	if elapsed := time.Since(start); elapsed > 10*time.Second {
		t.Errorf("answer took %v; want it within the 10s deadline", elapsed)
	}
	if text := got.Choices[0].Message.Content; text != "Hello from backup." {
		t.Fatalf("answer = %q; want the backup's", text)
	}
	rec := h.WaitRecords(t, 1)[0]
	if a := rec.Attempts[0]; a.Class != "timeout" || !strings.Contains(a.Reason, "first_byte") {
		t.Errorf("primary attempt = %+v; want class timeout (first_byte)", a)
	}
}

func TestEarlyInStreamOverloadFailsOverAndStreamIsComplete(t *testing.T) {
	t.Parallel()
	primary := detourtest.NewVendor(t, rewrite.Anthropic, "primary")
	backup := detourtest.NewVendor(t, rewrite.Anthropic, "backup")
	h := detourtest.Start(t, detourtest.TwoUpstreams(t, rewrite.Anthropic, primary, backup, ""))
	primary.Script(fv.Fault{Kind: fv.StreamErrorEarly, Class: fv.ClassOverloaded})

	stream := anthropicThrough(h).Messages.NewStreaming(detourtest.TestContext(t), messageParams())
	var msg anthropic.Message
	var events []string
	for stream.Next() {
		ev := stream.Current()
		events = append(events, ev.Type)
		if err := msg.Accumulate(ev); err != nil {
			t.Fatalf("accumulate %s: %v", ev.Type, err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("stream error: %v (events %v)", err, events)
	}
	if len(msg.Content) != 1 || msg.Content[0].Text != "Hello from backup." {
		t.Fatalf("accumulated content = %+v; want the backup's text", msg.Content)
	}
	if msg.StopReason != "end_turn" || msg.Usage.OutputTokens == 0 {
		t.Errorf("stop_reason %q, output tokens %d; want end_turn and usage", msg.StopReason, msg.Usage.OutputTokens)
	}
	if events[0] != "message_start" || events[len(events)-1] != "message_stop" {
		t.Errorf("events = %v; want message_start first and message_stop last", events)
	}
	if got := strings.Count(strings.Join(events, ","), "message_start"); got != 1 {
		t.Errorf("%d message_start events; the held-back primary events must not leak", got)
	}
	if got, want := detourtest.Outcomes(h.WaitRecords(t, 1)[0]), "primary:fallback:overloaded,backup:ok"; got != want {
		t.Errorf("attempts = %s; want %s", got, want)
	}
}

func TestOpenAIStreamPassesThroughEventByEvent(t *testing.T) {
	t.Parallel()
	primary := detourtest.NewVendor(t, rewrite.OpenAI, "primary")
	backup := detourtest.NewVendor(t, rewrite.OpenAI, "backup")
	h := detourtest.Start(t, detourtest.TwoUpstreams(t, rewrite.OpenAI, primary, backup, ""))
	primary.Script(fv.Fault{Kind: fv.StreamErrorEarly, Class: fv.ClassServerError})

	p := chatParams()
	p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	stream := openaiThrough(h).Chat.Completions.NewStreaming(detourtest.TestContext(t), p)
	acc := openai.ChatCompletionAccumulator{}
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if got := acc.Choices[0].Message.Content; got != "Hello from backup." {
		t.Errorf("accumulated = %q", got)
	}
	if acc.Choices[0].FinishReason != "stop" || acc.Usage.CompletionTokens == 0 {
		t.Errorf("finish %q usage %+v", acc.Choices[0].FinishReason, acc.Usage)
	}
	rec := h.WaitRecords(t, 1)[0]
	if got, want := detourtest.Outcomes(rec), "primary:fallback:server_error,backup:ok"; got != want {
		t.Errorf("attempts = %s; want %s", got, want)
	}
	if rec.Usage.Output == 0 {
		t.Errorf("record usage = %+v; want output tokens from the stream", rec.Usage)
	}
}

func TestSecondUpstreamNeverSeesTheAppKey(t *testing.T) {
	t.Parallel()
	for _, shape := range []rewrite.Shape{rewrite.OpenAI, rewrite.Anthropic} {
		t.Run(string(shape), func(t *testing.T) {
			t.Parallel()
			primary := detourtest.NewVendor(t, shape, "primary")
			backup := detourtest.NewVendor(t, shape, "backup")
			h := detourtest.Start(t, detourtest.TwoUpstreams(t, shape, primary, backup, ""))
			primary.Script(fv.Fault{Kind: fv.Status, Status: 503, Class: fv.ClassOverloaded})
			var err error
			if shape == rewrite.OpenAI {
				_, err = openaiThrough(h).Chat.Completions.New(detourtest.TestContext(t), chatParams())
			} else {
				_, err = anthropicThrough(h).Messages.New(detourtest.TestContext(t), messageParams())
			}
			if err != nil {
				t.Fatal(err)
			}
			appKey := detourtest.AppOpenAIKey
			if shape == rewrite.Anthropic {
				appKey = appAnthropicKey
			}
			// The primary (auth from client) gets the app's key...
			if !strings.Contains(fmt.Sprint(primary.Requests()[0].Header), appKey) {
				t.Errorf("primary did not get the app's key: %v", primary.Requests()[0].Header)
			}
			// ...the backup gets its own, and the app's appears nowhere.
			req := backup.Requests()[0]
			everything := fmt.Sprint(req.Header) + req.Path + "?" + req.RawQuery + string(req.Body)
			if strings.Contains(everything, "SECRET") {
				t.Errorf("backup saw the app's key: %s", everything)
			}
			if shape == rewrite.OpenAI && req.Header.Get("Authorization") != "Bearer "+detourtest.BackupKey {
				t.Errorf("backup Authorization = %q", req.Header.Get("Authorization"))
			}
			if shape == rewrite.Anthropic && (req.Header.Get("X-Api-Key") != detourtest.BackupKey || req.Header.Get("Authorization") != "") {
				t.Errorf("backup x-api-key = %q, authorization = %q", req.Header.Get("X-Api-Key"), req.Header.Get("Authorization"))
			}
			if strings.Contains(h.Log(), "SECRET") || strings.Contains(h.Log(), detourtest.BackupKey) {
				t.Error("a key appears in detour's log")
			}
		})
	}
}

func TestHostNotInPolicyIsTunnelled(t *testing.T) {
	t.Parallel()
	primary := detourtest.NewVendor(t, rewrite.OpenAI, "primary")
	backup := detourtest.NewVendor(t, rewrite.OpenAI, "backup")
	// The other host is a loopback test server, which apps may not tunnel
	// to by default (egress.deny_cidrs): this policy allows loopback.
	h := detourtest.Start(t, detourtest.TwoUpstreams(t, rewrite.OpenAI, primary, backup, `, "egress": {"deny_cidrs": []}`))

	other := detourtest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "other host")
	}))
	defer other.Close()
	pool := x509.NewCertPool()
	pool.AddCert(other.Certificate())
	// The client trusts only the other server's own certificate: if detour
	// intercepted, the handshake would fail.
	client := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(h.ProxyURL), TLSClientConfig: &tls.Config{RootCAs: pool}}}
	resp, err := client.Get(other.URL)
	if err != nil {
		t.Fatalf("GET through the tunnel: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if string(body) != "other host" {
		t.Errorf("body = %q", body)
	}
	if got := resp.TLS.PeerCertificates[0]; !got.Equal(other.Certificate()) {
		t.Errorf("client saw certificate %q; want the server's own", got.Subject)
	}
	if len(h.Records()) != 0 {
		t.Errorf("a tunnelled request produced %d request records; detour must not see inside", len(h.Records()))
	}
}

func TestPolicyReloadChangesChainOrder(t *testing.T) {
	// Not parallel: it wants the change in effect within a second, which
	// the other tests' load would make a matter of luck.
	a := detourtest.NewVendor(t, rewrite.OpenAI, "a")
	b := detourtest.NewVendor(t, rewrite.OpenAI, "b")
	pol := func(chain string) string {
		return fmt.Sprintf(`{
  "upstreams": {
    "a": {"shape": "openai", "base_url": %q, "ca_file": %q, "auth": {"from": "client"}},
    "b": {"shape": "openai", "base_url": %q, "ca_file": %q, "auth": {"from": "client"}}
  },
  "routes": [{"name": "r", "match": {"host": "api.openai.com", "path": "/v1/chat/completions"}, "chain": %s}]
}`, a.BaseURL(), a.CAFile, b.BaseURL(), b.CAFile, chain)
	}
	h := detourtest.Start(t, pol(`["a", "b"]`))
	client := openaiThrough(h)
	answer := func() string {
		got, err := client.Chat.Completions.New(detourtest.TestContext(t), chatParams())
		if err != nil {
			t.Fatal(err)
		}
		return got.Choices[0].Message.Content
	}
	if got := answer(); got != "Hello from a." {
		t.Fatalf("before reload: %q", got)
	}

	h.WritePolicy(t, pol(`["b", "a"]`))
	written := time.Now()
	if !testsupport.Poll(time.Second, func() bool { return answer() == "Hello from b." }) {
		t.Fatal("policy change not in effect within a second")
	}
	t.Logf("new chain order in effect %v after the write", time.Since(written).Round(time.Millisecond))

	// A broken file changes nothing, and says why.
	h.WritePolicy(t, `{"upstreams": {}, "routes": [], "bogus": 1}`)
	if !testsupport.Poll(5*time.Second, func() bool { return strings.Contains(h.Log(), "policy reload refused") }) {
		t.Fatalf("the broken write was not refused within 5s:\n%s", h.Log())
	}
	if got := answer(); got != "Hello from b." {
		t.Errorf("after a broken write: %q; want the last good policy kept", got)
	}
	if !strings.Contains(h.Log(), "policy reload refused") || !strings.Contains(h.Log(), `unknown field \"bogus\"`) {
		t.Errorf("log does not explain the refused reload:\n%s", h.Log())
	}
}

func TestClientGoingAwayCancelsUpstreamAndCountsNoFailure(t *testing.T) {
	t.Parallel()
	primary := detourtest.NewVendor(t, rewrite.OpenAI, "primary")
	backup := detourtest.NewVendor(t, rewrite.OpenAI, "backup")
	h := detourtest.Start(t, detourtest.TwoUpstreams(t, rewrite.OpenAI, primary, backup, ""))
	primary.Script(fv.Fault{Kind: fv.Hang, Delay: time.Minute})

	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		// Bounded: if the request never arrives, the cancel still comes
		// and the assertions below say what went wrong.
		// Calls, not InFlight: the vendor's handler is in flight from the
		// request's headers on, but takes the scripted Hang only once it
		// has read the whole body. A cancel before that (HTTP/2 sends
		// the body after the headers) would leave the Hang to the next
		// request.
		testsupport.Poll(10*time.Second, func() bool { return primary.Calls() != 0 })
		cancel()
	}()
	_, err := openaiThrough(h).Chat.Completions.New(ctx, chatParams())
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v; want context.Canceled", err)
	}
	rec := h.WaitRecords(t, 1)[0]
	if rec.Status != 499 || detourtest.Outcomes(rec) != "primary:client_gone" {
		t.Errorf("record status %d attempts %s; want 499 primary:client_gone", rec.Status, detourtest.Outcomes(rec))
	}
	testsupport.Poll(5*time.Second, func() bool { return primary.InFlight() == 0 })
	if primary.InFlight() != 0 {
		t.Error("the upstream call was not cancelled when the app went away")
	}
	if backup.Calls() != 0 {
		t.Errorf("backup called %d times for an abandoned request", backup.Calls())
	}
	// No cooldown: the next request goes to the primary again.
	if _, err := openaiThrough(h).Chat.Completions.New(detourtest.TestContext(t), chatParams()); err != nil {
		t.Fatal(err)
	}
	if primary.Calls() != 2 {
		t.Errorf("primary calls = %d; want 2 (an abandoned request is no upstream failure)", primary.Calls())
	}
}

func TestHTML200FallsOver(t *testing.T) {
	t.Parallel()
	primary := detourtest.NewVendor(t, rewrite.OpenAI, "primary")
	backup := detourtest.NewVendor(t, rewrite.OpenAI, "backup")
	h := detourtest.Start(t, detourtest.TwoUpstreams(t, rewrite.OpenAI, primary, backup, ""))
	primary.Script(fv.Fault{Kind: fv.HTML200})
	got, err := openaiThrough(h).Chat.Completions.New(detourtest.TestContext(t), chatParams())
	if err != nil {
		t.Fatal(err)
	}
	if got.Choices[0].Message.Content != "Hello from backup." {
		t.Errorf("answer %q", got.Choices[0].Message.Content)
	}
	if got, want := detourtest.Outcomes(h.WaitRecords(t, 1)[0]), "primary:fallback:bad_response,backup:ok"; got != want {
		t.Errorf("attempts = %s; want %s", got, want)
	}
}

func TestAllUpstreamsFailedAnswersInAppEnvelope(t *testing.T) {
	t.Parallel()
	primary := detourtest.NewVendor(t, rewrite.Anthropic, "primary")
	backup := detourtest.NewVendor(t, rewrite.Anthropic, "backup")
	h := detourtest.Start(t, detourtest.TwoUpstreams(t, rewrite.Anthropic, primary, backup, ""))
	primary.Script(fv.Fault{Kind: fv.Status, Status: 529, Class: fv.ClassOverloaded})
	// 30 s is beyond honor_retry_after_up_to (10 s): no retry, the app
	// is told when to come back.
	backup.Script(fv.Fault{Kind: fv.Status, Status: 429, Class: fv.ClassRateLimit, RetryAfter: "30"})

	var httpResp *http.Response
	_, err := anthropicThrough(h).Messages.New(detourtest.TestContext(t), messageParams(), aoption.WithResponseInto(&httpResp))
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) {
		t.Fatalf("err = %v; want *anthropic.Error", err)
	}
	if apiErr.StatusCode != 429 || !strings.Contains(apiErr.Error(), "rate_limit_error") {
		t.Errorf("error = %v; want a 429 rate_limit_error (the last upstream's class)", apiErr)
	}
	if got := apiErr.Response.Header.Get("Retry-After"); got != "30" {
		t.Errorf("retry-after = %q; want 30", got)
	}
	if got := apiErr.Response.Header.Get(chain.HeaderAnsweredBy); got != "none" {
		t.Errorf("answered-by = %q; want none", got)
	}
	if got := apiErr.Response.Header.Get(chain.HeaderAttempts); got != "2" {
		t.Errorf("attempts = %q; want 2", got)
	}
}

func TestBaseURLMode(t *testing.T) {
	t.Parallel()
	primary := detourtest.NewVendor(t, rewrite.OpenAI, "primary")
	backup := detourtest.NewVendor(t, rewrite.OpenAI, "backup")
	h := detourtest.Start(t, detourtest.TwoUpstreams(t, rewrite.OpenAI, primary, backup, ""))
	primary.Script(fv.Fault{Kind: fv.Status, Status: 500, Class: fv.ClassServerError})
	client := openai.NewClient(
		option.WithBaseURL(h.ProxyURL.String()+"/openai/v1/"),
		option.WithAPIKey(detourtest.AppOpenAIKey),
		option.WithMaxRetries(0),
	)
	got, err := client.Chat.Completions.New(detourtest.TestContext(t), chatParams())
	if err != nil {
		t.Fatal(err)
	}
	if got.Choices[0].Message.Content != "Hello from backup." {
		t.Errorf("answer %q", got.Choices[0].Message.Content)
	}
	rec := h.WaitRecords(t, 1)[0]
	if rec.Mode != "base_url" || rec.Route != "r" {
		t.Errorf("record mode %q route %q", rec.Mode, rec.Route)
	}
	if p := primary.Requests()[0].Path; p != "/v1/chat/completions" {
		t.Errorf("upstream path = %q", p)
	}
}

func TestMalformedRequestGets400InAppShape(t *testing.T) {
	t.Parallel()
	primary := detourtest.NewVendor(t, rewrite.OpenAI, "primary")
	backup := detourtest.NewVendor(t, rewrite.OpenAI, "backup")
	h := detourtest.Start(t, detourtest.TwoUpstreams(t, rewrite.OpenAI, primary, backup, ""))
	req, _ := http.NewRequest("POST", "https://api.openai.com/v1/chat/completions", strings.NewReader(`{"model": "gpt-4o", "messages": [`))
	req.Header.Set("Authorization", "Bearer "+detourtest.AppOpenAIKey)
	resp, err := h.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	info := rewrite.ParseError(body)
	if resp.StatusCode != 400 || !info.Parsed || info.Type != "invalid_request_error" {
		t.Errorf("got %d %s; want a 400 invalid_request_error in OpenAI's envelope", resp.StatusCode, body)
	}
	if primary.Calls()+backup.Calls() != 0 {
		t.Error("a malformed request was forwarded")
	}
}

// TestInterceptedStreamIsNotBuffered checks, through CONNECT and TLS
// interception, that a committed stream's events reach the app as they are
// sent (goproxy's MITM loop once buffered streams: goproxy #786). The check
// is causal, not a timing: the upstream sends its next event only after the
// app has received the previous one.
func TestInterceptedStreamIsNotBuffered(t *testing.T) {
	t.Parallel()
	got1 := make(chan struct{})
	up := detourtest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fl := w.(http.Flusher)
		write := func(s string) { _, _ = io.WriteString(w, s); fl.Flush() }
		write("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"m\",\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}}\n\n")
		write("event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n")
		write("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"one\"}}\n\n")
		select {
		case <-got1:
		case <-time.After(5 * time.Second):
			write("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"TOO-LATE\"}}\n\n")
		}
		write("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\" two\"}}\n\n")
		write("event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n")
		write("event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":2}}\n\n")
		write("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
	}))
	defer up.Close()
	caFile := filepath.Join(t.TempDir(), "up.pem")
	if err := os.WriteFile(caFile, detourtest.PEMCert(up.Certificate()), 0o644); err != nil {
		t.Fatal(err)
	}
	h := detourtest.Start(t, fmt.Sprintf(`{
  "upstreams": {"u": {"shape": "anthropic", "base_url": %q, "ca_file": %q, "auth": {"from": "client"}}},
  "routes": [{"name": "m", "match": {"host": "api.anthropic.com", "path": "/v1/messages"}, "chain": ["u"]}]
}`, up.URL, caFile))
	stream := anthropicThrough(h).Messages.NewStreaming(detourtest.TestContext(t), messageParams())
	var msg anthropic.Message
	for stream.Next() {
		ev := stream.Current()
		if err := msg.Accumulate(ev); err != nil {
			t.Fatal(err)
		}
		if ev.Type == "content_block_delta" && ev.Delta.Text == "one" {
			close(got1)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if got := msg.Content[0].Text; got != "one two" {
		t.Fatalf("text = %q; want %q (TOO-LATE means the first event was held back)", got, "one two")
	}
}
