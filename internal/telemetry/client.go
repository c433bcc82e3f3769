package telemetry

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/detour-proxy/detour/policy"
)

// grpcExportPath is the OTLP/gRPC trace service's one method, as a path
// (the gRPC over HTTP/2 protocol: /package.Service/Method).
const grpcExportPath = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"

// maxExportAnswer bounds what is read of a collector's answer: its body
// only says how many spans it refused.
const maxExportAnswer = 64 << 10

// otlpExporter sends span batches to a collector, over OTLP/HTTP (a POST
// of the protobuf request) or OTLP/gRPC (the same message, framed, in a
// gRPC unary call over HTTP/2, plain-text h2c for http:// endpoints). It
// does not retry: see newExporter.
type otlpExporter struct {
	client  *http.Client
	url     string
	grpc    bool
	headers http.Header
	// spanSize is the encoded size of a span in the last batch, to size
	// the next one's buffer.
	spanSize atomic.Int64
}

// newExporter builds the exporter tp names. Retries are off: a span batch
// that fails is counted as dropped and the next batch is the next try, so
// a dead collector never piles retries on the export goroutine while the
// queue fills.
func newExporter(tp *policy.TelemetryPolicy) (sdktrace.SpanExporter, error) {
	e := &otlpExporter{url: tp.Endpoint, grpc: tp.Protocol == policy.ProtocolGRPC, headers: http.Header{}}
	if _, err := url.Parse(tp.Endpoint); err != nil {
		return nil, err
	}
	for k, v := range tp.Headers {
		e.headers.Set(k, string(v))
	}
	e.headers.Set("User-Agent", "detour")
	// The collector is reached as the OpenTelemetry exporters reach it:
	// through HTTPS_PROXY when one is set for detour's own process.
	tr := &http.Transport{Proxy: http.ProxyFromEnvironment, MaxIdleConnsPerHost: 2, IdleConnTimeout: exportTimeout * 9, ForceAttemptHTTP2: true}
	if e.grpc {
		e.url = strings.TrimSuffix(tp.Endpoint, "/") + grpcExportPath
		e.headers.Set("Content-Type", "application/grpc")
		e.headers.Set("Te", "trailers")
		var p http.Protocols
		if tp.Secure() {
			p.SetHTTP2(true)
		} else {
			// gRPC without TLS is HTTP/2 with prior knowledge.
			p.SetUnencryptedHTTP2(true)
		}
		tr.Protocols = &p
		tr.Proxy = nil // an HTTP proxy does not carry h2c
	} else {
		e.headers.Set("Content-Type", "application/x-protobuf")
	}
	e.client = &http.Client{Transport: tr, Timeout: exportTimeout}
	return e, nil
}

// ExportSpans sends one batch; an error means the collector did not take
// it, or (a *rejectedError) took only part of it.
func (e *otlpExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	if len(spans) == 0 {
		return nil
	}
	// The request is written into one buffer sized from the batches
	// before, behind room for gRPC's message prefix (uncompressed, 4-byte
	// big-endian length), so the body is neither regrown nor copied to be
	// framed. It is not reused: the transport may still hold it after Do
	// returns.
	prefix := 0
	if e.grpc {
		prefix = 5
	}
	body := make([]byte, prefix, prefix+int(e.spanSize.Load())*len(spans)*9/8)
	body = appendExportRequest(body, spans)
	e.spanSize.Store(int64((len(body) - prefix) / len(spans)))
	if e.grpc {
		body[0] = 0
		binary.BigEndian.PutUint32(body[1:5], uint32(len(body)-5))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header = e.headers.Clone()
	resp, err := e.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, maxExportAnswer))
	if err != nil {
		return err
	}
	if e.grpc {
		if err := grpcStatus(resp); err != nil {
			return err
		}
		answer, _ = grpcMessage(answer)
	} else if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("collector answered %s: %.200s", resp.Status, httpErrorText(resp, answer))
	} else if !isProtobuf(resp) {
		// Not the collector's message (a proxy's page, say): nothing
		// to read in it.
		return nil
	}
	return partial(answer, len(spans))
}

// partial reads the collector's ExportTraceServiceResponse: a
// *rejectedError when it refused some spans. An answer that does not
// decode is no failure: the collector said it took the batch.
func partial(answer []byte, spans int) error {
	p, err := decodeExportResponse(answer)
	if err != nil || p.rejected <= 0 {
		return nil
	}
	return &rejectedError{partialSuccess: p, spans: spans}
}

// httpErrorText is what an OTLP/HTTP error answer says: the message of
// the google.rpc.Status a collector sends as protobuf (OTLP specification,
// "Failures"), else the body as it is (a proxy's or load balancer's text).
func httpErrorText(resp *http.Response, answer []byte) string {
	if isProtobuf(resp) {
		if _, msg, err := decodeRPCStatus(answer); err == nil && msg != "" {
			return msg
		}
	}
	return string(answer)
}

// grpcStatus reads a gRPC call's outcome: grpc-status in the trailers, or
// in the headers of a trailers-only answer (an error before any message).
func grpcStatus(resp *http.Response) error {
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("collector answered %s", resp.Status)
	}
	st, msg := resp.Trailer.Get("Grpc-Status"), resp.Trailer.Get("Grpc-Message")
	if st == "" {
		st, msg = resp.Header.Get("Grpc-Status"), resp.Header.Get("Grpc-Message")
	}
	switch st {
	case "0":
		return nil
	case "":
		return errors.New("collector answer has no grpc-status")
	}
	if m, err := url.PathUnescape(msg); err == nil {
		msg = m
	}
	return fmt.Errorf("collector answered grpc-status %s: %s", st, msg)
}

func isProtobuf(resp *http.Response) bool {
	return strings.HasPrefix(resp.Header.Get("Content-Type"), "application/x-protobuf")
}

// Shutdown closes the idle connections to the collector.
func (e *otlpExporter) Shutdown(context.Context) error {
	e.client.CloseIdleConnections()
	return nil
}
