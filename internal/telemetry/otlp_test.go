package telemetry

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// The differential tests: what appendExportRequest writes must decode,
// with the protocol's own generated messages, into the message the
// exporters' way of filling them (otlp_oracle_test.go) builds.

// sameRequest fails t unless got and the oracle's encoding of spans decode
// to equal ExportTraceServiceRequests.
func sameRequest(t testing.TB, spans, oracleSpans []sdktrace.ReadOnlySpan, got []byte) {
	t.Helper()
	want, err := exportRequestProto(oracleSpans)
	if err != nil {
		t.Fatalf("oracle: %v", err)
	}
	var g, w coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(got, &g); err != nil {
		t.Fatalf("our bytes do not decode: %v\n% x", err, got)
	}
	if err := proto.Unmarshal(want, &w); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(&g, &w) {
		t.Fatalf("decoded request differs from the oracle's\ngot  %v\nwant %v", &g, &w)
	}
}

// strs are the strings the generator picks from: empty, ASCII, multi-byte
// UTF-8, a NUL, and ones long enough for a two-byte length (the batches'
// outer messages need three).
var strs = []string{"", "a", "gpt-4o", "日本語のテキスト", "emoji 🚀 ☃", "nul\x00inside", "quote \" and \\",
	strings.Repeat("x", 127), strings.Repeat("y", 128), strings.Repeat("長", 300)}

var ints = []int64{0, 1, -1, 127, 128, 300, math.MaxInt32, math.MinInt32, math.MaxInt64, math.MinInt64, 1 << 56}

var floats = []float64{0, math.Copysign(0, -1), 0.5, -1e308, math.SmallestNonzeroFloat64, math.MaxFloat64,
	math.NaN(), math.Inf(1), math.Inf(-1)}

func genString(r *rand.Rand) string {
	if r.IntN(4) == 0 {
		// A random valid string: runes from every plane.
		var b strings.Builder
		for n := r.IntN(12); n > 0; n-- {
			switch r.IntN(3) {
			case 0:
				b.WriteRune(rune(r.IntN(0x80)))
			case 1:
				b.WriteRune(rune(0x80 + r.IntN(0xD800-0x80)))
			default:
				b.WriteRune(rune(0x10000 + r.IntN(0x10FFFF-0x10000)))
			}
		}
		return b.String()
	}
	return strs[r.IntN(len(strs))]
}

// genValue returns a value of any type the SDK's attributes hold, nested
// slices and maps down to depth.
func genValue(r *rand.Rand, depth int) attribute.Value {
	n := r.IntN(5)
	kinds := 11
	if depth <= 0 {
		kinds = 9 // no slice of values nor map
	}
	switch r.IntN(kinds) {
	case 0:
		return attribute.BoolValue(r.IntN(2) == 0)
	case 1:
		return attribute.Int64Value(ints[r.IntN(len(ints))])
	case 2:
		return attribute.Float64Value(floats[r.IntN(len(floats))])
	case 3:
		return attribute.StringValue(genString(r))
	case 4:
		v := make([]bool, n)
		for i := range v {
			v[i] = r.IntN(2) == 0
		}
		return attribute.BoolSliceValue(v)
	case 5:
		v := make([]int64, n)
		for i := range v {
			v[i] = ints[r.IntN(len(ints))]
		}
		return attribute.Int64SliceValue(v)
	case 6:
		v := make([]float64, n)
		for i := range v {
			v[i] = floats[r.IntN(len(floats))]
		}
		return attribute.Float64SliceValue(v)
	case 7:
		v := make([]string, n)
		for i := range v {
			v[i] = genString(r)
		}
		return attribute.StringSliceValue(v)
	case 8:
		if r.IntN(3) == 0 {
			return attribute.Value{} // empty
		}
		return attribute.ByteSliceValue([]byte(genString(r)))
	case 9:
		v := make([]attribute.Value, n)
		for i := range v {
			v[i] = genValue(r, depth-1)
		}
		return attribute.SliceValue(v...)
	default:
		return attribute.MapValue(genAttrs(r, depth-1, n)...)
	}
}

func genAttrs(r *rand.Rand, depth, n int) []attribute.KeyValue {
	if n == 0 {
		return nil
	}
	kvs := make([]attribute.KeyValue, n)
	for i := range kvs {
		kvs[i] = attribute.KeyValue{Key: attribute.Key(genString(r)), Value: genValue(r, depth)}
	}
	return kvs
}

