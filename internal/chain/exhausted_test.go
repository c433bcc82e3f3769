package chain_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/detour-proxy/detour/internal/chain"
	"github.com/detour-proxy/detour/internal/detourtest"
	fv "github.com/detour-proxy/detour/internal/fakevendor"
	"github.com/detour-proxy/detour/rewrite"
)

// cooldownSeconds is what is left of upstream name's cooldown on the
// runner's clock, as a retry-after value.
func cooldownSeconds(t *testing.T, r *runner, c *clock, name string) string {
	t.Helper()
	return r.CooldownSeconds(t, c.Now(), name)
}

// TestExhaustedRetryAfterIsDetoursCooldown: when detour cools an upstream
// down, the app is told to come back when the cooldown ends — not when the
// vendor's own hint says, which would only bring it back to the same error
// (detour keeps the upstream out until then). A sooner upstream still wins.
// The case an SDK reads (Anthropic's credit balance) is internal/sdkcheck's
// test of the same name.
func TestExhaustedRetryAfterIsDetoursCooldown(t *testing.T) {
	t.Parallel()
	t.Run("openai quota with the vendor's retry-after", func(t *testing.T) {
		t.Parallel()
		a := detourtest.NewVendor(t, rewrite.OpenAI, "a")
		r, c := newClockedRunner(t, "api.openai.com", openaiPolicy([]string{upstreamJSON("a", a, "")}, `["a"]`, ""))
		a.Script(fv.Fault{Kind: fv.Status, Status: 429, Class: fv.ClassInsufficientQuota, RetryAfter: "30"})
		resp := post(t, r.srv.URL+"/v1/chat/completions", chatBody)
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 429 || !strings.Contains(string(body), "insufficient_quota") {
			t.Fatalf("%d %s; want 429 insufficient_quota", resp.StatusCode, body)
		}
		if got, want := resp.Header.Get("Retry-After"), cooldownSeconds(t, r, c, "a"); got != want || want != "600" {
			t.Errorf("Retry-After %q; want %q (the 10m cooldown detour started, not the vendor's 30)", got, want)
		}
	})
	t.Run("an open breaker counts as a cooldown", func(t *testing.T) {
		t.Parallel()
		a := detourtest.NewVendor(t, rewrite.OpenAI, "a")
		r, _ := newClockedRunner(t, "api.openai.com", openaiPolicy([]string{upstreamJSON("a", a, "")}, `["a"]`,
			`, "breaker": {"consecutive_failures": 1, "open_for": "45s"}`))
		a.Script(fv.Fault{Kind: fv.Status, Status: 503, Class: fv.ClassOverloaded})
		resp := post(t, r.srv.URL+"/v1/chat/completions", chatBody)
		if got := resp.Header.Get("Retry-After"); resp.StatusCode != 503 || got != "45" {
			t.Errorf("%d Retry-After %q; want 503 and 45 (the breaker it opened stays open that long)", resp.StatusCode, got)
		}
	})
	t.Run("a sooner upstream wins over a cooldown", func(t *testing.T) {
		t.Parallel()
		a := detourtest.NewVendor(t, rewrite.OpenAI, "a")
		b := detourtest.NewVendor(t, rewrite.OpenAI, "b")
		r, _ := newClockedRunner(t, "api.openai.com", openaiPolicy([]string{upstreamJSON("a", a, ""), upstreamJSON("b", b, "")}, `["a","b"]`, ""))
		a.Script(fv.Fault{Kind: fv.Status, Status: 429, Class: fv.ClassInsufficientQuota})
		// 30 s is over honor_retry_after_up_to: no retry, b is left.
		b.Script(fv.Fault{Kind: fv.Status, Status: 429, Class: fv.ClassRateLimit, RetryAfter: "30"})
		resp := post(t, r.srv.URL+"/v1/chat/completions", chatBody)
		if got := resp.Header.Get("Retry-After"); resp.StatusCode != 429 || got != "30" {
			t.Errorf("%d Retry-After %q; want 429 and 30 (b may answer then)", resp.StatusCode, got)
		}
	})
}

// TestPassthroughFailureIsInTheVendorsEnvelope: a request no route takes
// (a model listing) whose vendor cannot be reached is answered in that
// vendor's error envelope, which each official SDK reads as an API error
// with its status, not as a parse failure of a text/plain page. Here the
// timeout, in plain HTTP; each SDK's case is internal/sdkcheck's test of the
// same name.
func TestPassthroughFailureIsInTheVendorsEnvelope(t *testing.T) {
	t.Parallel()
	a := detourtest.NewVendor(t, rewrite.OpenAI, "a")
	// Only api.openai.com has a route: the other hosts' envelopes come
	// from the host itself.
	pol := openaiPolicy([]string{upstreamJSON("a", a, "")}, `["a"]`, "")
	start := func(host string, tr http.RoundTripper) *runner {
		return startRunner(t, host, pol, func(cr *chain.Runner) { cr.Passthrough = tr })
	}

	t.Run("timeout is a 504", func(t *testing.T) {
		t.Parallel()
		// A vendor that accepts the connection and never speaks TLS.
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				t.Cleanup(func() { c.Close() })
			}
		}()
		tr := &http.Transport{
			TLSHandshakeTimeout: 50 * time.Millisecond,
			DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, network, ln.Addr().String())
			},
		}
		r := start("api.openai.com", tr)
		req, _ := http.NewRequest(http.MethodGet, r.srv.URL+"/v1/models", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		info := rewrite.ParseError(body)
		if resp.StatusCode != 504 || info.Type != "timeout" || !strings.Contains(info.Message, "cannot reach api.openai.com") {
			t.Errorf("%d %s; want a 504 timeout in OpenAI's envelope", resp.StatusCode, body)
		}
		detourtest.CheckPassthroughHeaders(t, resp.Header)
		r.CheckPassthroughRecord(t, 504)
	})
}
