// Package translate carries one request across vendor shapes: the app's
// request into an upstream's shape, and the upstream's answer — whole or
// event by event — back into the app's. A translation is a decoder of one
// vendor package (rewrite/openai, rewrite/anthropic, rewrite/gemini) and an
// encoder of another, meeting in rewrite/ir.
//
// A Stream is created per attempt and holds that attempt's state; nothing
// here is shared between requests, so a retry simply makes a new one.
package translate

import (
	"fmt"

	"github.com/detour-proxy/detour/rewrite"
	"github.com/detour-proxy/detour/rewrite/anthropic"
	"github.com/detour-proxy/detour/rewrite/bedrock"
	"github.com/detour-proxy/detour/rewrite/gemini"
	"github.com/detour-proxy/detour/rewrite/ir"
	"github.com/detour-proxy/detour/rewrite/openai"
	"github.com/detour-proxy/detour/rewrite/responses"
	"github.com/detour-proxy/detour/rewrite/sse"
)

// DecodeRequest decodes an app's request of shape app. path is the request
// path relative to the vendor's API root (Gemini carries the model and the
// streaming choice in it).
func DecodeRequest(app rewrite.Shape, body []byte, path string) (*ir.Request, error) {
	if ok, batch := EmbedEndpoint(app, path); ok {
		return decodeEmbedRequest(app, body, path, batch)
	}
	switch app {
	case rewrite.OpenAI:
		return openai.DecodeRequest(body)
	case rewrite.Anthropic:
		return anthropic.DecodeRequest(body)
	case rewrite.Gemini:
		model, method, ok := rewrite.GeminiModelFromPath(path)
		if !ok {
			return nil, fmt.Errorf("not a Gemini model endpoint: %s", path)
		}
		return gemini.DecodeRequest(body, model, method == "streamGenerateContent")
	case rewrite.OpenAIResponses:
		return responses.DecodeRequest(body)
	}
	return nil, fmt.Errorf("unknown shape %q", app)
}

// Upstream is an encoded request for an upstream.
type Upstream struct {
	// Path is relative to the upstream's base_url.
	Path string
	// RawQuery is the query to send ("alt=sse" for Gemini streams).
	RawQuery string
	Body     []byte
}

// EncodeRequest encodes req for an upstream of shape up. An
// *ir.UnsupportedError means this upstream cannot take the request.
func EncodeRequest(req *ir.Request, up rewrite.Shape, o ir.EncodeOptions) (Upstream, error) {
	if req.Embed != nil {
		return encodeEmbedRequest(req, up, o)
	}
	switch up {
	case rewrite.OpenAI:
		b, err := openai.EncodeRequest(req, o)
		return Upstream{Path: "/chat/completions", Body: b}, err
	case rewrite.Anthropic:
		b, err := anthropic.EncodeRequest(req, o)
		return Upstream{Path: "/v1/messages", Body: b}, err
	case rewrite.Gemini:
		b, err := gemini.EncodeRequest(req, o)
		u := Upstream{Path: "/v1beta/models/" + o.Model + ":generateContent", Body: b}
		if req.Stream {
			u.Path = "/v1beta/models/" + o.Model + ":streamGenerateContent"
			u.RawQuery = "alt=sse"
		}
		return u, err
	case rewrite.Bedrock:
		b, err := bedrock.EncodeRequest(req, o)
		return Upstream{Path: bedrock.Path(o.Model, req.Stream), Body: b}, err
	case rewrite.OpenAIResponses:
		b, err := responses.EncodeRequest(req, o)
		return Upstream{Path: rewrite.ResponsesPath, Body: b}, err
	}
	return Upstream{}, fmt.Errorf("unknown shape %q", up)
}

// Response translates an upstream's whole answer of shape up into the
// app's shape. req is the app's request (its model is echoed back, and its
// JSON mode decides whether Anthropic's forced JSON tool is unwrapped).
func Response(req *ir.Request, app, up rewrite.Shape, body []byte) ([]byte, error) {
	if req.Embed != nil {
		return embedResponse(req, app, up, body)
	}
	r, err := decodeResponse(up, body)
	if err != nil {
		return nil, err
	}
	if up == rewrite.Anthropic && req.ResponseFormat != nil {
		unwrapJSONTool(r)
	}
	switch app {
	case rewrite.OpenAI:
		return openai.EncodeResponse(r, req.Model)
	case rewrite.Anthropic:
		return anthropic.EncodeResponse(r, req.Model)
	case rewrite.Gemini:
		return gemini.EncodeResponse(r, req.Model)
	case rewrite.OpenAIResponses:
		return responses.EncodeResponse(r, req.Model)
	}
	return nil, fmt.Errorf("unknown shape %q", app)
}

// decodeResponse decodes a whole answer of shape into IR.
func decodeResponse(shape rewrite.Shape, body []byte) (*ir.Response, error) {
	switch shape {
	case rewrite.OpenAI:
		return openai.DecodeResponse(body)
	case rewrite.Anthropic:
		return anthropic.DecodeResponse(body)
	case rewrite.Gemini:
		return gemini.DecodeResponse(body)
	case rewrite.Bedrock:
		return bedrock.DecodeResponse(body)
	case rewrite.OpenAIResponses:
		return responses.DecodeResponse(body)
	}
	return nil, fmt.Errorf("unknown shape %q", shape)
}

