package chain_test

import (
	"bufio"
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

// BenchmarkStreamCommit measures a short stream through Runner.Serve
// behind a real HTTP server, the upstream in memory: the opening event,
// one content event and the end, so that the figure is mostly the
// request's way in and the stream's commit point (inspection, claim,
// headers, the first write with its flush) rather than its events.
func BenchmarkStreamCommit(b *testing.B) {
	r := shortStreamRunner(b)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.Serve(w, req, chain.Target{Host: "api.openai.com", Mode: "base_url"})
	}))
	defer srv.Close()
	cl := srv.Client()
	b.ReportAllocs()
	for b.Loop() {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/chat/completions", strings.NewReader(streamBody))
		req.Header.Set("Authorization", "Bearer sk-app")
		resp, err := cl.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "data: ") {
				n++
			}
		}
		resp.Body.Close()
		if resp.StatusCode != 200 || n != 4 {
			b.Fatalf("status %d, %d events", resp.StatusCode, n)
		}
	}
}

// shortStream is the upstream's answer of the commit benchmarks: the
// opening event, one content event and the end.
const shortStream = `data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}` + "\n\n" +
	`data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"Hello"}}]}` + "\n\n" +
	`data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\ndata: [DONE]\n\n"

// shortStreamRunner is a Runner whose one upstream, in memory, answers
// shortStream.
func shortStreamRunner(b *testing.B) *chain.Runner {
	rt := rtFunc(func(req *http.Request) (*http.Response, error) {
		_, _ = io.Copy(io.Discard, req.Body)
		h := http.Header{"Content-Type": {"text/event-stream"}, "Cache-Control": {"no-cache"}, "X-Request-Id": {"req-1"}}
		return &http.Response{StatusCode: 200, Status: "200 OK", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Header: h, Body: io.NopCloser(strings.NewReader(shortStream)), Request: req}, nil
	})
	pj := openaiPolicy([]string{memUpstream("up", "")}, `["up"]`, "")
	pol, err := policy.Compile("policy.json", []byte(pj), policy.Options{BaseDir: b.TempDir(), DefaultCADir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	return &chain.Runner{
		Policy:     func() *policy.Compiled { return pol },
		Health:     health.New(),
		Transports: &chain.Transports{Override: rt},
		Log:        zerolog.Nop(),
		Sleep:      func(ctx context.Context, d time.Duration) error { return ctx.Err() },
	}
}