func genSpanContext(r *rand.Rand, remote bool) trace.SpanContext {
	var tid trace.TraceID
	var sid trace.SpanID
	binary.LittleEndian.PutUint64(tid[:8], r.Uint64())
	binary.LittleEndian.PutUint64(tid[8:], r.Uint64())
	binary.LittleEndian.PutUint64(sid[:], r.Uint64()|1)
	cfg := trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.TraceFlags(r.IntN(256)), Remote: remote}
	if r.IntN(3) == 0 {
		ts, _ := trace.ParseTraceState("vendor=opaque,other=1")
		cfg.TraceState = ts
	}
	return trace.NewSpanContext(cfg)
}

func genTime(r *rand.Rand) time.Time {
	switch r.IntN(6) {
	case 0:
		return time.Unix(0, 0) // 0: left out
	case 1:
		return time.Unix(0, math.MaxInt64)
	}
	return time.Unix(1_700_000_000+r.Int64N(1e8), r.Int64N(1e9))
}

// genBatch is a batch of up to n spans as an SDK batch processor hands it
// over: runs of spans sharing a resource (nil included), scopes mixed.
func genBatch(r *rand.Rand, n int) []sdktrace.ReadOnlySpan {
	resources := []*resource.Resource{nil, resource.NewSchemaless(attribute.String("service.name", "detour")),
		resource.NewWithAttributes("https://opentelemetry.io/schemas/1.26.0", genAttrs(r, 1, 3)...),
		resource.NewSchemaless(genAttrs(r, 2, 1+r.IntN(4))...), resource.Empty()}
	scopes := []instrumentation.Scope{{}, {Name: instrumentationName}, {Name: "t", Version: "v1"},
		{Name: "t", Version: "v1", SchemaURL: "https://opentelemetry.io/schemas/1.26.0"}, {Name: genString(r), Version: genString(r)}}
	res := resources[r.IntN(len(resources))]
	spans := make([]sdktrace.ReadOnlySpan, r.IntN(n+1))
	for i := range spans {
		if r.IntN(8) == 0 {
			res = resources[r.IntN(len(resources))]
		}
		s := tracetest.SpanStub{
			Name:                 genString(r),
			SpanContext:          genSpanContext(r, false),
			SpanKind:             trace.SpanKind(r.IntN(7)),
			StartTime:            genTime(r),
			EndTime:              genTime(r),
			Attributes:           genAttrs(r, 2, r.IntN(8)),
			DroppedAttributes:    []int{0, 0, 1, 200, math.MaxUint32}[r.IntN(5)],
			DroppedEvents:        r.IntN(3),
			DroppedLinks:         r.IntN(3),
			Resource:             res,
			InstrumentationScope: scopes[r.IntN(len(scopes))],
		}
		if r.IntN(2) == 0 {
			s.Parent = genSpanContext(r, r.IntN(2) == 0)
		}
		for range r.IntN(3) {
			s.Events = append(s.Events, sdktrace.Event{Name: genString(r), Time: genTime(r),
				Attributes: genAttrs(r, 1, r.IntN(4)), DroppedAttributeCount: r.IntN(2)})
		}
		for range r.IntN(3) {
			s.Links = append(s.Links, sdktrace.Link{SpanContext: genSpanContext(r, r.IntN(2) == 0),
				Attributes: genAttrs(r, 1, r.IntN(3)), DroppedAttributeCount: r.IntN(2)})
		}
		s.Status = sdktrace.Status{Code: []codes.Code{codes.Unset, codes.Error, codes.Ok}[r.IntN(3)], Description: genString(r)}
		spans[i] = s.Snapshot()
	}
	return spans
}

// TestEncoderMatchesTheProtocolMessages: for many generated batches
// (every attribute type, nested, events, links, status codes, empty,
// long and non-ASCII strings, extreme integers, NaN and infinities),
// appendExportRequest's bytes decode to the request the generated
// messages encode. A hundred batches (some 600 spans, every type many
// times) is what the test needs; the generated messages' reflection is
// slow under -race, and FuzzEncodeAttributes explores further.
func TestEncoderMatchesTheProtocolMessages(t *testing.T) {
	t.Parallel()
	for seed := range uint64(100) {
		r := rand.New(rand.NewPCG(seed, 0x07e1))
		spans := genBatch(r, 12)
		got := appendExportRequest(nil, spans)
		sameRequest(t, spans, spans, got)
	}
}

