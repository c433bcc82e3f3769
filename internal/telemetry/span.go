package telemetry

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/detour-proxy/detour/rewrite"
)

// Attribute keys. The gen_ai.* ones are the OpenTelemetry GenAI semantic
// conventions' (https://opentelemetry.io/docs/specs/semconv/gen-ai/gen-ai-spans/);
// the detour.* ones are detour's own, named as in its log line.
const (
	AttrOperation    = attribute.Key("gen_ai.operation.name")
	AttrProvider     = attribute.Key("gen_ai.provider.name")
	AttrRequestModel = attribute.Key("gen_ai.request.model")
	AttrResponseMod  = attribute.Key("gen_ai.response.model")
	AttrInputTokens  = attribute.Key("gen_ai.usage.input_tokens")
	AttrOutputTokens = attribute.Key("gen_ai.usage.output_tokens")
	AttrErrorType    = attribute.Key("error.type")
	AttrServerAddr   = attribute.Key("server.address")
	AttrHTTPStatus   = attribute.Key("http.response.status_code")

	AttrRoute      = attribute.Key("detour.route")
	AttrTier       = attribute.Key("detour.tier")
	AttrUpstream   = attribute.Key("detour.upstream")
	AttrOutcome    = attribute.Key("detour.outcome")
	AttrAnsweredBy = attribute.Key("detour.answered_by")
	AttrRetry      = attribute.Key("detour.retry")
	AttrHedge      = attribute.Key("detour.hedge")
	AttrReason     = attribute.Key("detour.reason")
	AttrRequestID  = attribute.Key("detour.request_id")
)

// Request is one app request's span. A nil *Request is a request that is
// not traced; every method accepts it.
type Request struct {
	ctx    context.Context // carries span, the attempts' parent
	span   trace.Span
	tracer trace.Tracer
	op     string
}

// RequestEnd is what the chain knows of a request when it is over.
type RequestEnd struct {
	ID, Host, Route, Tier, Model string
	// Outcome is the request's outcome (chain's Request* constants).
	Outcome    string
	AnsweredBy string
	// Status is the HTTP status the app got; 499 when it went away.
	Status int
	// ErrorType is the class of the failure that decided the answer, ""
	// when an upstream answered.
	ErrorType    string
	InputTokens  int64
	OutputTokens int64
}

// Skipped notes an upstream the chain passed over without sending it
// anything (cooling down, breaker open, no model mapping): an event on the
// request's span, since no attempt span exists for it.
func (r *Request) Skipped(upstream, class, reason string) {
	if r == nil || !r.span.IsRecording() {
		return
	}
	attrs := []attribute.KeyValue{AttrUpstream.String(upstream), AttrReason.String(reason)}
	if class != "" {
		attrs = append(attrs, AttrErrorType.String(class))
	}
	r.span.AddEvent("detour.skipped", trace.WithAttributes(attrs...))
}

// End ends the request's span.
func (r *Request) End(e RequestEnd) {
	if r == nil {
		return
	}
	if r.span.IsRecording() {
		if e.Model != "" {
			r.span.SetName(r.op + " " + e.Model)
		}
		attrs := make([]attribute.KeyValue, 0, 14)
		attrs = append(attrs,
			AttrOperation.String(r.op),
			AttrProvider.String(ProviderName(string(rewrite.ShapeOfHost(e.Host)), e.Host)),
			AttrServerAddr.String(e.Host),
			AttrRequestID.String(e.ID),
			AttrOutcome.String(e.Outcome),
			AttrHTTPStatus.Int(e.Status),
		)
		attrs = appendNonEmpty(attrs, AttrRequestModel, e.Model)
		attrs = appendNonEmpty(attrs, AttrRoute, e.Route)
		attrs = appendNonEmpty(attrs, AttrTier, e.Tier)
		attrs = appendNonEmpty(attrs, AttrAnsweredBy, e.AnsweredBy)
		attrs = appendNonEmpty(attrs, AttrErrorType, e.ErrorType)
		attrs = appendTokens(attrs, e.InputTokens, e.OutputTokens)
		r.span.SetAttributes(attrs...)
		if e.Status >= 500 || e.Outcome == "failed" {
			r.span.SetStatus(codes.Error, e.Outcome)
		}
	}
	r.span.End()
}

