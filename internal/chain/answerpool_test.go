package chain_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/detour-proxy/detour/internal/chain"
	"github.com/detour-proxy/detour/internal/health"
	"github.com/detour-proxy/detour/policy"
)

// TestConcurrentAnswersKeepTheirBytes: answers are read into pooled
// buffers that go back once the answer is written; requests running at
// once, each with an answer of its own (some failing first, whose bodies
// are kept), each get exactly their own answer and usage.
func TestConcurrentAnswersKeepTheirBytes(t *testing.T) {
	t.Parallel()
	answer := func(id string) string {
		return `{"id":"` + id + `","object":"chat.completion","model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"` +
			strings.Repeat(id+" ", 50) + `"},"finish_reason":"stop"}],"usage":{"prompt_tokens":` + id[1:] + `,"completion_tokens":1}}`
	}
	rt := rtFunc(func(req *http.Request) (*http.Response, error) {
		_, _ = io.Copy(io.Discard, req.Body)
		id := req.Header.Get("X-Test-Id")
		status, body := 200, answer(id)
		if req.URL.Hostname() == "down.test" {
			status, body = 503, strings.Replace(overloadedBody, "overloaded", "overloaded "+id, 1)
		}
		return &http.Response{StatusCode: status, Status: http.StatusText(status), Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Header: http.Header{"Content-Type": {"application/json"}}, ContentLength: int64(len(body)),
			Body: io.NopCloser(strings.NewReader(body)), Request: req}, nil
	})
	pol, err := policy.Compile("policy.json", []byte(openaiPolicy([]string{memUpstream("up", ""), memUpstream("down", "")}, `["down","up"]`,
		`, "breaker": {"enabled": false}, "errors": {"classes": {"overloaded": {"retries": 0, "cooldown": "0s"}}}`)),
		policy.Options{BaseDir: t.TempDir(), DefaultCADir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	inputs := map[string]int64{}
	r := &chain.Runner{
		Policy:     func() *policy.Compiled { return pol },
		Health:     health.New(),
		Transports: &chain.Transports{Override: rt},
		Log:        zerolog.Nop(),
		Sleep:      func(ctx context.Context, d time.Duration) error { return ctx.Err() },
		OnRecord: func(rec *chain.Record) {
			mu.Lock()
			inputs[rec.ID] = rec.Usage.Input
			mu.Unlock()
		},
	}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprintf("r%d", 100+i)
			for range 20 {
				req := httptest.NewRequest(http.MethodPost, "http://api.openai.com/v1/chat/completions", strings.NewReader(chatBody))
				req.Header.Set("X-Test-Id", id)
				w := httptest.NewRecorder()
				r.Serve(w, req, chain.Target{Host: "api.openai.com", Mode: "base_url"})
				if got := w.Body.String(); w.Code != 200 || got != answer(id) {
					errs <- fmt.Errorf("request %s: %d %q; want its own answer", id, w.Code, got)
					return
				}
				mu.Lock()
				in := inputs[w.Header().Get(chain.HeaderRequestID)]
				mu.Unlock()
				if want := int64(100 + i); in != want {
					errs <- fmt.Errorf("request %s: usage input %d; want %d", id, in, want)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
