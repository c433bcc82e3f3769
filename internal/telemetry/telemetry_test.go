package telemetry

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/detour-proxy/detour/internal/testsupport"
	"github.com/detour-proxy/detour/policy"
	"github.com/detour-proxy/detour/rewrite"
)

// compileTelemetry compiles a policy whose telemetry section is section
// ("" for none), without the process environment.
func compileTelemetry(t testing.TB, section string) *policy.Compiled {
	t.Helper()
	if section != "" {
		section = `, "telemetry": ` + section
	}
	c, err := policy.Compile("policy.json", []byte(`{
  "upstreams": {"o": {"shape": "openai", "base_url": "https://api.openai.com/v1", "auth": {"from": "client"}}},
  "routes": [{"name": "r", "match": {"host": "api.openai.com"}, "chain": ["o"]}]`+section+`
}`), policy.Options{BaseDir: t.TempDir(), DefaultCADir: t.TempDir(), TelemetryEnv: func(string) (string, bool) { return "", false }})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

var answerBody = []byte(`{"model":"gpt-4o-2024-08-06"}`)

// traceOneRequest is what the chain does for a request with one attempt.
func traceOneRequest(tr *Tracer, tp *policy.TelemetryPolicy, h http.Header) {
	now := time.Now()
	r := tr.StartRequest(tp, h, "/v1/chat/completions", now)
	a := r.StartAttempt(now, AttemptStart{Upstream: "o", Shape: "openai", Host: "api.openai.com", Model: "gpt-4o"})
	a.Inject(h)
	a.Answer(rewrite.OpenAI, answerBody)
	a.End(AttemptEnd{Outcome: "ok", Status: 200})
	r.End(RequestEnd{Host: "api.openai.com", Route: "r", Model: "gpt-4o", Outcome: "answered", AnsweredBy: "o", Status: 200})
}

// TestOffCreatesNoSpan: with tracing off (no telemetry section, or no
// Tracer at all) a request starts no span, allocates nothing, and leaves
// the app's traceparent as it was. Not parallel: AllocsPerRun needs the
// process to itself.
func TestOffCreatesNoSpan(t *testing.T) {
	tp := &compileTelemetry(t, "").Telemetry
	for _, tr := range []*Tracer{nil, New(zerolog.Nop())} {
		h := http.Header{"Traceparent": {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}
		if r := tr.StartRequest(tp, h, "/v1/chat/completions", time.Now()); r != nil {
			t.Errorf("tracing off: StartRequest = %v; want nil", r)
		}
		if n := testing.AllocsPerRun(100, func() { traceOneRequest(tr, tp, h) }); n != 0 {
			t.Errorf("tracing off: %v allocations per request; want 0", n)
		}
		if got := h.Get("Traceparent"); got != "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" {
			t.Errorf("tracing off changed the traceparent to %q", got)
		}
	}
}

// blockingExporter holds every export until release is closed, and fails
// them while fail is set.
type blockingExporter struct {
	mu       sync.Mutex
	fail     bool
	exported int
	release  chan struct{}
}

func (e *blockingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	<-e.release
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.fail {
		return errors.New("connection refused")
	}
	e.exported += len(spans)
	return nil
}

func (e *blockingExporter) Shutdown(context.Context) error { return nil }

// TestFullQueueDropsAndCounts: a span that finds the queue full is dropped
// at once (the request never waits) and counted, the first drop is logged
// once, and the queue's recovery is logged once too.
func TestFullQueueDropsAndCounts(t *testing.T) {
	t.Parallel()
	log := &testsupport.SyncBuffer{}
	tr := New(zerolog.New(log))
	exp := &blockingExporter{release: make(chan struct{})}
	g := newGatedProcessor(tr, exp)
	g.limit = 2
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(g))
	tracer := tp.Tracer("test")
	for range 5 {
		_, s := tracer.Start(context.Background(), "span")
		s.End()
	}
	if got := tr.SpansDropped(); got != 3 {
		t.Errorf("SpansDropped = %d; want 3 (5 spans, room for 2)", got)
	}
	if n := strings.Count(log.String(), "trace export queue is full"); n != 1 {
		t.Errorf("queue full logged %d times; want once:\n%s", n, log)
	}
	close(exp.release)
	if err := tp.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if exp.exported != 2 {
		t.Errorf("exported %d spans; want the 2 queued", exp.exported)
	}
	if !strings.Contains(log.String(), "trace export queue has room again") {
		t.Errorf("no recovery line:\n%s", log)
	}
	_ = tp.Shutdown(context.Background())
}

// TestFailedExportIsCountedAndLoggedOnce: failed exports count their spans
// as dropped, the failure is logged once however long it lasts, and the
// recovery once.
func TestFailedExportIsCountedAndLoggedOnce(t *testing.T) {
	t.Parallel()
	log := &testsupport.SyncBuffer{}
	tr := New(zerolog.New(log))
	exp := &blockingExporter{release: make(chan struct{}), fail: true}
	close(exp.release)
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(newGatedProcessor(tr, exp)))
	tracer := tp.Tracer("test")
	for range 2 {
		_, s := tracer.Start(context.Background(), "span")
		s.End()
		_ = tp.ForceFlush(context.Background())
	}
	if tr.ExportFailures() != 2 || tr.SpansDropped() != 2 {
		t.Errorf("failures %d, dropped %d; want 2 and 2", tr.ExportFailures(), tr.SpansDropped())
	}
	exp.mu.Lock()
	exp.fail = false
	exp.mu.Unlock()
	_, s := tracer.Start(context.Background(), "span")
	s.End()
	_ = tp.ForceFlush(context.Background())
	out := log.String()
	if n := strings.Count(out, "trace export failing"); n != 1 {
		t.Errorf("failure logged %d times; want once:\n%s", n, out)
	}
	if n := strings.Count(out, "trace export recovered"); n != 1 {
		t.Errorf("recovery logged %d times; want once:\n%s", n, out)
	}
	_ = tp.Shutdown(context.Background())
}