// TestEncoderAppendsBehindAPrefix: what is already in the buffer (gRPC's
// message prefix) is kept, and the request follows it unchanged.
func TestEncoderAppendsBehindAPrefix(t *testing.T) {
	t.Parallel()
	spans := genBatch(rand.New(rand.NewPCG(1, 2)), 40)
	alone := appendExportRequest(nil, spans)
	got := appendExportRequest([]byte{1, 2, 3, 4, 5}, spans)
	if string(got[:5]) != "\x01\x02\x03\x04\x05" || string(got[5:]) != string(alone) {
		t.Errorf("prefix or request changed: % x...", got[:min(len(got), 16)])
	}
}

// TestInvalidUTF8IsReplacedNotFatal: a string that is not UTF-8 (a raw
// byte in a Host header, say) goes as U+FFFD, so the request still
// decodes; proto.Marshal refused the whole batch for it.
func TestInvalidUTF8IsReplacedNotFatal(t *testing.T) {
	t.Parallel()
	spans := []sdktrace.ReadOnlySpan{tracetest.SpanStub{
		Name:        "chat \xff",
		SpanContext: genSpanContext(rand.New(rand.NewPCG(3, 4)), false),
		Attributes:  []attribute.KeyValue{attribute.String("server.address", "api.\xc3(.com")},
	}.Snapshot()}
	var req coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(appendExportRequest(nil, spans), &req); err != nil {
		t.Fatal(err)
	}
	s := req.ResourceSpans[0].ScopeSpans[0].Spans[0]
	if got, want := s.Name, "chat \uFFFD"; got != want {
		t.Errorf("name = %q; want %q", got, want)
	}
	if got, want := s.Attributes[0].Value.GetStringValue(), "api.\uFFFD(.com"; got != want {
		t.Errorf("server.address = %q; want %q", got, want)
	}
}

// fuzzReader turns fuzz input into choices and strings; past the end of
// the input every choice is 0.
type fuzzReader struct{ b []byte }

func (f *fuzzReader) byte() byte {
	if len(f.b) == 0 {
		return 0
	}
	c := f.b[0]
	f.b = f.b[1:]
	return c
}

func (f *fuzzReader) uint64() uint64 {
	var v [8]byte
	n := copy(v[:], f.b)
	f.b = f.b[n:]
	return binary.LittleEndian.Uint64(v[:])
}

// string takes up to 255 raw bytes, UTF-8 or not.
func (f *fuzzReader) string() string {
	n := min(int(f.byte()), len(f.b))
	s := string(f.b[:n])
	f.b = f.b[n:]
	return s
}

func (f *fuzzReader) value(depth int) attribute.Value {
	kind := f.byte() % 13
	if depth <= 0 && kind >= 10 {
		kind %= 10
	}
	n := int(f.byte() % 6)
	switch kind {
	case 0:
		return attribute.Value{}
	case 1:
		return attribute.BoolValue(f.byte()&1 == 1)
	case 2:
		return attribute.Int64Value(int64(f.uint64()))
	case 3:
		return attribute.Float64Value(math.Float64frombits(f.uint64()))
	case 4:
		return attribute.StringValue(f.string())
	case 5:
		return attribute.ByteSliceValue([]byte(f.string()))
	case 6:
		v := make([]bool, n)
		for i := range v {
			v[i] = f.byte()&1 == 1
		}
		return attribute.BoolSliceValue(v)
	case 7:
		v := make([]int64, n)
		for i := range v {
			v[i] = int64(f.uint64())
		}
		return attribute.Int64SliceValue(v)
	case 8:
		v := make([]float64, n)
		for i := range v {
			v[i] = math.Float64frombits(f.uint64())
		}
		return attribute.Float64SliceValue(v)
	case 9:
		v := make([]string, n)
		for i := range v {
			v[i] = f.string()
		}
		return attribute.StringSliceValue(v)
	case 10, 11:
		v := make([]attribute.Value, n)
		for i := range v {
			v[i] = f.value(depth - 1)
		}
		return attribute.SliceValue(v...)
	default:
		// A map sorts its members by key: keys already UTF-8 sort the
		// same for the encoder and, made UTF-8, for the oracle.
		kvs := f.attrs(depth-1, n)
		for i := range kvs {
			kvs[i].Key = attribute.Key(strings.ToValidUTF8(string(kvs[i].Key), "\uFFFD"))
		}
		return attribute.MapValue(kvs...)
	}
}

