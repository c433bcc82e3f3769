package telemetry

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	grpccodes "google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/detour-proxy/detour/policy"
)

// ended returns one ended span with every kind of attribute, an event and
// an error status.
func ended(t *testing.T) []sdktrace.ReadOnlySpan {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	_, s := tp.Tracer("t", trace.WithInstrumentationVersion("v1")).Start(context.Background(), "chat gpt-4o", trace.WithSpanKind(trace.SpanKindClient))
	s.SetAttributes(attribute.String("s", "x"), attribute.Int("i", 7), attribute.Bool("b", true), attribute.Float64("f", 0.5),
		attribute.StringSlice("ss", []string{"a", "b"}), attribute.Int64Slice("is", []int64{1, 2}))
	s.AddEvent("detour.skipped", trace.WithAttributes(attribute.String("detour.upstream", "u")))
	s.SetStatus(codes.Error, "quota_exhausted")
	s.End()
	return rec.Ended()
}

// TestExportRequestDecodes: what exportRequest writes is an
// ExportTraceServiceRequest that the protocol's own message decodes, with
// every field detour sets.
func TestExportRequestDecodes(t *testing.T) {
	t.Parallel()
	spans := ended(t)
	b := appendExportRequest(nil, spans)
	var req coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(b, &req); err != nil {
		t.Fatal(err)
	}
	if len(req.ResourceSpans) != 1 || len(req.ResourceSpans[0].ScopeSpans) != 1 {
		t.Fatalf("request = %v", &req)
	}
	ss := req.ResourceSpans[0].ScopeSpans[0]
	if ss.Scope.Name != "t" || ss.Scope.Version != "v1" || len(ss.Spans) != 1 {
		t.Fatalf("scope spans = %v", ss)
	}
	s := ss.Spans[0]
	sc := spans[0].SpanContext()
	tid, sid := sc.TraceID(), sc.SpanID()
	if s.Name != "chat gpt-4o" || s.Kind != tracepb.Span_SPAN_KIND_CLIENT || string(s.TraceId) != string(tid[:]) || string(s.SpanId) != string(sid[:]) {
		t.Errorf("span = %v", s)
	}
	if s.Status.GetCode() != tracepb.Status_STATUS_CODE_ERROR || s.Status.GetMessage() != "quota_exhausted" {
		t.Errorf("status = %v; want error quota_exhausted", s.Status)
	}
	if s.StartTimeUnixNano == 0 || s.EndTimeUnixNano < s.StartTimeUnixNano {
		t.Errorf("times %d..%d", s.StartTimeUnixNano, s.EndTimeUnixNano)
	}
	got := map[string]string{}
	for _, kv := range s.Attributes {
		got[kv.Key] = kv.Value.String()
	}
	for k, want := range map[string]string{"s": `string_value:"x"`, "i": "int_value:7", "b": "bool_value:true", "f": "double_value:0.5",
		"ss": `array_value:{values:{string_value:"a"} values:{string_value:"b"}}`, "is": "array_value:{values:{int_value:1} values:{int_value:2}}"} {
		if strings.Join(strings.Fields(got[k]), " ") != want {
			t.Errorf("attribute %s = %s; want %s", k, got[k], want)
		}
	}
	if len(s.Events) != 1 || s.Events[0].Name != "detour.skipped" || len(s.Events[0].Attributes) != 1 {
		t.Errorf("events = %v", s.Events)
	}
}

type failingTraceService struct {
	coltracepb.UnimplementedTraceServiceServer
}

func (failingTraceService) Export(context.Context, *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	return nil, status.Error(grpccodes.Unavailable, "collector is shutting down")
}

// TestExportErrors: a collector that refuses a batch, over HTTP (a status
// outside 2xx) or gRPC (a grpc-status other than OK), is an export error.
func TestExportErrors(t *testing.T) {
	t.Parallel()
	spans := ended(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		http.Error(w, "overloaded", http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(gs, failingTraceService{})
	go func() { _ = gs.Serve(ln) }()
	defer gs.Stop()
	for _, tc := range []struct {
		tp   policy.TelemetryPolicy
		want string
	}{
		{policy.TelemetryPolicy{Endpoint: srv.URL + "/v1/traces", Protocol: policy.ProtocolHTTPProtobuf}, "collector answered 503 Service Unavailable: overloaded"},
		{policy.TelemetryPolicy{Endpoint: "http://" + ln.Addr().String(), Protocol: policy.ProtocolGRPC}, "collector answered grpc-status 14: collector is shutting down"},
	} {
		exp, err := newExporter(&tc.tp)
		if err != nil {
			t.Fatal(err)
		}
		err = exp.ExportSpans(context.Background(), spans)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v; want %q", tc.tp.Protocol, err, tc.want)
		}
		_ = exp.Shutdown(context.Background())
	}
}
