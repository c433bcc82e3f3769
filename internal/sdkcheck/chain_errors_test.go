package sdkcheck

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"google.golang.org/genai"

	"github.com/detour-proxy/detour/internal/chain"
	"github.com/detour-proxy/detour/internal/detourtest"
	fv "github.com/detour-proxy/detour/internal/fakevendor"
	"github.com/detour-proxy/detour/rewrite"
)

// The chain's own answers when nothing answered, as each SDK reads them.
// The chain runs on its own, on a plain HTTP test server, in internal/chain's
// tests' harness (detourtest.ChainRunner); the tests of the same answers that
// need no SDK are there.

// clock is a virtual clock for breakers, cooldowns and retry waits: sleeps
// advance it at once.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
	return ctx.Err()
}

// newClockedRunner is detourtest.StartChainRunner with a virtual clock, at the time
// internal/chain's tests start theirs.
func newClockedRunner(t *testing.T, host, policyJSON string) (*detourtest.ChainRunner, *clock) {
	t.Helper()
	c := &clock{now: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
	r := detourtest.StartChainRunner(t, host, policyJSON, func(cr *chain.Runner) { cr.Now, cr.Sleep = c.Now, c.Sleep })
	return r, c
}

// TestExhaustedRetryAfterIsDetoursCooldown: when detour cools an upstream
// down, the app is told to come back when the cooldown ends — not when the
// vendor's own hint says, which would only bring it back to the same error
// (detour keeps the upstream out until then). The case an SDK reads; the
// others, in plain HTTP, are internal/chain's test of the same name.
func TestExhaustedRetryAfterIsDetoursCooldown(t *testing.T) {
	t.Parallel()
	t.Run("anthropic credit balance, no vendor hint", func(t *testing.T) {
		t.Parallel()
		a := detourtest.NewVendor(t, rewrite.Anthropic, "a")
		pol := fmt.Sprintf(`{"upstreams": {%s}, "routes": [{"name": "m", "match": {"host": "api.anthropic.com", "path": "/v1/messages"}, "chain": ["a"]}]}`, detourtest.UpstreamJSON("a", a, ""))
		r, c := newClockedRunner(t, "api.anthropic.com", pol)
		a.Script(fv.Fault{Kind: fv.Status, Class: fv.ClassCreditBalance})
		client := anthropic.NewClient(aoption.WithBaseURL(r.Srv.URL+"/"), aoption.WithAPIKey("sk-ant-app"), aoption.WithMaxRetries(0))
		_, err := client.Messages.New(context.Background(), anthropic.MessageNewParams{
			Model: "claude-sonnet-4-5", MaxTokens: 16,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))},
		})
		var apiErr *anthropic.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 402 || !strings.Contains(apiErr.Error(), "billing_error") {
			t.Fatalf("err = %v; want the SDK's 402 billing_error", err)
		}
		if got, want := apiErr.Response.Header.Get("Retry-After"), r.CooldownSeconds(t, c.Now(), "a"); got != want || want != "600" {
			t.Errorf("Retry-After %q; want %q (the cooldown detour started)", got, want)
		}
	})
}

// geminiPolicy routes Gemini's generateContent to the named upstreams,
// each a Gemini vendor that takes the app's key.
func geminiPolicy(vs map[string]*detourtest.Vendor, chainNames string) string {
	var ups []string
	for name, v := range vs {
		ups = append(ups, detourtest.UpstreamJSON(name, v, ""))
	}
	return fmt.Sprintf(`{"upstreams": {%s},
  "routes": [{"name": "g", "match": {"host": "generativelanguage.googleapis.com", "path": "/v1beta/models/*"}, "chain": %s}]}`,
		strings.Join(ups, ","), chainNames)
}

// lastResponse keeps the last response's headers an SDK received.
type lastResponse struct {
	mu sync.Mutex
	h  http.Header
}

func (l *lastResponse) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err == nil {
		l.mu.Lock()
		l.h = resp.Header.Clone()
		l.mu.Unlock()
	}
	return resp, err
}

func (l *lastResponse) header() http.Header {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.h
}

