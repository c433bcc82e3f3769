package telemetry

import (
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// This file is the oracle of the differential tests: the conversion
// detour used before it wrote the wire format itself (otlp.go), which
// fills the generated OTLP messages as the OpenTelemetry exporters do and
// has proto.Marshal encode them. Only the attribute types the SDK gained
// since (bytes, slices of values, maps, the empty value), which it sent as
// their text, are now given the AnyValue members made for them.

// exportRequestProto encodes spans as an ExportTraceServiceRequest
// (collector trace service v1) with the generated messages: field 1, the
// resource spans, grouped by resource and then by instrumentation scope.
func exportRequestProto(spans []sdktrace.ReadOnlySpan) ([]byte, error) {
	type scopeKey struct{ name, version, schema string }
	var out []byte
	for i := 0; i < len(spans); {
		res := spans[i].Resource()
		rs := &tracepb.ResourceSpans{}
		if res != nil {
			rs.Resource = &resourcepb.Resource{Attributes: keyValuesProto(res.Attributes())}
			rs.SchemaUrl = res.SchemaURL()
		}
		scopes := map[scopeKey]*tracepb.ScopeSpans{}
		// Spans of one provider share its resource; a batch holds one.
		for ; i < len(spans) && spans[i].Resource() == res; i++ {
			s := spans[i]
			sc := s.InstrumentationScope()
			k := scopeKey{sc.Name, sc.Version, sc.SchemaURL}
			ss := scopes[k]
			if ss == nil {
				ss = &tracepb.ScopeSpans{Scope: &commonpb.InstrumentationScope{Name: sc.Name, Version: sc.Version}, SchemaUrl: sc.SchemaURL}
				scopes[k] = ss
				rs.ScopeSpans = append(rs.ScopeSpans, ss)
			}
			ss.Spans = append(ss.Spans, spanProto(s))
		}
		b, err := proto.Marshal(rs)
		if err != nil {
			return nil, err
		}
		out = protowire.AppendTag(out, 1, protowire.BytesType)
		out = protowire.AppendBytes(out, b)
	}
	return out, nil
}

func spanProto(s sdktrace.ReadOnlySpan) *tracepb.Span {
	sc := s.SpanContext()
	tid, sid := sc.TraceID(), sc.SpanID()
	p := &tracepb.Span{
		TraceId:                tid[:],
		SpanId:                 sid[:],
		TraceState:             sc.TraceState().String(),
		Name:                   s.Name(),
		Kind:                   spanKindProto(s.SpanKind()),
		StartTimeUnixNano:      uint64(s.StartTime().UnixNano()),
		EndTimeUnixNano:        uint64(s.EndTime().UnixNano()),
		Attributes:             keyValuesProto(s.Attributes()),
		DroppedAttributesCount: uint32(s.DroppedAttributes()),
		DroppedEventsCount:     uint32(s.DroppedEvents()),
		DroppedLinksCount:      uint32(s.DroppedLinks()),
		Flags:                  uint32(sc.TraceFlags()) | spanFlagsHasIsRemoteProto,
	}
	if par := s.Parent(); par.IsValid() {
		psid := par.SpanID()
		p.ParentSpanId = psid[:]
		if par.IsRemote() {
			p.Flags |= spanFlagsIsRemoteProto
		}
	}
	for _, e := range s.Events() {
		p.Events = append(p.Events, &tracepb.Span_Event{
			TimeUnixNano: uint64(e.Time.UnixNano()), Name: e.Name,
			Attributes: keyValuesProto(e.Attributes), DroppedAttributesCount: uint32(e.DroppedAttributeCount),
		})
	}
	for _, l := range s.Links() {
		ltid, lsid := l.SpanContext.TraceID(), l.SpanContext.SpanID()
		p.Links = append(p.Links, &tracepb.Span_Link{
			TraceId: ltid[:], SpanId: lsid[:], TraceState: l.SpanContext.TraceState().String(),
			Attributes: keyValuesProto(l.Attributes), DroppedAttributesCount: uint32(l.DroppedAttributeCount),
		})
	}
	st := s.Status()
	switch st.Code {
	case codes.Error:
		p.Status = &tracepb.Status{Code: tracepb.Status_STATUS_CODE_ERROR, Message: st.Description}
	case codes.Ok:
		p.Status = &tracepb.Status{Code: tracepb.Status_STATUS_CODE_OK}
	}
	return p
}

// The span flags of OTLP 1.x: bits 8 and 9 say whether the parent is
// remote (here: the app's traceparent).
const (
	spanFlagsHasIsRemoteProto = uint32(tracepb.SpanFlags_SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK)
	spanFlagsIsRemoteProto    = uint32(tracepb.SpanFlags_SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK)
)

func spanKindProto(k trace.SpanKind) tracepb.Span_SpanKind {
	switch k {
	case trace.SpanKindInternal:
		return tracepb.Span_SPAN_KIND_INTERNAL
	case trace.SpanKindServer:
		return tracepb.Span_SPAN_KIND_SERVER
	case trace.SpanKindClient:
		return tracepb.Span_SPAN_KIND_CLIENT
	case trace.SpanKindProducer:
		return tracepb.Span_SPAN_KIND_PRODUCER
	case trace.SpanKindConsumer:
		return tracepb.Span_SPAN_KIND_CONSUMER
	}
	return tracepb.Span_SPAN_KIND_UNSPECIFIED
}

func keyValuesProto(kvs []attribute.KeyValue) []*commonpb.KeyValue {
	if len(kvs) == 0 {
		return nil
	}
	out := make([]*commonpb.KeyValue, 0, len(kvs))
	for _, kv := range kvs {
		out = append(out, &commonpb.KeyValue{Key: string(kv.Key), Value: anyValueProto(kv.Value)})
	}
	return out
}

func anyValueProto(v attribute.Value) *commonpb.AnyValue {
	switch v.Type() {
	case attribute.BOOL:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_BoolValue{BoolValue: v.AsBool()}}
	case attribute.INT64:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: v.AsInt64()}}
	case attribute.FLOAT64:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: v.AsFloat64()}}
	case attribute.STRING:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v.AsString()}}
	case attribute.BOOLSLICE:
		return arrayProto(v.AsBoolSlice(), func(b bool) *commonpb.AnyValue { return anyValueProto(attribute.BoolValue(b)) })
	case attribute.INT64SLICE:
		return arrayProto(v.AsInt64Slice(), func(i int64) *commonpb.AnyValue { return anyValueProto(attribute.Int64Value(i)) })
	case attribute.FLOAT64SLICE:
		return arrayProto(v.AsFloat64Slice(), func(f float64) *commonpb.AnyValue { return anyValueProto(attribute.Float64Value(f)) })
	case attribute.STRINGSLICE:
		return arrayProto(v.AsStringSlice(), func(s string) *commonpb.AnyValue { return anyValueProto(attribute.StringValue(s)) })
	case attribute.SLICE:
		return arrayProto(v.AsSlice(), anyValueProto)
	case attribute.MAP:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_KvlistValue{KvlistValue: &commonpb.KeyValueList{Values: keyValuesProto(v.AsMap())}}}
	case attribute.BYTESLICE:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_BytesValue{BytesValue: v.AsByteSlice()}}
	case attribute.EMPTY:
		return &commonpb.AnyValue{}
	}
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v.String()}}
}

func arrayProto[T any](vs []T, one func(T) *commonpb.AnyValue) *commonpb.AnyValue {
	a := &commonpb.ArrayValue{Values: make([]*commonpb.AnyValue, 0, len(vs))}
	for _, v := range vs {
		a.Values = append(a.Values, one(v))
	}
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_ArrayValue{ArrayValue: a}}
}
