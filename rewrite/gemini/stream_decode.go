package gemini

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/detour-proxy/detour/rewrite"
	"github.com/detour-proxy/detour/rewrite/ir"
	"github.com/detour-proxy/detour/rewrite/sse"
)

// StreamDecoder decodes a streamGenerateContent?alt=sse stream, one
// sse.Event at a time, into IR stream events (translation.md §3 C). Each
// chunk is a whole GenerateContentResponse: text and thought parts are
// deltas, function calls arrive whole, usageMetadata is cumulative and the
// last chunk has the finishReason.
//
// Events come out in the order the IR documents: one StreamStart first
// (with the input tokens when the first chunk has them), then text,
// thinking and tool calls, then StreamFinish and StreamUsage once each.
// Gemini repeats usageMetadata in every chunk; the decoder keeps the
// latest and emits it once, when the finish reason is known (encoders
// towards OpenAI send usage once, and openai-go adds up every usage it
// sees). A later chunk with different figures emits them again, latest
// wins.
//
// A StreamDecoder is created per stream and is not safe for concurrent use.
type StreamDecoder struct {
	started  bool
	finished bool
	scope    string // of generated call ids
	calls    int    // function calls so far: the next one's Index
	usage    ir.TokenUsage
	hasUsage bool
	sentUse  bool
	sent     ir.TokenUsage // the usage last emitted
	events   []ir.StreamEvent
}

// NewStreamDecoder returns a decoder for one stream.
func NewStreamDecoder() *StreamDecoder { return &StreamDecoder{} }

// Decode decodes one event. Comments and events without data decode to
// nothing. Data is a GenerateContentResponse, an error envelope (also
// inside an array, and also as a bare JSON line, which go-genai reads as an
// error), or, for a stream requested without alt=sse, an array of chunks
// or one piece of it.
//
// An error envelope decodes to a StreamError carrying the upstream's
// status and message; a chunk that is not JSON is an error.
func (d *StreamDecoder) Decode(ev sse.Event) ([]ir.StreamEvent, error) {
	d.events = nil
	data := bytes.TrimSpace(ev.Data)
	if ev.Comment || len(data) == 0 || string(data) == "[DONE]" {
		return nil, nil
	}
	if data[0] == '[' || data[0] == ',' || data[len(data)-1] == ']' || data[len(data)-1] == ',' {
		return d.decodeArray(data)
	}
	if err := d.chunk(data); err != nil {
		return nil, err
	}
	return d.events, nil
}

// decodeArray decodes an array of chunks. Without alt=sse Gemini streams
// one JSON array, a chunk per line ("[{…},", "{…},", "{…}]"), which the SSE
// reader returns as Bare lines; a piece is decoded as the chunk it holds.
func (d *StreamDecoder) decodeArray(data []byte) ([]ir.StreamEvent, error) {
	var list []json.RawMessage
	if json.Unmarshal(data, &list) != nil {
		piece := bytes.TrimSpace(bytes.TrimRight(bytes.TrimLeft(data, "[, \t\r\n"), "], \t\r\n"))
		if len(piece) == 0 {
			return nil, nil
		}
		if err := json.Unmarshal([]byte("["+string(piece)+"]"), &list); err != nil {
			return nil, fmt.Errorf("gemini: stream chunk: %w", err)
		}
	}
	for _, el := range list {
		if err := d.chunk(el); err != nil {
			return nil, err
		}
		if n := len(d.events); n > 0 && d.events[n-1].Kind == ir.StreamError {
			break
		}
	}
	return d.events, nil
}

