package telemetry

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// exportTimeout bounds one export call: a collector that accepts the
// connection and never answers holds up only the exporter's goroutine.
const exportTimeout = 10 * time.Second

// gatedProcessor is the SDK's BatchSpanProcessor behind a gate that counts
// what it holds. The batch processor drops a span silently when its queue
// is full; the gate refuses that span first, and counts it. pending is
// every span handed on and not yet given to an export call, so it is never
// less than what the batch processor's queue holds: with the gate's bound
// equal to the queue's, the batch processor itself never drops one.
type gatedProcessor struct {
	sdktrace.SpanProcessor
	t       *Tracer
	pending atomic.Int64
	limit   int64
	// rejecting is the logged state of a collector that takes batches
	// but refuses some of their spans (an OTLP partial success).
	rejecting atomic.Bool
}

func newGatedProcessor(t *Tracer, exp sdktrace.SpanExporter) *gatedProcessor {
	g := &gatedProcessor{t: t, limit: QueueSize}
	g.SpanProcessor = sdktrace.NewBatchSpanProcessor(&countingExporter{SpanExporter: exp, g: g},
		sdktrace.WithMaxQueueSize(QueueSize))
	return g
}

// OnEnd hands an ended span to the batch processor, or drops it when the
// queue is full. It never blocks: it runs on the request's goroutine.
func (g *gatedProcessor) OnEnd(s sdktrace.ReadOnlySpan) {
	if !s.SpanContext().IsSampled() {
		return
	}
	if g.pending.Add(1) > g.limit {
		g.pending.Add(-1)
		g.t.dropped.Add(1)
		if g.t.full.CompareAndSwap(false, true) {
			g.t.Log.Warn().Str("component", "telemetry").Int("queue_size", QueueSize).
				Msg("trace export queue is full; dropping spans (counted in detour_trace_spans_dropped_total) until the collector keeps up")
		}
		return
	}
	g.SpanProcessor.OnEnd(s)
}

// countingExporter counts failed exports and the spans they lose. It
// returns nil to the batch processor, which would otherwise hand every
// failure to OpenTelemetry's global error handler (a plain-text line on
// stderr per batch); detour logs the transition once instead.
type countingExporter struct {
	sdktrace.SpanExporter
	g *gatedProcessor
}

func (c *countingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	g, t := c.g, c.g.t
	g.pending.Add(-int64(len(spans)))
	if g.pending.Load() < g.limit/2 && t.full.CompareAndSwap(true, false) {
		t.Log.Info().Str("component", "telemetry").Msg("trace export queue has room again")
	}
	err := c.SpanExporter.ExportSpans(ctx, spans)
	var rej *rejectedError
	if errors.As(err, &rej) {
		// The call went through: only the refused spans are lost.
		t.dropped.Add(uint64(min(rej.rejected, int64(len(spans)))))
		if g.rejecting.CompareAndSwap(false, true) {
			t.Log.Warn().Str("component", "telemetry").Err(err).
				Msg("trace collector refuses some spans; they are dropped (counted in detour_trace_spans_dropped_total)")
		}
		err = nil
	} else if err == nil && g.rejecting.CompareAndSwap(true, false) {
		t.Log.Info().Str("component", "telemetry").Msg("trace collector takes every span again")
	}
	if err != nil {
		t.failures.Add(1)
		t.dropped.Add(uint64(len(spans)))
		if t.failing.CompareAndSwap(false, true) {
			t.Log.Warn().Str("component", "telemetry").Err(err).
				Msg("trace export failing; spans are dropped (counted in detour_trace_spans_dropped_total) until the collector answers")
		}
		return nil
	}
	if t.failing.CompareAndSwap(true, false) {
		t.Log.Info().Str("component", "telemetry").Msg("trace export recovered")
	}
	return nil
}