// TestApplySwapsOnlyWhenTheSettingsChange: a reload with the same
// telemetry settings keeps the provider; other settings replace it; a
// policy without telemetry turns tracing off.
func TestApplySwapsOnlyWhenTheSettingsChange(t *testing.T) {
	t.Parallel()
	tr := New(zerolog.Nop())
	defer tr.Shutdown()
	a := compileTelemetry(t, `{"otlp": {"endpoint": "http://127.0.0.1:1"}}`)
	b := compileTelemetry(t, `{"otlp": {"endpoint": "http://127.0.0.1:1"}}`)
	c := compileTelemetry(t, `{"otlp": {"endpoint": "http://127.0.0.1:1", "protocol": "grpc"}}`)
	tr.Apply(&a.Telemetry)
	first := tr.cur.Load()
	if first.tracer == nil {
		t.Fatal("tracing on: no tracer")
	}
	tr.Apply(&b.Telemetry)
	if tr.cur.Load() != first {
		t.Error("the same settings made a new provider")
	}
	tr.Apply(&c.Telemetry)
	if p := tr.cur.Load(); p == first || p.tracer == nil {
		t.Error("new settings kept the old provider")
	}
	off := compileTelemetry(t, "")
	if r := tr.StartRequest(&off.Telemetry, http.Header{}, "/v1/chat/completions", time.Now()); r != nil {
		t.Error("a policy without telemetry still traces")
	}
}

func TestOperationAndProviderNames(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ path, want string }{
		{"/v1/chat/completions", "chat"},
		{"/v1/messages", "chat"},
		{"/v1/responses", "chat"},
		{"/v1/embeddings", "embeddings"},
		{"/v1/completions", "text_completion"},
		{"/v1beta/models/gemini-2.5-flash:generateContent", "generate_content"},
		{"/v1beta/models/gemini-2.5-flash:streamGenerateContent", "generate_content"},
		{"/v1/models", "models"},
	} {
		if got := OperationName(tc.path); got != tc.want {
			t.Errorf("OperationName(%q) = %q; want %q", tc.path, got, tc.want)
		}
	}
	for _, tc := range []struct{ shape, host, want string }{
		{"openai", "api.openai.com", "openai"},
		{"openai", "vllm.models.svc", "openai"},
		{"openai", "team.openai.azure.com", "azure.ai.openai"},
		{"azure-openai", "x.example.com", "azure.ai.openai"},
		{"anthropic", "api.anthropic.com", "anthropic"},
		{"bedrock", "bedrock-runtime.us-east-1.amazonaws.com", "aws.bedrock"},
		{"gemini", "generativelanguage.googleapis.com", "gcp.gemini"},
		{"gemini", "us-central1-aiplatform.googleapis.com", "gcp.vertex_ai"},
	} {
		if got := ProviderName(tc.shape, tc.host); got != tc.want {
			t.Errorf("ProviderName(%q, %q) = %q; want %q", tc.shape, tc.host, got, tc.want)
		}
	}
}

// nopExporter takes every span and does nothing.
type nopExporter struct{}

func (nopExporter) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (nopExporter) Shutdown(context.Context) error                             { return nil }

// BenchmarkRequestSpans is the chain's tracing work for a request with one
// attempt: off (the policy has no telemetry), and on with every request
// sampled into the batch processor (an exporter that does nothing). Off
// must stay at 0 allocs/op. Run:
//
//	go test -run='^$' -bench=RequestSpans -benchmem ./internal/telemetry/
func BenchmarkRequestSpans(b *testing.B) {
	off := compileTelemetry(b, "")
	b.Run("off", func(b *testing.B) {
		tr := New(zerolog.Nop())
		h := http.Header{}
		b.ReportAllocs()
		for b.Loop() {
			traceOneRequest(tr, &off.Telemetry, h)
		}
	})
	b.Run("on", func(b *testing.B) {
		on := compileTelemetry(b, `{"otlp": {"endpoint": "http://127.0.0.1:1"}}`)
		tr := New(zerolog.Nop())
		// The provider of the policy, with an exporter that drops nothing.
		p := &provider{key: on.Telemetry.Key()}
		p.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(newGatedProcessor(tr, nopExporter{})))
		p.tracer = p.tp.Tracer(instrumentationName)
		tr.cur.Store(p)
		defer p.tp.Shutdown(context.Background())
		h := http.Header{}
		b.ReportAllocs()
		for b.Loop() {
			traceOneRequest(tr, &on.Telemetry, h)
		}
	})
}
