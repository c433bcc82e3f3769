package sdkcheck

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3/option"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/detour-proxy/detour/internal/detourtest"
	fv "github.com/detour-proxy/detour/internal/fakevendor"
	"github.com/detour-proxy/detour/internal/testsupport"
	"github.com/detour-proxy/detour/rewrite"
)

// The app's own trace context, as an instrumented app sends it.
const (
	appTraceID    = "4bf92f3577b34da6a3ce929d0e0e4736"
	appSpanID     = "00f067aa0ba902b7"
	appTraceparen = "00-" + appTraceID + "-" + appSpanID + "-01"
)

// otlpReceiver is an in-process OTLP collector: it decodes what detour's
// exporter sends (OTLP/HTTP protobuf or OTLP/gRPC) into the protocol's own
// messages, and keeps the raw bytes too, to search them for text that must
// never be exported.
type otlpReceiver struct {
	// Endpoint is the receiver's URL for telemetry.otlp.endpoint.
	Endpoint string

	mu      sync.Mutex
	spans   []*tracepb.Span
	res     []*commonpb.KeyValue
	raw     [][]byte
	headers []http.Header
	changed chan struct{}
}

func (o *otlpReceiver) add(req *coltracepb.ExportTraceServiceRequest, raw []byte, h http.Header) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, rs := range req.ResourceSpans {
		o.res = rs.GetResource().GetAttributes()
		for _, ss := range rs.ScopeSpans {
			o.spans = append(o.spans, ss.Spans...)
		}
	}
	o.raw = append(o.raw, raw)
	o.headers = append(o.headers, h)
	select {
	case o.changed <- struct{}{}:
	default:
	}
}

// waitSpans waits until the receiver holds at least n spans.
func (o *otlpReceiver) waitSpans(t *testing.T, n int) []*tracepb.Span {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		o.mu.Lock()
		got := append([]*tracepb.Span(nil), o.spans...)
		o.mu.Unlock()
		if len(got) >= n {
			return got
		}
		select {
		case <-o.changed:
		case <-deadline:
			t.Fatalf("the collector received %d spans; want %d", len(got), n)
		}
	}
}

// newHTTPReceiver serves OTLP/HTTP with protobuf bodies on loopback.
func newHTTPReceiver(t *testing.T) *otlpReceiver {
	o := &otlpReceiver{changed: make(chan struct{}, 1)}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil || r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
			http.Error(w, "want a protobuf POST to /v1/traces", http.StatusBadRequest)
			return
		}
		var req coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(body, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		o.add(&req, body, r.Header.Clone())
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	t.Cleanup(srv.Close)
	o.Endpoint = srv.URL
	return o
}

// grpcTraceService is the collector's TraceService.
type grpcTraceService struct {
	coltracepb.UnimplementedTraceServiceServer
	o *otlpReceiver
}

func (g *grpcTraceService) Export(ctx context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	raw, _ := proto.Marshal(req)
	h := http.Header{}
	md, _ := metadata.FromIncomingContext(ctx)
	for k, vs := range md {
		for _, v := range vs {
			h.Add(k, v)
		}
	}
	g.o.add(req, raw, h)
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

// newGRPCReceiver serves OTLP/gRPC (plain text) on loopback.
func newGRPCReceiver(t *testing.T) *otlpReceiver {
	o := &otlpReceiver{changed: make(chan struct{}, 1)}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(srv, &grpcTraceService{o: o})
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	o.Endpoint = "http://" + ln.Addr().String()
	return o
}

// fastBatches makes the exporter send within milliseconds of a span's end
// rather than the batch processor's 5 s default. It sets the environment,
// so the tests that call it do not run in parallel.
func fastBatches(t *testing.T) {
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "10")
}

func attrs(kvs []*commonpb.KeyValue) map[string]string {
	m := map[string]string{}
	for _, kv := range kvs {
		v := kv.GetValue()
		switch x := v.GetValue().(type) {
		case *commonpb.AnyValue_StringValue:
			m[kv.Key] = x.StringValue
		case *commonpb.AnyValue_IntValue:
			m[kv.Key] = fmt.Sprint(x.IntValue)
		case *commonpb.AnyValue_BoolValue:
			m[kv.Key] = fmt.Sprint(x.BoolValue)
		default:
			m[kv.Key] = v.String()
		}
	}
	return m
}

