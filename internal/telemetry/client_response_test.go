package telemetry

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/rs/zerolog"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	grpccodes "google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/detour-proxy/detour/internal/testsupport"
	"github.com/detour-proxy/detour/policy"
)

// partialTraceService takes every request and, while refuse is set, says
// it refused one span.
type partialTraceService struct {
	coltracepb.UnimplementedTraceServiceServer
	refuse *atomic.Bool
}

func (s partialTraceService) Export(context.Context, *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	if !s.refuse.Load() {
		return &coltracepb.ExportTraceServiceResponse{}, nil
	}
	return partialAnswer(), nil
}

func partialAnswer() *coltracepb.ExportTraceServiceResponse {
	return &coltracepb.ExportTraceServiceResponse{PartialSuccess: &coltracepb.ExportTracePartialSuccess{
		RejectedSpans: 1, ErrorMessage: "span too old"}}
}

// TestPartialSuccessCountsTheRejectedSpans: a collector that takes a batch
// but refuses some of its spans (an OTLP partial success, over HTTP or
// gRPC) has those spans counted as dropped, not the batch as failed, and
// is logged once, as is the collector's taking every span again.
func TestPartialSuccessCountsTheRejectedSpans(t *testing.T) {
	t.Parallel()
	refuse := &atomic.Bool{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		msg := &coltracepb.ExportTraceServiceResponse{}
		if refuse.Load() {
			msg = partialAnswer()
		}
		out, _ := proto.Marshal(msg)
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	defer srv.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(gs, partialTraceService{refuse: refuse})
	go func() { _ = gs.Serve(ln) }()
	defer gs.Stop()
	for _, tp := range []policy.TelemetryPolicy{
		{Endpoint: srv.URL + "/v1/traces", Protocol: policy.ProtocolHTTPProtobuf},
		{Endpoint: "http://" + ln.Addr().String(), Protocol: policy.ProtocolGRPC},
	} {
		log := &testsupport.SyncBuffer{}
		tr := New(zerolog.New(log))
		exp, err := newExporter(&tp)
		if err != nil {
			t.Fatal(err)
		}
		provider := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(newGatedProcessor(tr, exp)))
		tracer := provider.Tracer("test")
		refuse.Store(true)
		for i := range 3 {
			if i == 2 {
				refuse.Store(false)
			}
			for range 3 {
				_, s := tracer.Start(context.Background(), "span")
				s.End()
			}
			if err := provider.ForceFlush(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		_ = provider.Shutdown(context.Background())
		if tr.SpansDropped() != 2 || tr.ExportFailures() != 0 {
			t.Errorf("%s: dropped %d, failures %d; want 2 (one per batch) and 0", tp.Protocol, tr.SpansDropped(), tr.ExportFailures())
		}
		out := log.String()
		if n := strings.Count(out, "trace collector refuses some spans"); n != 1 || !strings.Contains(out, "collector refused 1 of 3 spans: span too old") {
			t.Errorf("%s: refusal logged %d times; want once, with the collector's message:\n%s", tp.Protocol, n, out)
		}
		if n := strings.Count(out, "trace collector takes every span again"); n != 1 {
			t.Errorf("%s: recovery logged %d times; want once:\n%s", tp.Protocol, n, out)
		}
	}
}

// TestHTTPErrorSaysTheCollectorsMessage: an OTLP/HTTP collector's error
// answer in protobuf (a google.rpc.Status) is reported by its message, not
// as raw bytes.
func TestHTTPErrorSaysTheCollectorsMessage(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		out, _ := proto.Marshal(status.New(grpccodes.InvalidArgument, "trace_id is empty").Proto())
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write(out)
	}))
	defer srv.Close()
	exp, err := newExporter(&policy.TelemetryPolicy{Endpoint: srv.URL + "/v1/traces", Protocol: policy.ProtocolHTTPProtobuf})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = exp.Shutdown(context.Background()) }()
	err = exp.ExportSpans(context.Background(), ended(t))
	if want := "collector answered 400 Bad Request: trace_id is empty"; err == nil || err.Error() != want {
		t.Errorf("err = %v; want %q", err, want)
	}
}

// TestDecodeExportResponse: the answers collectors send, and ones that are
// not protobuf, which are refused rather than misread.
func TestDecodeExportResponse(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		msg  *coltracepb.ExportTraceServiceResponse
		want partialSuccess
	}{
		{"empty", &coltracepb.ExportTraceServiceResponse{}, partialSuccess{}},
		{"warning", &coltracepb.ExportTraceServiceResponse{PartialSuccess: &coltracepb.ExportTracePartialSuccess{ErrorMessage: "slow down"}}, partialSuccess{message: "slow down"}},
		{"rejected", partialAnswer(), partialSuccess{rejected: 1, message: "span too old"}},
		{"large", &coltracepb.ExportTraceServiceResponse{PartialSuccess: &coltracepb.ExportTracePartialSuccess{RejectedSpans: 1 << 40, ErrorMessage: "日本語"}}, partialSuccess{rejected: 1 << 40, message: "日本語"}},
	} {
		b, err := proto.Marshal(tc.msg)
		if err != nil {
			t.Fatal(err)
		}
		// An unknown field, before and inside, is skipped.
		b = append([]byte{0x78, 0x05, 0x2a, 0x01, 'x'}, b...)
		got, err := decodeExportResponse(b)
		if err != nil || got != tc.want {
			t.Errorf("%s: got %+v, %v; want %+v", tc.name, got, err, tc.want)
		}
	}
	for _, bad := range []string{"\x0a", "\x0a\x05\x08", "\x08", "\x0b\x0c", "\x00", "\x0a\x02\x08\xff", "\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01"} {
		if _, err := decodeExportResponse([]byte(bad)); err == nil {
			t.Errorf("decodeExportResponse(%q) = nil error; want malformed", bad)
		}
	}
}

// FuzzDecodeExportResponse: any bytes decode without a panic, and to what
// the generated message reads wherever that reads them.
func FuzzDecodeExportResponse(f *testing.F) {
	b, _ := proto.Marshal(partialAnswer())
	f.Add(b)
	f.Add([]byte{})
	f.Add([]byte("\x0a\x03\x08\x80\x01"))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := decodeExportResponse(data)
		var want coltracepb.ExportTraceServiceResponse
		if err != nil || proto.Unmarshal(data, &want) != nil {
			return
		}
		if got.rejected != want.GetPartialSuccess().GetRejectedSpans() || got.message != want.GetPartialSuccess().GetErrorMessage() {
			t.Errorf("got %+v; generated message reads %v", got, &want)
		}
	})
}