// geminiAsk sends one generateContent with go-genai and returns its
// APIError and the response headers.
func geminiAsk(t *testing.T, base string) (genai.APIError, http.Header) {
	t.Helper()
	rt := &lastResponse{}
	c, err := genai.NewClient(context.Background(), &genai.ClientConfig{
		APIKey: "gemini-app-key", Backend: genai.BackendGeminiAPI, HTTPClient: &http.Client{Transport: rt},
		HTTPOptions: genai.HTTPOptions{BaseURL: base + "/"},
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Models.GenerateContent(context.Background(), "gemini-2.5-flash", genai.Text("hi"), nil)
	var apiErr genai.APIError
	if !errors.As(err, &apiErr) {
		t.Fatalf("err = %v; want a genai.APIError", err)
	}
	return apiErr, rt.header()
}

// detailsByType indexes an APIError's details by their short @type.
func detailsByType(e genai.APIError) map[string]map[string]any {
	out := map[string]map[string]any{}
	for _, d := range e.Details {
		typ, _ := d["@type"].(string)
		out[typ[strings.LastIndexByte(typ, '/')+1:]] = d
	}
	return out
}

// TestGeminiAppKeepsTheVendorsDetailsWhenEverythingFailed: go-genai sees
// Gemini's own QuotaFailure, Help and RetryInfo in detour's error, and
// RetryInfo and retry-after both say when detour lets the upstream back in.
func TestGeminiAppKeepsTheVendorsDetailsWhenEverythingFailed(t *testing.T) {
	t.Parallel()
	t.Run("daily quota: the cooldown until the reset", func(t *testing.T) {
		t.Parallel()
		g := detourtest.NewVendor(t, rewrite.Gemini, "g")
		r, c := newClockedRunner(t, "generativelanguage.googleapis.com", geminiPolicy(map[string]*detourtest.Vendor{"g": g}, `["g"]`))
		g.Script(fv.Fault{Kind: fv.Status, Status: 429, Class: fv.ClassQuotaPerDay})
		apiErr, h := geminiAsk(t, r.Srv.URL)
		if apiErr.Code != 429 || apiErr.Status != "RESOURCE_EXHAUSTED" {
			t.Errorf("error %d %s; want 429 RESOURCE_EXHAUSTED", apiErr.Code, apiErr.Status)
		}
		d := detailsByType(apiErr)
		qf, _ := d["google.rpc.QuotaFailure"]["violations"].([]any)
		if len(qf) != 1 || !strings.Contains(fmt.Sprint(qf[0]), "GenerateRequestsPerDayPerProjectPerModel-FreeTier") {
			t.Errorf("QuotaFailure = %v; want the vendor's violation", d["google.rpc.QuotaFailure"])
		}
		if d["google.rpc.Help"] == nil {
			t.Errorf("details %v; want the vendor's Help", apiErr.Details)
		}
		// The clock is at 04:00 in Los Angeles: the daily quota resets,
		// and the cooldown ends, at midnight there, 20 hours later.
		want := r.CooldownSeconds(t, c.Now(), "g")
		if want != "72000" {
			t.Errorf("cooldown %ss; want 72000s (until Pacific midnight)", want)
		}
		if got := h.Get("Retry-After"); got != want {
			t.Errorf("Retry-After %q; want %q (detour's cooldown, not the vendor's 26s)", got, want)
		}
		if got := d["google.rpc.RetryInfo"]["retryDelay"]; got != want+"s" {
			t.Errorf("RetryInfo.retryDelay %v; want %ss, as the header says", got, want)
		}
		if h.Get(chain.HeaderAnsweredBy) != "none" || h.Get(chain.HeaderAttempts) != "1" {
			t.Errorf("detour headers %v", h)
		}
	})
	t.Run("per-minute limit: no cooldown, the vendor's delay", func(t *testing.T) {
		t.Parallel()
		g := detourtest.NewVendor(t, rewrite.Gemini, "g")
		q := detourtest.NewVendor(t, rewrite.Gemini, "q")
		r, c := newClockedRunner(t, "generativelanguage.googleapis.com", geminiPolicy(map[string]*detourtest.Vendor{"q": q, "g": g}, `["q","g"]`))
		q.Script(fv.Fault{Kind: fv.Status, Status: 429, Class: fv.ClassQuotaPerDay})
		g.Script(fv.Fault{Kind: fv.Status, Status: 429, Class: fv.ClassRateLimit})
		apiErr, h := geminiAsk(t, r.Srv.URL)
		d := detailsByType(apiErr)
		qf := fmt.Sprint(d["google.rpc.QuotaFailure"])
		if apiErr.Code != 429 || !strings.Contains(qf, "PerMinute") {
			t.Errorf("error %d, QuotaFailure %s; want 429 and the last upstream's per-minute violation", apiErr.Code, qf)
		}
		r.CooldownSeconds(t, c.Now(), "q")
		if got := h.Get("Retry-After"); got != "26" || d["google.rpc.RetryInfo"]["retryDelay"] != "26s" {
			t.Errorf("Retry-After %q, RetryInfo %v; want 26 and 26s (g may answer then, before q's cooldown ends)", got, d["google.rpc.RetryInfo"])
		}
	})
}

// unreachable is a transport to a loopback port that was closed before
// use, whatever the address asked for: a vendor that cannot be reached,
// without DNS or the network.
func unreachable(t *testing.T) *http.Transport {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}}
}