func (f *fuzzReader) attrs(depth, n int) []attribute.KeyValue {
	var kvs []attribute.KeyValue
	for range n {
		kvs = append(kvs, attribute.KeyValue{Key: attribute.Key(f.string()), Value: f.value(depth)})
	}
	return kvs
}

// validUTF8 is v with its strings made UTF-8 the way the encoder does, for
// the oracle, whose proto.Marshal refuses anything else.
func validUTF8(v attribute.Value) attribute.Value {
	fix := func(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }
	switch v.Type() {
	case attribute.STRING:
		return attribute.StringValue(fix(v.AsString()))
	case attribute.STRINGSLICE:
		ss := v.AsStringSlice()
		for i := range ss {
			ss[i] = fix(ss[i])
		}
		return attribute.StringSliceValue(ss)
	case attribute.SLICE:
		vs := v.AsSlice()
		for i := range vs {
			vs[i] = validUTF8(vs[i])
		}
		return attribute.SliceValue(vs...)
	case attribute.MAP:
		return attribute.MapValue(validAttrs(v.AsMap())...)
	}
	return v
}

func validAttrs(kvs []attribute.KeyValue) []attribute.KeyValue {
	var out []attribute.KeyValue
	for _, kv := range kvs {
		out = append(out, attribute.KeyValue{Key: attribute.Key(strings.ToValidUTF8(string(kv.Key), "\uFFFD")), Value: validUTF8(kv.Value)})
	}
	return out
}

// FuzzEncodeAttributes: any attribute set, on a span, its event, its link
// and its resource, encodes to bytes that decode, equal to the oracle's
// request for the same attributes (with their strings made UTF-8).
func FuzzEncodeAttributes(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("\x03\x01\x04\x05hello\x02\x00\xff\xff\xff\xff\xff\xff\xff\x7f"))
	f.Add([]byte("\x04\x0c\x03\x01k\x04\x00\x04\x02\xc3(\x0b\x02\x03\x00\x00\x00\x00\x00\x00\xf8\x7f\x09\x03\x01\xff\x00\x03abc"))
	f.Fuzz(func(t *testing.T, data []byte) {
		fr := &fuzzReader{b: data}
		n := int(fr.byte() % 16)
		attrs := fr.attrs(3, n)
		name := fr.string()
		sc := genSpanContext(rand.New(rand.NewPCG(fr.uint64(), 0)), fr.byte()&1 == 1)
		// A resource sorts its attributes by key and keeps the last of
		// equal keys, so two keys that are not UTF-8 may sort or merge
		// otherwise once made so: the resource's keys are UTF-8 already.
		var resAttrs []attribute.KeyValue
		for _, kv := range attrs {
			resAttrs = append(resAttrs, attribute.KeyValue{Key: attribute.Key(strings.ToValidUTF8(string(kv.Key), "\uFFFD")), Value: kv.Value})
		}
		build := func(name string, attrs, resAttrs []attribute.KeyValue) []sdktrace.ReadOnlySpan {
			return []sdktrace.ReadOnlySpan{tracetest.SpanStub{
				Name: name, SpanContext: sc, Parent: sc, StartTime: time.Unix(1, 2), EndTime: time.Unix(3, 4),
				Attributes: attrs,
				Events:     []sdktrace.Event{{Name: name, Attributes: attrs}},
				Links:      []sdktrace.Link{{SpanContext: sc, Attributes: attrs}},
				Status:     sdktrace.Status{Code: codes.Error, Description: name},
				Resource:   resource.NewSchemaless(resAttrs...),
			}.Snapshot()}
		}
		spans := build(name, attrs, resAttrs)
		oracle := build(strings.ToValidUTF8(name, "\uFFFD"), validAttrs(attrs), validAttrs(resAttrs))
		sameRequest(t, spans, oracle, appendExportRequest(nil, spans))
	})
}

