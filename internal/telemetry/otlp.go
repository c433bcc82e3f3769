package telemetry

import (
	"math"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// This file turns the SDK's ended spans into an OTLP
// ExportTraceServiceRequest, as the OpenTelemetry exporters do, written
// straight into one buffer by protoEncoder. detour neither uses the
// exporters (they link all of grpc-go, some 5 MB, for one unary call that
// net/http makes as well: client.go) nor the generated OTLP messages (they
// link google.golang.org/protobuf's reflection-driven runtime, and build a
// heap object for every span, attribute and value only to encode it).
//
// The field numbers below are those of the OTLP protocol's definitions in
// github.com/open-telemetry/opentelemetry-proto:
// opentelemetry/proto/collector/trace/v1/trace_service.proto,
// opentelemetry/proto/trace/v1/trace.proto,
// opentelemetry/proto/resource/v1/resource.proto and
// opentelemetry/proto/common/v1/common.proto. The tests decode what is
// written here with the generated messages of go.opentelemetry.io/proto/otlp
// and compare it with what those messages, filled the exporters' way,
// encode to.

// ExportTraceServiceRequest and ExportTraceServiceResponse.
const (
	requestResourceSpans   = 1
	responsePartialSuccess = 1
	partialRejectedSpans   = 1
	partialErrorMessage    = 2
)

// ResourceSpans, Resource, ScopeSpans and InstrumentationScope.
const (
	resourceSpansResource   = 1
	resourceSpansScopeSpans = 2
	resourceSpansSchemaURL  = 3
	resourceAttributes      = 1
	scopeSpansScope         = 1
	scopeSpansSpans         = 2
	scopeSpansSchemaURL     = 3
	scopeName               = 1
	scopeVersion            = 2
)

// Span, Span.Event, Span.Link and Status.
const (
	spanTraceID           = 1
	spanSpanID            = 2
	spanTraceState        = 3
	spanParentSpanID      = 4
	spanName              = 5
	spanKindField         = 6
	spanStartTime         = 7
	spanEndTime           = 8
	spanAttributes        = 9
	spanDroppedAttributes = 10
	spanEvents            = 11
	spanDroppedEvents     = 12
	spanLinks             = 13
	spanDroppedLinks      = 14
	spanStatus            = 15
	spanFlags             = 16

	eventTime              = 1
	eventName              = 2
	eventAttributes        = 3
	eventDroppedAttributes = 4

	linkTraceID           = 1
	linkSpanID            = 2
	linkTraceState        = 3
	linkAttributes        = 4
	linkDroppedAttributes = 5

	statusMessage = 2
	statusCode    = 3

	statusCodeOk    = 1
	statusCodeError = 2
)

// KeyValue, AnyValue, ArrayValue and KeyValueList.
const (
	keyValueKey   = 1
	keyValueValue = 2

	anyString = 1
	anyBool   = 2
	anyInt    = 3
	anyDouble = 4
	anyArray  = 5
	anyKVList = 6
	anyBytes  = 7

	arrayValues  = 1
	kvListValues = 1
)

// The span flags of OTLP 1.x (SpanFlags): the low byte is the W3C trace
// flags; bits 8 and 9 say whether the parent is remote (here: the app's
// traceparent).
const (
	spanFlagsHasIsRemote = 0x100
	spanFlagsIsRemote    = 0x200
)

// appendExportRequest appends spans to dst as an ExportTraceServiceRequest:
// the resource spans, grouped by resource and then by instrumentation
// scope, each group in the order of its first span.
func appendExportRequest(dst []byte, spans []sdktrace.ReadOnlySpan) []byte {
	e := protoEncoder{b: dst}
	for i := 0; i < len(spans); {
		res := spans[i].Resource()
		// Spans of one provider share its resource; a batch holds one.
		j := i + 1
		for j < len(spans) && spans[j].Resource() == res {
			j++
		}
		group := spans[i:j]
		rs := e.begin(requestResourceSpans)
		if res != nil {
			r := e.begin(resourceSpansResource)
			for it := res.Iter(); it.Next(); {
				e.keyValue(resourceAttributes, it.Attribute())
			}
			e.end(r)
		}
		// The scopes in order of first appearance; detour has one, so the
		// spans are walked once per scope rather than sorted into lists.
		var seen [4]instrumentation.Scope
		scopes := seen[:0]
		for _, s := range group {
			sc := s.InstrumentationScope()
			if !containsScope(scopes, sc) {
				scopes = append(scopes, sc)
			}
		}
		for _, sc := range scopes {
			ss := e.begin(resourceSpansScopeSpans)
			scope := e.begin(scopeSpansScope)
			if sc.Name != "" {
				e.string(scopeName, sc.Name)
			}
			if sc.Version != "" {
				e.string(scopeVersion, sc.Version)
			}
			e.end(scope)
			for _, s := range group {
				if sameScope(s.InstrumentationScope(), sc) {
					e.span(s)
				}
			}
			if sc.SchemaURL != "" {
				e.string(scopeSpansSchemaURL, sc.SchemaURL)
			}
			e.end(ss)
		}
		if res != nil && res.SchemaURL() != "" {
			e.string(resourceSpansSchemaURL, res.SchemaURL())
		}
		e.end(rs)
		i = j
	}
	return e.b
}

// sameScope compares what a scope is exported as: its name, version and
// schema URL (not its attributes, which are not sent).
func sameScope(a, b instrumentation.Scope) bool {
	return a.Name == b.Name && a.Version == b.Version && a.SchemaURL == b.SchemaURL
}

func containsScope(scopes []instrumentation.Scope, sc instrumentation.Scope) bool {
	for _, s := range scopes {
		if sameScope(s, sc) {
			return true
		}
	}
	return false
}

// span writes s as a ScopeSpans' span. As proto3 does, a field at its zero
// value is left out.
func (e *protoEncoder) span(s sdktrace.ReadOnlySpan) {
	m := e.begin(scopeSpansSpans)
	sc := s.SpanContext()
	tid, sid := sc.TraceID(), sc.SpanID()
	e.bytes(spanTraceID, tid[:])
	e.bytes(spanSpanID, sid[:])
	e.traceState(spanTraceState, sc.TraceState())
	flags := uint32(sc.TraceFlags()) | spanFlagsHasIsRemote
	if par := s.Parent(); par.IsValid() {
		psid := par.SpanID()
		e.bytes(spanParentSpanID, psid[:])
		if par.IsRemote() {
			flags |= spanFlagsIsRemote
		}
	}
	if name := s.Name(); name != "" {
		e.string(spanName, name)
	}
	if k := spanKind(s.SpanKind()); k != 0 {
		e.varint(spanKindField, k)
	}
	e.time(spanStartTime, s.StartTime().UnixNano())
	e.time(spanEndTime, s.EndTime().UnixNano())
	for _, kv := range s.Attributes() {
		e.keyValue(spanAttributes, kv)
	}
	e.count(spanDroppedAttributes, s.DroppedAttributes())
	for _, ev := range s.Events() {
		m := e.begin(spanEvents)
		e.time(eventTime, ev.Time.UnixNano())
		if ev.Name != "" {
			e.string(eventName, ev.Name)
		}
		for _, kv := range ev.Attributes {
			e.keyValue(eventAttributes, kv)
		}
		e.count(eventDroppedAttributes, ev.DroppedAttributeCount)
		e.end(m)
	}
	e.count(spanDroppedEvents, s.DroppedEvents())
	for _, l := range s.Links() {
		m := e.begin(spanLinks)
		ltid, lsid := l.SpanContext.TraceID(), l.SpanContext.SpanID()
		e.bytes(linkTraceID, ltid[:])
		e.bytes(linkSpanID, lsid[:])
		e.traceState(linkTraceState, l.SpanContext.TraceState())
		for _, kv := range l.Attributes {
			e.keyValue(linkAttributes, kv)
		}
		e.count(linkDroppedAttributes, l.DroppedAttributeCount)
		e.end(m)
	}
	e.count(spanDroppedLinks, s.DroppedLinks())
	switch st := s.Status(); st.Code {
	case codes.Error:
		m := e.begin(spanStatus)
		if st.Description != "" {
			e.string(statusMessage, st.Description)
		}
		e.varint(statusCode, statusCodeError)
		e.end(m)
	case codes.Ok:
		m := e.begin(spanStatus)
		e.varint(statusCode, statusCodeOk)
		e.end(m)
	}
	e.fixed32(spanFlags, flags)
	e.end(m)
}

// traceState writes ts as its W3C header value, as TraceState.String
// does, without building the string: an app's tracestate is on every span
// of its requests.
func (e *protoEncoder) traceState(field int, ts trace.TraceState) {
	if ts.Len() == 0 {
		return
	}
	m := e.begin(field)
	ts.Walk(func(key, value string) bool {
		if len(e.b) > m {
			e.b = append(e.b, ',')
		}
		e.b = append(append(append(e.b, key...), '='), value...)
		return true
	})
	e.end(m)
}

// time writes a fixed64 time in Unix nanoseconds (a uint64 on the wire).
func (e *protoEncoder) time(field int, unixNano int64) {
	if unixNano != 0 {
		e.fixed64(field, uint64(unixNano))
	}
}

// count writes a dropped count (a uint32 on the wire).
func (e *protoEncoder) count(field int, n int) {
	if v := uint32(n); v != 0 {
		e.varint(field, uint64(v))
	}
}

// spanKind is k's number in Span.SpanKind; one the SDK may add later is
// unspecified.
func spanKind(k trace.SpanKind) uint64 {
	switch k {
	case trace.SpanKindInternal:
		return 1
	case trace.SpanKindServer:
		return 2
	case trace.SpanKindClient:
		return 3
	case trace.SpanKindProducer:
		return 4
	case trace.SpanKindConsumer:
		return 5
	}
	return 0
}

// keyValue writes kv as a KeyValue in field.
func (e *protoEncoder) keyValue(field int, kv attribute.KeyValue) {
	m := e.begin(field)
	if kv.Key != "" {
		e.string(keyValueKey, string(kv.Key))
	}
	v := e.begin(keyValueValue)
	e.anyValue(kv.Value)
	e.end(v)
	e.end(m)
}

// anyValue writes v's fields as an AnyValue's: exactly one member of its
// oneof, written even at its zero value, or none for an empty value.
func (e *protoEncoder) anyValue(v attribute.Value) {
	switch v.Type() {
	case attribute.EMPTY:
	case attribute.BOOL:
		var b uint64
		if v.AsBool() {
			b = 1
		}
		e.varint(anyBool, b)
	case attribute.INT64:
		e.varint(anyInt, uint64(v.AsInt64()))
	case attribute.FLOAT64:
		e.fixed64(anyDouble, math.Float64bits(v.AsFloat64()))
	case attribute.STRING:
		e.string(anyString, v.AsString())
	case attribute.BYTESLICE:
		e.bytes(anyBytes, v.AsByteSlice())
	case attribute.BOOLSLICE:
		a := e.begin(anyArray)
		for _, b := range v.AsBoolSlice() {
			e.arrayValue(attribute.BoolValue(b))
		}
		e.end(a)
	case attribute.INT64SLICE:
		a := e.begin(anyArray)
		for _, i := range v.AsInt64Slice() {
			e.arrayValue(attribute.Int64Value(i))
		}
		e.end(a)
	case attribute.FLOAT64SLICE:
		a := e.begin(anyArray)
		for _, f := range v.AsFloat64Slice() {
			e.arrayValue(attribute.Float64Value(f))
		}
		e.end(a)
	case attribute.STRINGSLICE:
		a := e.begin(anyArray)
		for _, s := range v.AsStringSlice() {
			e.arrayValue(attribute.StringValue(s))
		}
		e.end(a)
	case attribute.SLICE:
		a := e.begin(anyArray)
		for _, el := range v.AsSlice() {
			e.arrayValue(el)
		}
		e.end(a)
	case attribute.MAP:
		l := e.begin(anyKVList)
		for _, kv := range v.AsMap() {
			e.keyValue(kvListValues, kv)
		}
		e.end(l)
	default:
		// A type the SDK may add later goes as its text, as before there
		// was a member for it.
		e.string(anyString, v.String())
	}
}

// arrayValue writes v as one of an ArrayValue's values.
func (e *protoEncoder) arrayValue(v attribute.Value) {
	m := e.begin(arrayValues)
	e.anyValue(v)
	e.end(m)
}
