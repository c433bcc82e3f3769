package chain_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/detour-proxy/detour/internal/chain"
	"github.com/detour-proxy/detour/internal/health"
	"github.com/detour-proxy/detour/policy"
)

// BenchmarkServe measures one request through Runner.Serve with the
// upstream in memory (no sockets): the chain's own cost per request, per
// attempt and per stream event, for a plain answer, a stream, and a
// failover with one retry.
func BenchmarkServe(b *testing.B) {
	const answer = `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"Hello."},"finish_reason":"stop"}]}`
	stream := strings.Repeat(`data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"word "}}]}`+"\n\n", 20) +
		`data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\ndata: [DONE]\n\n"
	rt := rtFunc(func(req *http.Request) (*http.Response, error) {
		in, _ := io.ReadAll(req.Body)
		h := http.Header{"Content-Type": {"application/json"}}
		status, body := 200, answer
		switch {
		case req.URL.Hostname() == "down.test":
			status, body = 503, overloadedBody
		case strings.Contains(string(in), `"stream":true`):
			h.Set("Content-Type", "text/event-stream")
			body = stream
		}
		return &http.Response{StatusCode: status, Status: http.StatusText(status), Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Header: h, Body: io.NopCloser(strings.NewReader(body)), Request: req}, nil
	})
	cases := []struct {
		name, chain, body string
	}{
		{"answer", `["up"]`, chatBody},
		{"stream", `["up"]`, streamBody},
		{"failover_with_retry", `["down","up"]`, chatBody},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			pj := openaiPolicy([]string{memUpstream("up", ""), memUpstream("down", "")}, c.chain,
				`, "breaker": {"enabled": false}, "retry": {"base": "1ms", "max": "1ms"}, "errors": {"classes": {"overloaded": {"retries": 1, "cooldown": "0s"}}}`)
			pol, err := policy.Compile("policy.json", []byte(pj), policy.Options{BaseDir: b.TempDir(), DefaultCADir: b.TempDir()})
			if err != nil {
				b.Fatal(err)
			}
			r := &chain.Runner{
				Policy:     func() *policy.Compiled { return pol },
				Health:     health.New(),
				Transports: &chain.Transports{Override: rt},
				Log:        zerolog.Nop(),
				Sleep:      func(ctx context.Context, d time.Duration) error { return ctx.Err() },
			}
			b.ReportAllocs()
			for b.Loop() {
				req := httptest.NewRequest(http.MethodPost, "http://api.openai.com/v1/chat/completions", strings.NewReader(c.body))
				req.Header.Set("Authorization", "Bearer sk-app")
				w := httptest.NewRecorder()
				r.Serve(w, req, chain.Target{Host: "api.openai.com", Mode: "base_url"})
				if w.Code != 200 {
					b.Fatalf("status %d: %s", w.Code, w.Body)
				}
			}
		})
	}
}