// detourBatch is n spans shaped like detour's: a server span per request
// with the attributes Request.End sets, a client span per attempt, the
// odd skipped event and error status.
func detourBatch(n int) []sdktrace.ReadOnlySpan {
	r := rand.New(rand.NewPCG(5, 6))
	res := serviceResource()
	scope := instrumentation.Scope{Name: instrumentationName}
	spans := make([]sdktrace.ReadOnlySpan, n)
	for i := range spans {
		start := time.Unix(1_700_000_000, int64(i)*1e6)
		s := tracetest.SpanStub{
			Name: "chat gpt-4o", SpanContext: genSpanContext(r, false), Parent: genSpanContext(r, true),
			SpanKind: trace.SpanKindServer, StartTime: start, EndTime: start.Add(812 * time.Millisecond),
			Attributes: []attribute.KeyValue{
				AttrOperation.String("chat"), AttrProvider.String("openai"), AttrServerAddr.String("api.openai.com"),
				AttrRequestID.String("req_01JH4X2Z8Q7W5N3V1T9R6Y0P2M"), AttrOutcome.String("answered"), AttrHTTPStatus.Int(200),
				AttrRequestModel.String("gpt-4o"), AttrRoute.String("chat"), AttrTier.String("primary"),
				AttrAnsweredBy.String("openai-primary"), AttrInputTokens.Int64(1234), AttrOutputTokens.Int64(321),
			},
			Resource: res, InstrumentationScope: scope,
		}
		if i%2 == 1 {
			s.SpanKind = trace.SpanKindClient
			s.Attributes = s.Attributes[:7]
		}
		if i%10 == 0 {
			s.Events = []sdktrace.Event{{Name: "detour.skipped", Time: start, Attributes: []attribute.KeyValue{
				AttrUpstream.String("anthropic-backup"), AttrReason.String("cooling_down"), AttrErrorType.String("quota_exhausted")}}}
			s.Status = sdktrace.Status{Code: codes.Error, Description: "failed"}
		}
		spans[i] = s.Snapshot()
	}
	return spans
}

// TestDetourBatchMatchesTheProtocolMessages: the benchmark's batch is
// itself encoded right.
func TestDetourBatchMatchesTheProtocolMessages(t *testing.T) {
	t.Parallel()
	spans := detourBatch(64)
	sameRequest(t, spans, spans, appendExportRequest(nil, spans))
}

// BenchmarkExportRequest encodes a batch of 512 detour spans (the batch
// processor's default batch size): "proto" with the generated messages and
// proto.Marshal, as detour did, "wire" with appendExportRequest into a
// buffer sized as ExportSpans sizes it.
func BenchmarkExportRequest(b *testing.B) {
	spans := detourBatch(512)
	b.Run("proto", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := exportRequestProto(spans); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("wire", func(b *testing.B) {
		size := len(appendExportRequest(nil, spans)) / len(spans)
		b.ReportAllocs()
		for b.Loop() {
			_ = appendExportRequest(make([]byte, 0, size*len(spans)*9/8), spans)
		}
	})
}

// TestComplexAttributesUseTheirMembers: the attribute types the SDK added
// after the first OTLP conversions (bytes, a slice of values, a map, the
// empty value) go as AnyValue's members for them, not as their text.
func TestComplexAttributesUseTheirMembers(t *testing.T) {
	t.Parallel()
	spans := []sdktrace.ReadOnlySpan{tracetest.SpanStub{
		Name:        "span",
		SpanContext: genSpanContext(rand.New(rand.NewPCG(7, 8)), false),
		Attributes: []attribute.KeyValue{
			{Key: "bytes", Value: attribute.ByteSliceValue([]byte{0, 0xff})},
			{Key: "slice", Value: attribute.SliceValue(attribute.IntValue(1), attribute.StringValue("a"))},
			{Key: "map", Value: attribute.MapValue(attribute.Bool("k", true))},
			{Key: "empty"},
		},
	}.Snapshot()}
	var req coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(appendExportRequest(nil, spans), &req); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, kv := range req.ResourceSpans[0].ScopeSpans[0].Spans[0].Attributes {
		got[kv.Key] = strings.Join(strings.Fields(kv.Value.String()), " ")
	}
	for k, want := range map[string]string{"bytes": `bytes_value:"\x00\xff"`, "slice": `array_value:{values:{int_value:1} values:{string_value:"a"}}`,
		"map": `kvlist_value:{values:{key:"k" value:{bool_value:true}}}`, "empty": ""} {
		if got[k] != want {
			t.Errorf("attribute %s = %s; want %s", k, got[k], want)
		}
	}
}
