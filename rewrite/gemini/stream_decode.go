package gemini

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/detour-proxy/detour/rewrite"
	"github.com/detour-proxy/detour/rewrite/internal/jsonscan"
	"github.com/detour-proxy/detour/rewrite/ir"
	"github.com/detour-proxy/detour/rewrite/sse"
)

// StreamDecoder decodes a streamGenerateContent?alt=sse stream, one
// sse.Event at a time, into IR stream events (docs/vendors.md#gemini-stream). Each
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

// errNotObject is the error for a chunk that is valid JSON but no object.
var errNotObject = errors.New("gemini: stream chunk is not a JSON object")

// chunk decodes one GenerateContentResponse or error envelope, appending
// to d.events. It walks the chunk with jsonscan rather than encoding/json:
// this runs once per event of every stream. The chunk is validated once
// (jsonscan.Valid, which allocates nothing), and then walked over the valid
// bytes, building only the strings the IR events carry: a text chunk costs
// two allocations (its text and the event slice) instead of eighteen.
// Keys are matched exactly, as Gemini spells them; FuzzStreamChunkOracle
// holds this path to the encoding/json one.
func (d *StreamDecoder) chunk(data []byte) error {
	data = bytes.TrimSpace(data)
	if jsonscan.Valid(data) != nil {
		return fmt.Errorf("gemini: stream chunk is not valid JSON: %.64q", data)
	}
	if data[0] != '{' {
		return errNotObject
	}
	var cands, usage, model, id, feedback, errV []byte
	it, _ := jsonscan.Object(data)
	for m, ok := it.Next(); ok; m, ok = it.Next() {
		switch {
		case m.KeyIs("candidates"):
			cands = m.Value()
		case m.KeyIs("usageMetadata"):
			usage = m.Value()
		case m.KeyIs("modelVersion"):
			model = m.Value()
		case m.KeyIs("responseId"):
			id = m.Value()
		case m.KeyIs("promptFeedback"):
			feedback = m.Value()
		case m.KeyIs("error"):
			errV = m.Value()
		}
	}
	if !jsonscan.IsNull(errV) {
		d.events = append(d.events, ir.StreamEvent{Kind: ir.StreamError, Err: streamAppError(errV)})
		return nil
	}
	if !jsonscan.IsNull(usage) {
		d.usage, d.hasUsage = scanUsage(usage), true
	}
	if !d.started {
		d.started = true
		rid := jsonscan.String(id)
		d.scope = idScope(rid, data)
		start := ir.StreamEvent{Kind: ir.StreamStart, ID: rid, Model: jsonscan.String(model)}
		if d.hasUsage {
			start.Usage = ir.TokenUsage{Input: d.usage.Input, CachedInput: d.usage.CachedInput}
		}
		d.events = append(d.events, start)
	}

	var reason string
	var n int
	list, _ := jsonscan.Array(cands)
	for e, ok := list.Next(); ok; e, ok = list.Next() {
		c := e.Value()
		n++
		var content, finish []byte
		var index int64
		ci, _ := jsonscan.Object(c)
		for m, ok := ci.Next(); ok; m, ok = ci.Next() {
			switch {
			case m.KeyIs("content"):
				content = m.Value()
			case m.KeyIs("finishReason"):
				finish = m.Value()
			case m.KeyIs("index"):
				index, _ = jsonscan.Int(m.Value())
			}
		}
		if index != 0 {
			// Another candidate's delta (candidateCount > 1): the IR
			// carries candidate 0 only.
			continue
		}
		reason = jsonscan.String(finish)
		var parts []byte
		pi, _ := jsonscan.Object(content)
		for m, ok := pi.Next(); ok; m, ok = pi.Next() {
			if m.KeyIs("parts") {
				parts = m.Value()
			}
		}
		pl, _ := jsonscan.Array(parts)
		for e, ok := pl.Next(); ok; e, ok = pl.Next() {
			d.scanPart(e.Value())
		}
		break
	}
	if n == 0 && blockReason(feedback) != "" {
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

// scanPart decodes one part of a chunk's candidate: text, thought, or a
// whole function call. Media parts have no stream event.
func (d *StreamDecoder) scanPart(p []byte) {
	var text, sig, call []byte
	var thought bool
	it, _ := jsonscan.Object(p)
	for m, ok := it.Next(); ok; m, ok = it.Next() {
		switch {
		case m.KeyIs("text"):
			text = m.Value()
		case m.KeyIs("thought"):
			thought = string(m.Value()) == "true"
		case m.KeyIs("thoughtSignature"):
			sig = m.Value()
		case m.KeyIs("functionCall"):
			call = m.Value()
		}
	}
	if !jsonscan.IsNull(call) {
		var id, name, args []byte
		ci, _ := jsonscan.Object(call)
		for m, ok := ci.Next(); ok; m, ok = ci.Next() {
			switch {
			case m.KeyIs("id"):
				id = m.Value()
			case m.KeyIs("name"):
				name = m.Value()
			case m.KeyIs("args"):
				args = m.Value()
			}
		}
		callID := jsonscan.String(id)
		if callID == "" {
			callID = ir.GeneratedToolID(d.scope, d.calls)
		}
		// Gemini sends calls whole: one start and the arguments in one
		// piece.
		d.events = append(d.events,
			ir.StreamEvent{Kind: ir.StreamToolStart, Index: d.calls, ID: callID, Name: jsonscan.String(name), Signature: jsonscan.String(sig)},
			ir.StreamEvent{Kind: ir.StreamToolArgs, Index: d.calls, Text: string(argsObject(args))},
		)
		d.calls++
		return
	}
	t := jsonscan.String(text)
	switch {
	case t == "":
	case thought:
		d.events = append(d.events, ir.StreamEvent{Kind: ir.StreamThinking, Text: t})
	default:
		d.events = append(d.events, ir.StreamEvent{Kind: ir.StreamText, Text: t})
	}
}

// scanUsage reads usageMetadata (see decodeUsage).
func scanUsage(v []byte) ir.TokenUsage {
	var u usageMetadata
	it, _ := jsonscan.Object(v)
	for m, ok := it.Next(); ok; m, ok = it.Next() {
		switch {
		case m.KeyIs("promptTokenCount"):
			u.PromptTokenCount, _ = jsonscan.Int(m.Value())
		case m.KeyIs("cachedContentTokenCount"):
			u.CachedContentTokenCount, _ = jsonscan.Int(m.Value())
		case m.KeyIs("candidatesTokenCount"):
			u.CandidatesTokenCount, _ = jsonscan.Int(m.Value())
		case m.KeyIs("thoughtsTokenCount"):
			u.ThoughtsTokenCount, _ = jsonscan.Int(m.Value())
		}
	}
	return decodeUsage(&u)
}

// blockReason returns promptFeedback.blockReason.
func blockReason(feedback []byte) string {
	it, _ := jsonscan.Object(feedback)
	var reason string
	for m, ok := it.Next(); ok; m, ok = it.Next() {
		if m.KeyIs("blockReason") {
			reason = jsonscan.String(m.Value())
		}
	}
	return reason
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