// chunk decodes one GenerateContentResponse or error envelope, appending
// to d.events.
func (d *StreamDecoder) chunk(data []byte) error {
	var w respBody
	if err := json.Unmarshal(data, &w); err != nil {
		return fmt.Errorf("gemini: stream chunk: %w", err)
	}
	if !isNull(w.Error) {
		d.events = append(d.events, ir.StreamEvent{Kind: ir.StreamError, Err: streamAppError(w.Error)})
		return nil
	}
	if w.UsageMetadata != nil {
		d.usage, d.hasUsage = decodeUsage(w.UsageMetadata), true
	}
	if !d.started {
		d.started = true
		d.scope = idScope(w.ResponseID, data)
		start := ir.StreamEvent{Kind: ir.StreamStart, ID: w.ResponseID, Model: w.ModelVersion}
		if d.hasUsage {
			start.Usage = ir.TokenUsage{Input: d.usage.Input, CachedInput: d.usage.CachedInput}
		}
		d.events = append(d.events, start)
	}
	var reason string
	if c := firstCandidate(w.Candidates, true); c != nil {
		reason = c.FinishReason
		if c.Content != nil {
			for _, p := range c.Content.Parts {
				d.part(p)
			}
		}
	} else if len(w.Candidates) == 0 && w.PromptFeedback != nil && w.PromptFeedback.BlockReason != "" {
		reason = "SAFETY"
	}
	if reason != "" && !d.finished {
		d.finished = true
		d.events = append(d.events, ir.StreamEvent{Kind: ir.StreamFinish, Finish: decodeFinish(reason, d.calls > 0)})
	}
	if d.finished && d.hasUsage && (!d.sentUse || d.sent != d.usage) {
		d.sentUse, d.sent = true, d.usage
		d.events = append(d.events, ir.StreamEvent{Kind: ir.StreamUsage, Usage: d.usage})
	}
	return nil
}

// part decodes one part of a chunk's candidate.
func (d *StreamDecoder) part(p respPart) {
	switch {
	case p.FunctionCall != nil:
		id := p.FunctionCall.ID
		if id == "" {
			id = ir.GeneratedToolID(d.scope, d.calls)
		}
		// Gemini sends calls whole: one start and the arguments in one
		// piece.
		d.events = append(d.events,
			ir.StreamEvent{Kind: ir.StreamToolStart, Index: d.calls, ID: id, Name: p.FunctionCall.Name, Signature: p.ThoughtSignature},
			ir.StreamEvent{Kind: ir.StreamToolArgs, Index: d.calls, Text: string(argsObject(p.FunctionCall.Args))},
		)
		d.calls++
	case p.Text == "":
	case p.Thought:
		d.events = append(d.events, ir.StreamEvent{Kind: ir.StreamThinking, Text: p.Text})
	default:
		d.events = append(d.events, ir.StreamEvent{Kind: ir.StreamText, Text: p.Text})
	}
}

// grpcStatuses maps google.rpc status names onto HTTP statuses, for an
// error envelope without a numeric code.
var grpcStatuses = map[string]int{
	"INVALID_ARGUMENT": http.StatusBadRequest, "FAILED_PRECONDITION": http.StatusBadRequest,
	"OUT_OF_RANGE": http.StatusBadRequest, "UNAUTHENTICATED": http.StatusUnauthorized,
	"PERMISSION_DENIED": http.StatusForbidden, "NOT_FOUND": http.StatusNotFound,
	"RESOURCE_EXHAUSTED": http.StatusTooManyRequests, "CANCELLED": 499,
	"INTERNAL": http.StatusInternalServerError, "UNAVAILABLE": http.StatusServiceUnavailable,
	"DEADLINE_EXCEEDED": http.StatusGatewayTimeout,
}

// streamAppError turns an in-stream error envelope's "error" value into the
// error the app is told: Gemini's code is the HTTP status, from which
// rewrite picks the class; the message is kept.
func streamAppError(raw json.RawMessage) *rewrite.AppError {
	var e wireError
	if json.Unmarshal(raw, &e) != nil {
		// "error":"text" (not Gemini's, but seen from compatible servers).
		var msg string
		_ = json.Unmarshal(raw, &msg)
		return &rewrite.AppError{Message: msg}
	}
	status := e.Code
	if status < 400 || status > 599 {
		status = grpcStatuses[e.Status]
	}
	return &rewrite.AppError{Status: status, Message: e.Message}
}