// checkAttrs reports every attribute of want that got lacks or has
// otherwise; want "*" is any value, want "" is absent.
func checkAttrs(t *testing.T, what string, got map[string]string, want map[string]string) {
	t.Helper()
	for k, w := range want {
		g, ok := got[k]
		switch {
		case w == "" && ok:
			t.Errorf("%s: %s = %q; want absent", what, k, g)
		case w == "*" && !ok:
			t.Errorf("%s: no %s", what, k)
		case w != "" && w != "*" && g != w:
			t.Errorf("%s: %s = %q; want %q", what, k, g, w)
		}
	}
}

func id(b []byte) string { return hex.EncodeToString(b) }

// TestTracesOfAFailover: one request that fails over, sent by openai-go
// with the app's traceparent, reaches a real OTLP receiver (HTTP and gRPC)
// as one server span and two client spans below it, in the app's trace,
// with the GenAI and detour attributes; each upstream was handed the
// traceparent of its own attempt; the prompt is nowhere in the export,
// although log.prompts allows it in the log.
func TestTracesOfAFailover(t *testing.T) {
	fastBatches(t)
	for _, protocol := range []string{"http/protobuf", "grpc"} {
		t.Run(protocol, func(t *testing.T) {
			var rcv *otlpReceiver
			if protocol == "grpc" {
				rcv = newGRPCReceiver(t)
			} else {
				rcv = newHTTPReceiver(t)
			}
			headers := filepath.Join(t.TempDir(), "otlp-headers")
			if err := os.WriteFile(headers, []byte("Authorization: Bearer collector-key\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			primary := detourtest.NewVendor(t, rewrite.OpenAI, "primary")
			backup := detourtest.NewVendor(t, rewrite.OpenAI, "backup")
			h := detourtest.Start(t, detourtest.TwoUpstreams(t, rewrite.OpenAI, primary, backup, fmt.Sprintf(
				`, "log": {"prompts": true}, "telemetry": {"otlp": {"endpoint": %q, "protocol": %q, "headers_file": %q, "sample_ratio": 1}}`,
				rcv.Endpoint, protocol, headers)))
			primary.Script(fv.Fault{Kind: fv.Status, Status: 429, Class: fv.ClassInsufficientQuota})

			got, err := openaiThrough(h).Chat.Completions.New(detourtest.TestContext(t), chatParams(), option.WithHeader("traceparent", appTraceparen))
			if err != nil {
				t.Fatalf("chat completion through detour: %v", err)
			}
			if text := got.Choices[0].Message.Content; text != "Hello from backup." {
				t.Fatalf("answer = %q; want the backup's", text)
			}

			spans := rcv.waitSpans(t, 3)
			if len(spans) != 3 {
				t.Fatalf("got %d spans; want 3", len(spans))
			}
			var req *tracepb.Span
			var tries []*tracepb.Span
			for _, s := range spans {
				if id(s.TraceId) != appTraceID {
					t.Errorf("span %q: trace id %s; want the app's %s", s.Name, id(s.TraceId), appTraceID)
				}
				switch s.Kind {
				case tracepb.Span_SPAN_KIND_SERVER:
					req = s
				case tracepb.Span_SPAN_KIND_CLIENT:
					tries = append(tries, s)
				}
			}
			if req == nil || len(tries) != 2 {
				t.Fatalf("want 1 server and 2 client spans; got %v", spans)
			}
			if id(req.ParentSpanId) != appSpanID {
				t.Errorf("request span's parent = %s; want the app's span %s", id(req.ParentSpanId), appSpanID)
			}
			if req.Name != "chat gpt-4o" {
				t.Errorf("request span name = %q; want %q", req.Name, "chat gpt-4o")
			}
			checkAttrs(t, "request span", attrs(req.Attributes), map[string]string{
				"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": "gpt-4o",
				"gen_ai.response.model": "*", "gen_ai.usage.input_tokens": "*", "gen_ai.usage.output_tokens": "*",
				"detour.route": "r", "detour.outcome": "answered", "detour.answered_by": "backup",
				"http.response.status_code": "200", "error.type": "",
			})
			if req.GetStatus().GetCode() == tracepb.Status_STATUS_CODE_ERROR {
				t.Errorf("an answered request's span has status error")
			}
			// Chain order: the attempts start one after the other.
			if tries[0].StartTimeUnixNano > tries[1].StartTimeUnixNano {
				tries[0], tries[1] = tries[1], tries[0]
			}
			for i, want := range []map[string]string{
				{"detour.upstream": "primary", "detour.outcome": "fallback", "error.type": "quota_exhausted",
					"http.response.status_code": "429", "gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai",
					"gen_ai.request.model": "gpt-4o", "detour.retry": "0", "gen_ai.usage.input_tokens": ""},
				{"detour.upstream": "backup", "detour.outcome": "ok", "error.type": "", "http.response.status_code": "200",
					"gen_ai.request.model": "gpt-4o", "gen_ai.response.model": "*", "gen_ai.usage.input_tokens": "*"},
			} {
				s := tries[i]
				if !bytes.Equal(s.ParentSpanId, req.SpanId) {
					t.Errorf("attempt %d: parent %s; want the request span %s", i, id(s.ParentSpanId), id(req.SpanId))
				}
				checkAttrs(t, fmt.Sprintf("attempt %d", i), attrs(s.Attributes), want)
			}
			if tries[0].GetStatus().GetCode() != tracepb.Status_STATUS_CODE_ERROR {
				t.Errorf("the failed attempt's span status = %v; want error", tries[0].GetStatus())
			}
			// Each upstream saw its own attempt as the parent.
			for i, v := range []*detourtest.Vendor{primary, backup} {
				rs := v.Requests()
				if len(rs) != 1 {
					t.Fatalf("vendor %d got %d requests", i, len(rs))
				}
				want := "00-" + appTraceID + "-" + id(tries[i].SpanId) + "-01"
				if tp := rs[0].Header.Get("Traceparent"); tp != want {
					t.Errorf("vendor %d got traceparent %q; want %q (its attempt's span)", i, tp, want)
				}
				if b := rs[0].Header.Get("Baggage"); b != "" {
					t.Errorf("vendor %d got baggage %q; detour passes trace context only", i, b)
				}
			}
			if got := attrs(rcv.res)["service.name"]; got != "detour" {
				t.Errorf("resource service.name = %q; want detour", got)
			}
			rcv.mu.Lock()
			defer rcv.mu.Unlock()
			for _, hd := range rcv.headers {
				if a := hd.Get("Authorization"); a != "Bearer collector-key" {
					t.Errorf("export sent Authorization %q; want the headers_file's", a)
				}
			}
			for _, raw := range rcv.raw {
				if bytes.Contains(raw, []byte("Say hello")) || bytes.Contains(raw, []byte("Hello from")) {
					t.Errorf("the export carries prompt or completion text:\n%q", raw)
				}
			}
			if !strings.Contains(h.Log(), "Say hello") {
				t.Errorf("log.prompts is on, yet the log has no prompt: the check above proves nothing")
			}
		})
	}
}

// TestTracesFromTheEnvironment: with no telemetry section, the standard
// OTEL_EXPORTER_OTLP_* variables turn tracing on (here gRPC, with headers),
// and a reload that adds a telemetry section moves the export to the
// policy's collector.
func TestTracesFromTheEnvironment(t *testing.T) {
	fastBatches(t)
	fromEnv := newGRPCReceiver(t)
	fromPolicy := newHTTPReceiver(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", fromEnv.Endpoint)
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-collector-key=k%201")
	t.Setenv("OTEL_SERVICE_NAME", "detour-test")

	vendor := detourtest.NewVendor(t, rewrite.OpenAI, "primary")
	backup := detourtest.NewVendor(t, rewrite.OpenAI, "backup")
	h := detourtest.Start(t, detourtest.TwoUpstreams(t, rewrite.OpenAI, vendor, backup, ""))
	if _, err := openaiThrough(h).Chat.Completions.New(detourtest.TestContext(t), chatParams()); err != nil {
		t.Fatal(err)
	}
	spans := fromEnv.waitSpans(t, 2)
	if len(spans) != 2 || id(spans[0].TraceId) != id(spans[1].TraceId) {
		t.Fatalf("want a request and an attempt span of one trace; got %v", spans)
	}
	fromEnv.mu.Lock()
	if k := fromEnv.headers[0].Get("X-Collector-Key"); k != "k 1" {
		t.Errorf("export metadata x-collector-key = %q; want the variable's %q", k, "k 1")
	}
	if name := attrs(fromEnv.res)["service.name"]; name != "detour-test" {
		t.Errorf("service.name = %q; want OTEL_SERVICE_NAME's", name)
	}
	fromEnv.mu.Unlock()
	if line := h.WaitLogLine(t, "tracing on", func(map[string]any) bool { return true }); line["from"] != "OTEL_EXPORTER_OTLP_ENDPOINT" || line["protocol"] != "grpc" {
		t.Errorf("tracing on line = %v; want from OTEL_EXPORTER_OTLP_ENDPOINT, grpc", line)
	}

	// The policy wins: its endpoint and protocol replace the variables'.
	h.WritePolicy(t, detourtest.TwoUpstreams(t, rewrite.OpenAI, vendor, backup,
		fmt.Sprintf(`, "version": "traced", "telemetry": {"otlp": {"endpoint": %q, "protocol": "http/protobuf"}}`, fromPolicy.Endpoint)))
	h.WaitLogLine(t, "policy reloaded", func(m map[string]any) bool { return m["version"] == "traced" })
	if _, err := openaiThrough(h).Chat.Completions.New(detourtest.TestContext(t), chatParams()); err != nil {
		t.Fatal(err)
	}
	if got := fromPolicy.waitSpans(t, 2); len(got) != 2 {
		t.Errorf("the policy's collector got %d spans; want 2", len(got))
	}
}

// TestDeadCollectorCostsNothing: with the collector unreachable, requests
// are answered as usual, and the lost spans and failed exports are counted
// on /metrics and said once in the log.
func TestDeadCollectorCostsNothing(t *testing.T) {
	fastBatches(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close() // nothing listens there any more: every export is refused

	primary := detourtest.NewVendor(t, rewrite.OpenAI, "primary")
	backup := detourtest.NewVendor(t, rewrite.OpenAI, "backup")
	h := detourtest.Start(t, detourtest.TwoUpstreams(t, rewrite.OpenAI, primary, backup,
		fmt.Sprintf(`, "telemetry": {"otlp": {"endpoint": %q}}`, dead)))
	for range 3 {
		got, err := openaiThrough(h).Chat.Completions.New(detourtest.TestContext(t), chatParams())
		if err != nil {
			t.Fatalf("with the collector down: %v", err)
		}
		if text := got.Choices[0].Message.Content; text != "Hello from primary." {
			t.Fatalf("answer = %q", text)
		}
	}
	var metrics string
	// 3 requests, 2 spans each (request and attempt).
	testsupport.Eventually(t, 20*time.Second, "the lost spans counted on /metrics", func() bool {
		metrics = scrape(t, h)
		return metricAtLeast(metrics, "detour_trace_spans_dropped_total", 6) && metricAtLeast(metrics, "detour_trace_export_failures_total", 1)
	})
	h.WaitLogLine(t, exportFailing, func(map[string]any) bool { return true })
	if n := len(h.LogLines(exportFailing)); n != 1 {
		t.Errorf("the failing export was logged %d times; want once", n)
	}
}

// exportFailing is the log line of a failing export.
const exportFailing = "trace export failing; spans are dropped (counted in detour_trace_spans_dropped_total) until the collector answers"

func scrape(t *testing.T, h *detourtest.Harness) string {
	t.Helper()
	resp, err := http.Get(h.AdminURL.String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// metricAtLeast reports whether the exposition has name with a value of at
// least min.
func metricAtLeast(exposition, name string, min float64) bool {
	for _, line := range strings.Split(exposition, "\n") {
		var v float64
		if strings.HasPrefix(line, name+" ") {
			if _, err := fmt.Sscan(strings.TrimPrefix(line, name+" "), &v); err == nil && v >= min {
				return true
			}
		}
	}
	return false
}

// TestTracesOfRetriesAndHedges: a hedged request (a hanging primary, a
// translated Anthropic backup started beside it, streamed) and a retried
// one each give a span per attempt: the hedge marked, the loser's outcome
// hedge_lost, the retry numbered, each with its upstream's provider.
func TestTracesOfRetriesAndHedges(t *testing.T) {
	fastBatches(t)
	rcv := newHTTPReceiver(t)
	primary := detourtest.NewVendor(t, rewrite.OpenAI, "primary")
	backup := detourtest.NewVendor(t, rewrite.Anthropic, "backup")
	pol := crossPolicy(t, rewrite.OpenAI, primary, backup)
	pol = pol[:len(pol)-2] + fmt.Sprintf(`, "hedge_after": "100ms", "retry": {"base": "1ms", "max": "2ms"},
  "errors": {"classes": {"overloaded": {"retries": 1}}}, "telemetry": {"otlp": {"endpoint": %q}}}`, rcv.Endpoint)
	h := detourtest.Start(t, pol)

	primary.Script(fv.Fault{Kind: fv.Hang, Delay: 20 * time.Second})
	if got := newAppClient(t, rewrite.OpenAI, h).ask(t, true, false); got.text != "Hello from backup." {
		t.Fatalf("hedged: %q; want the backup's", got.text)
	}
	waitIdle(t, primary)
	primary.Reset()
	primary.Script(fv.Fault{Kind: fv.Status, Status: 503, Class: fv.ClassOverloaded})
	if got := newAppClient(t, rewrite.OpenAI, h).ask(t, false, false); got.text != "Hello from primary." {
		t.Fatalf("retried: %q; want the primary's", got.text)
	}

	spans := rcv.waitSpans(t, 6)
	byTrace := map[string][]*tracepb.Span{}
	var order []string
	for _, s := range spans {
		k := id(s.TraceId)
		if byTrace[k] == nil {
			order = append(order, k)
		}
		byTrace[k] = append(byTrace[k], s)
	}
	if len(order) != 2 {
		t.Fatalf("spans of %d traces; want 2 (one per request)", len(order))
	}
	describe := func(trace []*tracepb.Span) []string {
		var out []string
		for _, s := range trace {
			if s.Kind != tracepb.Span_SPAN_KIND_CLIENT {
				continue
			}
			a := attrs(s.Attributes)
			out = append(out, fmt.Sprintf("%s %s retry=%s hedge=%s provider=%s error=%s", a["detour.upstream"], a["detour.outcome"],
				a["detour.retry"], a["detour.hedge"], a["gen_ai.provider.name"], a["error.type"]))
		}
		sort.Strings(out)
		return out
	}
	// The exporter may send both requests' spans in one batch: each trace
	// is told by its attempts.
	want := map[string]bool{
		strings.Join([]string{
			"backup ok retry=0 hedge=true provider=anthropic error=",
			"primary hedge_lost retry=0 hedge=false provider=openai error=",
		}, "\n"): true,
		strings.Join([]string{
			"primary ok retry=1 hedge=false provider=openai error=",
			"primary retry retry=0 hedge=false provider=openai error=overloaded",
		}, "\n"): true,
	}
	for _, k := range order {
		got := strings.Join(describe(byTrace[k]), "\n")
		if !want[got] {
			t.Errorf("attempt spans of one request:\n%s\nwant one of:\n%v", got, want)
		}
		delete(want, got)
	}
}