// unwrapJSONTool turns the forced JSON tool's call back into the text the
// app asked for with response_format (docs/vendors.md#request-fields, litellm's trick).
func unwrapJSONTool(r *ir.Response) {
	for i, p := range r.Parts {
		if p.Kind == ir.PartToolCall && p.ToolCall != nil && p.ToolCall.Name == anthropic.JSONToolName {
			r.Parts[i] = ir.Part{Kind: ir.PartText, Text: string(p.ToolCall.Arguments)}
			if r.Finish == ir.FinishToolCalls {
				r.Finish = ir.FinishStop
			}
		}
	}
}

type streamDecoder interface {
	Decode(ev sse.Event) ([]ir.StreamEvent, error)
}

type streamEncoder interface {
	Encode(dst []byte, ev ir.StreamEvent) []byte
	Close(dst []byte) []byte
}

// Stream translates an upstream stream of one shape into the app's, event
// by event, buffering nothing beyond the event at hand (except what the
// target's format forces: Gemini tool calls are sent whole).
type Stream struct {
	dec streamDecoder
	enc streamEncoder
	// jsonTool is the index of Anthropic's forced JSON tool call, whose
	// argument fragments become text; -1 when there is none.
	unwrap   bool
	jsonTool int
}

// NewStream returns a translator from an upstream stream of shape up to the
// app's shape, for the app's request req.
func NewStream(req *ir.Request, app, up rewrite.Shape) *Stream {
	s := &Stream{jsonTool: -1, unwrap: up == rewrite.Anthropic && req.ResponseFormat != nil}
	switch up {
	case rewrite.OpenAI:
		s.dec = openai.NewStreamDecoder()
	case rewrite.Anthropic:
		s.dec = anthropic.NewStreamDecoder()
	case rewrite.Gemini:
		s.dec = gemini.NewStreamDecoder()
	case rewrite.Bedrock:
		s.dec = bedrock.NewStreamDecoder()
	case rewrite.OpenAIResponses:
		s.dec = responses.NewStreamDecoder()
	}
	o := ir.StreamOptions{Model: req.Model, IncludeUsage: req.IncludeUsage}
	switch app {
	case rewrite.OpenAI:
		s.enc = openai.NewStreamEncoder(o)
	case rewrite.Anthropic:
		s.enc = anthropic.NewStreamEncoder(o)
	case rewrite.Gemini:
		s.enc = gemini.NewStreamEncoder(o)
	case rewrite.OpenAIResponses:
		s.enc = responses.NewStreamEncoder(o)
	}
	return s
}

// Event translates one upstream event, appending the app's bytes to dst. It
// also returns the decoded events, so the caller can tell content from
// errors.
func (s *Stream) Event(dst []byte, ev sse.Event) ([]byte, []ir.StreamEvent, error) {
	evs, err := s.dec.Decode(ev)
	if err != nil {
		return dst, nil, err
	}
	for _, e := range evs {
		if s.unwrap {
			switch {
			case e.Kind == ir.StreamToolStart && e.Name == anthropic.JSONToolName:
				s.jsonTool = e.Index
				continue
			case e.Kind == ir.StreamToolArgs && e.Index == s.jsonTool:
				e = ir.StreamEvent{Kind: ir.StreamText, Text: e.Text}
			case e.Kind == ir.StreamFinish && s.jsonTool >= 0 && e.Finish == ir.FinishToolCalls:
				e.Finish = ir.FinishStop
			}
		}
		dst = s.enc.Encode(dst, e)
	}
	return dst, evs, nil
}

// Close appends the app stream's closing events (exactly once).
func (s *Stream) Close(dst []byte) []byte { return s.enc.Close(dst) }

// Error appends an in-stream error in the app's shape and closes the stream.
func (s *Stream) Error(dst []byte, e rewrite.AppError) []byte {
	return s.enc.Encode(dst, ir.StreamEvent{Kind: ir.StreamError, Err: &e})
}

// ErrorBody translates an upstream's error answer (status and body in the
// upstream's envelope) into the app's envelope, keeping the vendor's own
// message. class is detour's failure class, which picks the app vendor's
// error type.
func ErrorBody(app rewrite.Shape, status int, class string, upstreamBody []byte) (int, []byte) {
	info := rewrite.ParseError(upstreamBody)
	msg := info.Message
	if msg == "" {
		msg = fmt.Sprintf("upstream answered %d", status)
	}
	return rewrite.ErrorBody(app, rewrite.AppError{Status: status, Class: class, Message: msg})
}

// compile-time checks that the vendor packages fit the interfaces.
var (
	_ streamDecoder = (*openai.StreamDecoder)(nil)
	_ streamDecoder = (*anthropic.StreamDecoder)(nil)
	_ streamDecoder = (*gemini.StreamDecoder)(nil)
	_ streamDecoder = (*bedrock.StreamDecoder)(nil)
	_ streamEncoder = (*openai.StreamEncoder)(nil)
	_ streamEncoder = (*anthropic.StreamEncoder)(nil)
	_ streamEncoder = (*gemini.StreamEncoder)(nil)
	_ streamDecoder = (*responses.StreamDecoder)(nil)
	_ streamEncoder = (*responses.StreamEncoder)(nil)
)