// TestPassthroughFailureIsInTheVendorsEnvelope: a request no route takes
// (a model listing) whose vendor cannot be reached is answered in that
// vendor's error envelope, which each official SDK reads as an API error
// with its status, not as a parse failure of a text/plain page. The
// timeout, in plain HTTP, is internal/chain's test of the same name.
func TestPassthroughFailureIsInTheVendorsEnvelope(t *testing.T) {
	t.Parallel()
	a := detourtest.NewVendor(t, rewrite.OpenAI, "a")
	// Only api.openai.com has a route: the other hosts' envelopes come
	// from the host itself.
	pol := detourtest.OpenAIChatPolicy([]string{detourtest.UpstreamJSON("a", a, "")}, `["a"]`, "")
	start := func(host string, tr http.RoundTripper) *detourtest.ChainRunner {
		return detourtest.StartChainRunner(t, host, pol, func(cr *chain.Runner) { cr.Passthrough = tr })
	}

	t.Run("openai", func(t *testing.T) {
		t.Parallel()
		r := start("api.openai.com", unreachable(t))
		c := openai.NewClient(option.WithBaseURL(r.Srv.URL+"/v1/"), option.WithAPIKey("sk-app"), option.WithMaxRetries(0))
		_, err := c.Models.List(context.Background())
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 502 || apiErr.Type != "server_error" || !strings.Contains(apiErr.Message, "cannot reach api.openai.com") {
			t.Fatalf("err = %#v; want a 502 server_error naming the host", err)
		}
		detourtest.CheckPassthroughHeaders(t, apiErr.Response.Header)
		r.CheckPassthroughRecord(t, 502)
	})
	t.Run("anthropic", func(t *testing.T) {
		t.Parallel()
		r := start("api.anthropic.com", unreachable(t))
		c := anthropic.NewClient(aoption.WithBaseURL(r.Srv.URL+"/"), aoption.WithAPIKey("sk-ant-app"), aoption.WithMaxRetries(0))
		_, err := c.Models.List(context.Background(), anthropic.ModelListParams{})
		var apiErr *anthropic.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 502 || !strings.Contains(apiErr.Error(), "api_error") || !strings.Contains(apiErr.Error(), "cannot reach api.anthropic.com") {
			t.Fatalf("err = %v; want a 502 api_error naming the host", err)
		}
		detourtest.CheckPassthroughHeaders(t, apiErr.Response.Header)
		r.CheckPassthroughRecord(t, 502)
	})
	t.Run("gemini", func(t *testing.T) {
		t.Parallel()
		r := start("generativelanguage.googleapis.com", unreachable(t))
		rt := &lastResponse{}
		c, err := genai.NewClient(context.Background(), &genai.ClientConfig{
			APIKey: "gemini-app-key", Backend: genai.BackendGeminiAPI, HTTPClient: &http.Client{Transport: rt},
			HTTPOptions: genai.HTTPOptions{BaseURL: r.Srv.URL + "/"},
		})
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Models.List(context.Background(), nil)
		var apiErr genai.APIError
		// Gemini pairs each status name with one HTTP status: 500 INTERNAL.
		if !errors.As(err, &apiErr) || apiErr.Code != 500 || apiErr.Status != "INTERNAL" || !strings.Contains(apiErr.Message, "cannot reach generativelanguage.googleapis.com") {
			t.Fatalf("err = %v; want a 500 INTERNAL naming the host", err)
		}
		detourtest.CheckPassthroughHeaders(t, rt.header())
		r.CheckPassthroughRecord(t, 500)
	})
}