// Attempt is one upstream attempt's span. A nil *Attempt is an attempt
// that is not traced; every method accepts it.
type Attempt struct {
	ctx  context.Context
	span trace.Span
	op   string
	req  *Request
	// model: gen_ai.response.model is set (a stream names it in its
	// opening events; the later ones are not read for it).
	model bool
}

// AttemptStart is what the chain knows of an attempt as it is sent.
type AttemptStart struct {
	Upstream string
	// Shape is the upstream's shape; Host its base URL's host.
	Shape, Host string
	// Model is the model the upstream is asked for.
	Model string
	Retry int
	Hedge bool
}

// StartAttempt starts an attempt's span, a child of the request's.
func (r *Request) StartAttempt(start time.Time, a AttemptStart) *Attempt {
	if r == nil {
		return nil
	}
	name := r.op
	if a.Model != "" {
		name += " " + a.Model
	}
	ctx, span := r.tracer.Start(r.ctx, name, trace.WithSpanKind(trace.SpanKindClient), trace.WithTimestamp(start),
		trace.WithAttributes(
			AttrOperation.String(r.op),
			AttrProvider.String(ProviderName(a.Shape, a.Host)),
			AttrRequestModel.String(a.Model),
			AttrServerAddr.String(a.Host),
			AttrUpstream.String(a.Upstream),
			AttrRetry.Int(a.Retry),
			AttrHedge.Bool(a.Hedge),
		))
	return &Attempt{ctx: ctx, span: span, op: r.op, req: r}
}

// Inject writes the attempt's trace context into the upstream request's
// header: traceparent (and tracestate when the trace has one), replacing
// what the app sent, so that the upstream's own spans hang below this
// attempt.
func (a *Attempt) Inject(h http.Header) {
	if a == nil {
		return
	}
	propagator.Inject(a.ctx, propagation.HeaderCarrier(h))
}

// Answer reads the model that answered from a whole (non-streamed) answer
// body in shape, for gen_ai.response.model on the attempt's and the
// request's spans. Only the model name is read; nothing of the text.
func (a *Attempt) Answer(shape rewrite.Shape, body []byte) {
	if a == nil || !a.span.IsRecording() {
		return
	}
	a.setModel(responseModel(shape, body))
}

// StreamEvent reads the model that answers from one of a stream's events up
// to its first content, in shape: OpenAI's chunks and Gemini's carry it at
// the top, Anthropic's message_start and the Responses API's
// response.created in the object they open. Once it is found, or when the
// span is not recorded, an event costs a field test.
func (a *Attempt) StreamEvent(shape rewrite.Shape, data []byte) {
	if a == nil || a.model || !a.span.IsRecording() {
		return
	}
	a.setModel(streamModel(shape, data))
}

func (a *Attempt) setModel(m string) {
	if m == "" {
		return
	}
	a.model = true
	a.span.SetAttributes(AttrResponseMod.String(m))
	a.req.span.SetAttributes(AttrResponseMod.String(m))
}

// AttemptEnd is how an attempt ended.
type AttemptEnd struct {
	// Outcome is the attempt's outcome (chain's Outcome* constants).
	Outcome string
	// Class is detour's failure class, "" when it answered.
	Class  string
	Reason string
	// Status is the upstream's HTTP status; 0 when none arrived.
	Status       int
	InputTokens  int64
	OutputTokens int64
}

