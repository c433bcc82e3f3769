package chain_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/detour-proxy/detour/internal/chain"
	"github.com/detour-proxy/detour/internal/health"
	"github.com/detour-proxy/detour/policy"
)

// BenchmarkServeBudgeted is BenchmarkServe's plain answer with what a
// budget costs on the request path: a priced upstream (the answer's cost),
// an upstream budget with daily and monthly limits and a route budget, each
// read at admission and added to when the answer is over. Compare it with
// BenchmarkServe/answer in the same run.
func BenchmarkServeBudgeted(b *testing.B) {
	const answer = `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"Hello."},"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":2,"total_tokens":11}}`
	rt := rtFunc(func(req *http.Request) (*http.Response, error) {
		_, _ = io.Copy(io.Discard, req.Body)
		return &http.Response{StatusCode: 200, Status: "200 OK", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(strings.NewReader(answer)), Request: req}, nil
	})
	pj := openaiPolicy([]string{memUpstream("up", `, "prices": {"gpt-4o*": {"input": 2.5, "output": 10}, "*": {"input": 1, "output": 1}}`)}, `["up"]`,
		`, "breaker": {"enabled": false},
  "budgets": [{"name": "up-daily", "upstream": "up", "daily": 1e12, "monthly": 1e12, "time_zone": "America/Los_Angeles"},
              {"name": "chat-daily", "route": "chat", "daily": 1e12}]`)
	pol, err := policy.Compile("policy.json", []byte(pj), policy.Options{BaseDir: b.TempDir(), DefaultCADir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	r := &chain.Runner{
		Policy:     func() *policy.Compiled { return pol },
		Health:     health.New(),
		Transports: &chain.Transports{Override: rt},
		Log:        zerolog.Nop(),
	}
	b.ReportAllocs()
	for b.Loop() {
		req := httptest.NewRequest(http.MethodPost, "http://api.openai.com/v1/chat/completions", strings.NewReader(chatBody))
		req.Header.Set("Authorization", "Bearer sk-app")
		w := httptest.NewRecorder()
		r.Serve(w, req, chain.Target{Host: "api.openai.com", Mode: "base_url"})
		if w.Code != 200 {
			b.Fatalf("status %d: %s", w.Code, w.Body)
		}
	}
}
