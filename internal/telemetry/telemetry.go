// Package telemetry exports detour's OpenTelemetry traces: one server span
// per app request and one client span per upstream attempt (retries and
// hedges included), named and attributed by the OpenTelemetry GenAI
// semantic conventions, sent over OTLP (HTTP or gRPC) by a batching
// processor with a bounded queue.
//
// Tracing is configured by the policy's telemetry section (the OTEL_*
// variables folded in by policy.Compile). When it is off, a Tracer creates
// no span at all: StartRequest returns nil and every method of a nil
// *Request or *Attempt returns at once, so the request path pays one atomic
// load and one string comparison.
//
// No prompt or completion text ever goes into a span, whatever log.prompts
// says: a trace backend is usually readable by more people than the log.
//
// telemetry imports policy and rewrite, never chain or proxy: the chain
// hands it plain values.
package telemetry

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/detour-proxy/detour/policy"
)

// QueueSize bounds the spans waiting for export. A span that finds the
// queue full is dropped and counted (SpansDropped): a slow or dead
// collector costs memory up to this bound and never a request's time.
const QueueSize = 2048

// shutdownTimeout bounds the final export of a provider replaced by a
// reload, or of the last one when detour stops.
const shutdownTimeout = 5 * time.Second

// instrumentationName names detour's tracer in the exported scope.
const instrumentationName = "github.com/detour-proxy/detour"

// Tracer holds the trace provider the current policy asks for, and swaps it
// when a reload changes the telemetry section. One Tracer serves the whole
// process; it is safe for concurrent use. A nil *Tracer is tracing off.
type Tracer struct {
	// Log receives the tracing state changes: on, off, export failing and
	// recovered, queue full. Each is said once per transition.
	Log zerolog.Logger

	cur atomic.Pointer[provider]
	mu  sync.Mutex // serialises swaps

	dropped  atomic.Uint64
	failures atomic.Uint64
	// failing and full are the states whose transitions are logged.
	failing atomic.Bool
	full    atomic.Bool
	// stopped is set by Shutdown: no provider is made after it.
	stopped bool
}

// provider is one configuration's SDK pipeline; tracer is nil when
// tracing is off.
type provider struct {
	key    string
	tp     *sdktrace.TracerProvider
	tracer trace.Tracer
}

// New returns a Tracer that logs to log. It traces nothing until Apply (or
// the first StartRequest) sees a policy that turns tracing on.
func New(log zerolog.Logger) *Tracer {
	return &Tracer{Log: log}
}

// SpansDropped counts the spans no collector took: dropped at a full
// queue, in an export that failed, or refused by the collector in a
// partial success.
func (t *Tracer) SpansDropped() uint64 { return t.dropped.Load() }

// ExportFailures counts the export calls that failed (the exporter does
// not retry: the next batch is the next try).
func (t *Tracer) ExportFailures() uint64 { return t.failures.Load() }

// Apply makes the tracer follow tp: a new exporter and sampler when tp's
// settings differ from the ones in effect, the old provider flushed and
// shut down in the background. StartRequest calls it itself when the
// policy it is handed has changed, so a reload needs no hook; detour calls
// it at start so that "tracing on" is said before the first request.
func (t *Tracer) Apply(tp *policy.TelemetryPolicy) {
	if t == nil {
		return
	}
	if p := t.cur.Load(); p == nil || p.key != tp.Key() {
		t.swap(tp)
	}
}

func (t *Tracer) swap(tp *policy.TelemetryPolicy) *provider {
	t.mu.Lock()
	defer t.mu.Unlock()
	old := t.cur.Load()
	if old != nil && old.key == tp.Key() {
		return old
	}
	p := &provider{key: tp.Key()}
	if tp.Enabled() && !t.stopped {
		exp, err := newExporter(tp)
		if err != nil {
			// The policy's values were checked when it was compiled; what
			// is left (an option the exporter refuses) keeps tracing off
			// rather than refusing a policy after the fact.
			t.Log.Error().Str("component", "telemetry").Err(err).Msg("cannot start the trace exporter; tracing is off")
		} else {
			p.tp = sdktrace.NewTracerProvider(
				sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(tp.SampleRatio))),
				sdktrace.WithSpanProcessor(newGatedProcessor(t, exp)),
				sdktrace.WithResource(serviceResource()),
			)
			p.tracer = p.tp.Tracer(instrumentationName)
			t.Log.Info().Str("component", "telemetry").Str("endpoint", tp.Endpoint).Str("protocol", tp.Protocol).
				Float64("sample_ratio", tp.SampleRatio).Str("from", tp.From).Int("headers", len(tp.Headers)).Msg("tracing on")
		}
	} else if old != nil && old.tp != nil {
		t.Log.Info().Str("component", "telemetry").Msg("tracing off")
	}
	t.cur.Store(p)
	if old != nil && old.tp != nil {
		// Spans still open on the old provider (a long stream across the
		// reload) end into a stopped processor and are lost; what had
		// ended is flushed here.
		go shutdown(old.tp)
	}
	return p
}

// Shutdown flushes and stops the provider in effect; tracing is off
// afterwards. detour calls it once its listeners have drained.
func (t *Tracer) Shutdown() {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.stopped = true
	old := t.cur.Swap(nil)
	if old != nil {
		// Off from now on, whatever policy a late request carries.
		t.cur.Store(&provider{key: old.key})
	}
	if old != nil && old.tp != nil {
		shutdown(old.tp)
	}
}

func shutdown(tp *sdktrace.TracerProvider) {
	ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	_ = tp.Shutdown(ctx)
}

// serviceResource names detour's spans' service: "detour", unless
// OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES say otherwise.
func serviceResource() *resource.Resource {
	base := resource.NewSchemaless(attribute.String("service.name", "detour"))
	r, err := resource.Merge(base, resource.Environment())
	if err != nil {
		return base
	}
	return r
}

// propagator reads and writes W3C trace context only: traceparent and
// tracestate, never baggage, so detour adds nothing else to what the
// upstreams see.
var propagator = propagation.TraceContext{}

// StartRequest starts the span of one app request, continuing the app's
// trace when its header carries a W3C traceparent. It returns nil when tp
// turns tracing off (no span, no allocation).
func (t *Tracer) StartRequest(tp *policy.TelemetryPolicy, h http.Header, path string, start time.Time) *Request {
	if t == nil {
		return nil
	}
	p := t.cur.Load()
	if p == nil || p.key != tp.Key() {
		p = t.swap(tp)
	}
	if p.tracer == nil {
		return nil
	}
	ctx := context.Background()
	if len(h["Traceparent"]) > 0 {
		ctx = propagator.Extract(ctx, propagation.HeaderCarrier(h))
	}
	op := OperationName(path)
	ctx, span := p.tracer.Start(ctx, op, trace.WithSpanKind(trace.SpanKindServer), trace.WithTimestamp(start))
	return &Request{ctx: ctx, span: span, tracer: p.tracer, op: op}
}
