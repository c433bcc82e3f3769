package chain_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/detour-proxy/detour/internal/admin"
	"github.com/detour-proxy/detour/internal/chain"
	"github.com/detour-proxy/detour/internal/fakevendor"
	"github.com/detour-proxy/detour/internal/health"
	"github.com/detour-proxy/detour/policy"
	"github.com/detour-proxy/detour/rewrite"
)

// BenchmarkServeDeployed measures one non-streaming request through
// Runner.Serve as detour serve runs it and as internal/loadharness compare
// measures it: the canonical log line at info (to io.Discard, through the
// logger detour serve builds), metrics counted from every record, and the
// harness's answer (the fake vendor's, 200 words of content and its usage),
// replayed from memory so that only detour's own work is timed (no sockets,
// no vendor). Its ns/op is the chain's CPU per request that the harness's
// requests per second depend on.
func BenchmarkServeDeployed(b *testing.B) {
	// The fake vendor's answer, as the harness's vendor sends it.
	words := strings.TrimSpace(strings.Repeat("word ", 200))
	vendor := fakevendor.New(rewrite.OpenAI, fakevendor.Options{Name: "compare", Text: words, Chunks: 200})
	vreq := httptest.NewRequest(http.MethodPost, "http://vendor.test/v1/chat/completions", strings.NewReader(chatBody))
	vreq.Header.Set("Authorization", "Bearer sk-app")
	vreq.Header.Set("Content-Type", "application/json")
	vw := httptest.NewRecorder()
	vendor.ServeHTTP(vw, vreq)
	if vw.Code != http.StatusOK {
		b.Fatalf("fake vendor: %d %s", vw.Code, vw.Body)
	}
	answer, answerHeader := vw.Body.String(), vw.Result().Header
	rt := rtFunc(func(req *http.Request) (*http.Response, error) {
		_, _ = io.Copy(io.Discard, req.Body)
		return &http.Response{StatusCode: 200, Status: "200 OK", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Header: answerHeader.Clone(), ContentLength: int64(len(answer)),
			Body: io.NopCloser(strings.NewReader(answer)), Request: req}, nil
	})

	pol, err := policy.Compile("policy.json", []byte(openaiPolicy([]string{memUpstream("up", "")}, `["up"]`, "")),
		policy.Options{BaseDir: b.TempDir(), DefaultCADir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	hr := health.New()
	m := admin.NewMetrics(policy.NewStore(pol), hr)
	r := &chain.Runner{
		Policy:     func() *policy.Compiled { return pol },
		Health:     hr,
		Transports: &chain.Transports{Override: rt},
		Log:        zerolog.New(io.Discard).Level(zerolog.InfoLevel).With().Timestamp().Logger(),
		OnRecord:   m.Observe,
		Sleep:      func(ctx context.Context, d time.Duration) error { return ctx.Err() },
	}
	b.ReportAllocs()
	cpu0 := processCPU()
	for b.Loop() {
		req := httptest.NewRequest(http.MethodPost, "http://127.0.0.1/openai/v1/chat/completions", strings.NewReader(chatBody))
		req.URL.Path = "/v1/chat/completions"
		req.Host = "api.openai.com"
		req.Header.Set("Authorization", "Bearer sk-app")
		req.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		r.Serve(w, req, chain.Target{Host: "api.openai.com", Port: "443", Mode: "base_url"})
		if w.Code != 200 || w.Body.Len() != len(answer) {
			b.Fatalf("status %d, %d bytes: %s", w.Code, w.Body.Len(), w.Body)
		}
	}
	// The process's CPU time per request beside the wall time: on a
	// machine shared with other work the wall time also counts the waits
	// for a core, which CPU time does not.
	b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
}

// processCPU is the process's user and system CPU time so far, in
// nanoseconds (the garbage collector's workers included).
func processCPU() int64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