// End ends the attempt's span.
func (a *Attempt) End(e AttemptEnd) {
	if a == nil {
		return
	}
	if a.span.IsRecording() {
		attrs := make([]attribute.KeyValue, 0, 7)
		attrs = append(attrs, AttrOutcome.String(e.Outcome))
		if e.Status != 0 {
			attrs = append(attrs, AttrHTTPStatus.Int(e.Status))
		}
		attrs = appendNonEmpty(attrs, AttrErrorType, e.Class)
		attrs = appendNonEmpty(attrs, AttrReason, e.Reason)
		attrs = appendTokens(attrs, e.InputTokens, e.OutputTokens)
		a.span.SetAttributes(attrs...)
		if e.Class != "" && e.Outcome != "hedge_lost" && e.Outcome != "client_gone" {
			a.span.SetStatus(codes.Error, e.Class)
		}
	}
	a.span.End()
}

func appendNonEmpty(attrs []attribute.KeyValue, k attribute.Key, v string) []attribute.KeyValue {
	if v == "" {
		return attrs
	}
	return append(attrs, k.String(v))
}

func appendTokens(attrs []attribute.KeyValue, in, out int64) []attribute.KeyValue {
	if in > 0 {
		attrs = append(attrs, AttrInputTokens.Int64(in))
	}
	if out > 0 {
		attrs = append(attrs, AttrOutputTokens.Int64(out))
	}
	return attrs
}

// OperationName is gen_ai.operation.name for an API path: the conventions'
// well-known values where one fits (chat, embeddings, text_completion,
// generate_content), else the path's last segment.
func OperationName(path string) string {
	switch {
	case strings.HasSuffix(path, "/chat/completions"), strings.HasSuffix(path, "/messages"), strings.HasSuffix(path, "/responses"):
		return "chat"
	case strings.HasSuffix(path, "/embeddings"), strings.HasSuffix(path, ":embedContent"), strings.HasSuffix(path, ":batchEmbedContents"):
		return "embeddings"
	case strings.HasSuffix(path, "/completions"):
		return "text_completion"
	case strings.HasSuffix(path, ":generateContent"), strings.HasSuffix(path, ":streamGenerateContent"):
		return "generate_content"
	}
	if i := strings.LastIndexAny(path, "/:"); i >= 0 && i < len(path)-1 {
		return path[i+1:]
	}
	return "unknown"
}

// ProviderName is gen_ai.provider.name for a shape reached at host: the
// conventions' well-known values (openai, anthropic, gcp.gemini,
// gcp.vertex_ai, azure.ai.openai, aws.bedrock). An OpenAI-compatible
// server of another maker (vLLM, a gateway) is "openai", the API it
// speaks; server.address tells them apart.
func ProviderName(shape, host string) string {
	switch {
	case shape == "azure-openai" || strings.HasSuffix(host, ".openai.azure.com"):
		return "azure.ai.openai"
	case shape == "bedrock" || strings.HasPrefix(host, "bedrock-runtime."):
		return "aws.bedrock"
	case strings.HasSuffix(host, "aiplatform.googleapis.com"):
		return "gcp.vertex_ai"
	case shape == string(rewrite.Gemini):
		return "gcp.gemini"
	case shape == "":
		return "unknown"
	}
	return shape
}

// responseModel reads the answering model from an answer body: the
// top-level "model" of OpenAI and Anthropic answers, Gemini's
// "modelVersion".
func responseModel(shape rewrite.Shape, body []byte) string {
	if shape == rewrite.Gemini {
		var v struct {
			ModelVersion string `json:"modelVersion"`
		}
		if json.Unmarshal(body, &v) != nil {
			return ""
		}
		return v.ModelVersion
	}
	f, err := rewrite.PeekRequest(body)
	if err != nil {
		return ""
	}
	return f.Model
}

// streamModel is the model a stream event's data names, or "".
func streamModel(shape rewrite.Shape, data []byte) string {
	if shape == rewrite.Gemini {
		return responseModel(shape, data)
	}
	var v struct {
		Model    string                 `json:"model"`
		Message  struct{ Model string } `json:"message"`
		Response struct{ Model string } `json:"response"`
	}
	if json.Unmarshal(data, &v) != nil {
		return ""
	}
	for _, m := range []string{v.Model, v.Message.Model, v.Response.Model} {
		if m != "" {
			return m
		}
	}
	return ""
}
