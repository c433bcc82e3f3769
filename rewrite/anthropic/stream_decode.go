package anthropic

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/detour-proxy/detour/rewrite"
	"github.com/detour-proxy/detour/rewrite/ir"
	"github.com/detour-proxy/detour/rewrite/sse"
)

// maxBlocks bounds the content block indexes a StreamDecoder tracks, so that
// a hostile index cannot make it allocate without limit. Real messages have
// a few dozen blocks at most.
const maxBlocks = 4096

// streamWire is every field of every Anthropic stream event that the
// decoder reads. One value is reused for every event.
type streamWire struct {
	Type    string `json:"type"`
	Index   int    `json:"index"`
	Message struct {
		ID    string  `json:"id"`
		Model string  `json:"model"`
		Usage inUsage `json:"usage"`
	} `json:"message"`
	ContentBlock struct {
		Type     string `json:"type"`
		ID       string `json:"id"`
		Name     string `json:"name"`
		Text     string `json:"text"`
		Thinking string `json:"thinking"`
		Data     string `json:"data"`
	} `json:"content_block"`
	Delta struct {
		Type        string `json:"type"`
		Text        string `json:"text"`
		PartialJSON string `json:"partial_json"`
		Thinking    string `json:"thinking"`
		Signature   string `json:"signature"`
		StopReason  string `json:"stop_reason"`
	} `json:"delta"`
	Usage *deltaUsage `json:"usage"`
	Error inError     `json:"error"`
}

// deltaUsage is message_delta's usage: output_tokens always, the input
// figures only when the API restates them (nil when absent).
type deltaUsage struct {
	InputTokens              *int64 `json:"input_tokens"`
	OutputTokens             int64  `json:"output_tokens"`
	CacheReadInputTokens     *int64 `json:"cache_read_input_tokens"`
	CacheCreationInputTokens *int64 `json:"cache_creation_input_tokens"`
}

// decodedBlock is what the decoder remembers of one content block.
type decodedBlock struct {
	tool    int  // the tool call's Index, or -1 for other blocks
	args    bool // a non-blank argument fragment was passed on
	stopped bool
}

// StreamDecoder turns an Anthropic Messages stream (docs/vendors.md#anthropic-stream)
// into vendor-neutral stream events, one upstream event at a time. It keeps
// what later events need: the input usage of message_start, and which
// content block is which tool call. Create one per stream; it is not safe
// for concurrent use.
type StreamDecoder struct {
	ev     streamWire
	out    []ir.StreamEvent
	blocks []decodedBlock
	tools  int
	usage  ir.TokenUsage // input figures from message_start
}

// NewStreamDecoder returns a decoder for one stream.
func NewStreamDecoder() *StreamDecoder {
	return &StreamDecoder{out: make([]ir.StreamEvent, 0, 4)}
}

// Decode returns the vendor-neutral events that ev carries: often none
// (ping, message_stop, text block starts), sometimes two (message_delta's
// finish and usage). The event kind is the `event:` name, as
// anthropic-sdk-go dispatches, or the JSON type when the name is missing or
// unknown. The returned slice is reused by the next call. Data that is not
// JSON, or a delta for a block that is not a tool call, is an error.
//
// A tool call whose arguments never come (Anthropic streams "" for a tool
// without parameters) gets "{}" when its block stops, so every consumer
// sees an object (docs/vendors.md#tool-arguments-are-always-an-object); the {} input of content_block_start
// is never passed on as a fragment.
func (d *StreamDecoder) Decode(ev sse.Event) ([]ir.StreamEvent, error) {
	d.out = d.out[:0]
	if ev.Comment {
		return d.out, nil
	}
	data := bytes.TrimSpace(ev.Data)
	typ := ev.Name
	switch typ {
	case "ping", "message_stop":
		return d.out, nil
	case "message_start", "content_block_start", "content_block_delta",
		"content_block_stop", "message_delta", "error":
	default:
		typ = "" // unknown or missing name: the JSON type decides
	}
	if len(data) == 0 {
		if typ == "error" {
			return d.streamError("", "", http.StatusInternalServerError), nil
		}
		return d.out, nil
	}
	if typ == "content_block_delta" || typ == "" {
		if index, kind, text, ok := fastDelta(data); ok {
			return d.blockDelta(index, kind, text, "")
		}
	}
	d.ev = streamWire{}
	if err := json.Unmarshal(data, &d.ev); err != nil {
		if typ == "error" {
			// A broken error event is still an error.
			return d.streamError("", "", http.StatusInternalServerError), nil
		}
		return nil, fmt.Errorf("anthropic: stream event: %w", err)
	}
	if typ == "" {
		typ = d.ev.Type
	}
	w := &d.ev
	switch typ {
	case "message_start":
		d.usage = w.Message.Usage.ir()
		d.usage.Output = 0 // message_start's output_tokens is a placeholder
		d.out = append(d.out, ir.StreamEvent{Kind: ir.StreamStart, ID: w.Message.ID, Model: w.Message.Model, Usage: d.usage})
	case "content_block_start":
		return d.blockStart(w)
	case "content_block_delta":
		dl := &w.Delta
		switch dl.Type {
		case "text_delta":
			return d.blockDelta(w.Index, dl.Type, dl.Text, "")
		case "input_json_delta":
			return d.blockDelta(w.Index, dl.Type, dl.PartialJSON, "")
		case "thinking_delta":
			return d.blockDelta(w.Index, dl.Type, dl.Thinking, "")
		case "signature_delta":
			return d.blockDelta(w.Index, dl.Type, "", dl.Signature)
		}
	case "content_block_stop":
		if b := d.block(w.Index); b != nil {
			d.stop(b)
		}
	case "message_delta":
		for i := range d.blocks {
			d.stop(&d.blocks[i]) // a tool block the upstream never stopped
		}
		if w.Delta.StopReason != "" {
			d.out = append(d.out, ir.StreamEvent{Kind: ir.StreamFinish, Finish: finishReason(w.Delta.StopReason, d.tools > 0)})
		}
		if u := w.Usage; u != nil {
			if u.InputTokens != nil || u.CacheReadInputTokens != nil || u.CacheCreationInputTokens != nil {
				// The API restates input in message_delta lately: believe it.
				in := inUsage{InputTokens: deref(u.InputTokens), CacheReadInputTokens: deref(u.CacheReadInputTokens), CacheCreationInputTokens: deref(u.CacheCreationInputTokens)}
				if in.InputTokens+in.CacheReadInputTokens+in.CacheCreationInputTokens > 0 {
					d.usage = in.ir()
				}
			}
			usage := d.usage
			usage.Output = u.OutputTokens
			d.out = append(d.out, ir.StreamEvent{Kind: ir.StreamUsage, Usage: usage})
		}
	case "error":
		return d.streamError(w.Error.Type, w.Error.Message, 0), nil
	}
	// ping, message_stop and types Anthropic may add: nothing to say.
	return d.out, nil
}

// blockStart handles content_block_start: a tool call starts; a text or
// thinking block only announces itself (its text comes in deltas).
func (d *StreamDecoder) blockStart(w *streamWire) ([]ir.StreamEvent, error) {
	i := w.Index
	if i < 0 || i >= maxBlocks {
		return nil, fmt.Errorf("anthropic: content block index %d out of range", i)
	}
	for len(d.blocks) <= i {
		d.blocks = append(d.blocks, decodedBlock{tool: -1})
	}
	cb := &w.ContentBlock
	d.blocks[i] = decodedBlock{tool: -1}
	switch cb.Type {
	case "tool_use":
		d.blocks[i].tool = d.tools
		d.out = append(d.out, ir.StreamEvent{Kind: ir.StreamToolStart, Index: d.tools, ID: ir.OriginalToolID(cb.ID), Name: cb.Name})
		d.tools++
	case "text":
		if cb.Text != "" {
			d.out = append(d.out, ir.StreamEvent{Kind: ir.StreamText, Text: cb.Text})
		}
	case "thinking":
		if cb.Thinking != "" {
			d.out = append(d.out, ir.StreamEvent{Kind: ir.StreamThinking, Text: cb.Thinking})
		}
	case "redacted_thinking":
		d.out = append(d.out, ir.StreamEvent{Kind: ir.StreamThinking, Signature: cb.Data})
	}
	return d.out, nil
}

// blockDelta handles a content_block_delta of type typ for block index:
// text is the delta's text, thinking or partial_json, sig its signature.
// citations_delta and delta types Anthropic may add carry nothing the IR
// has.
func (d *StreamDecoder) blockDelta(index int, typ, text, sig string) ([]ir.StreamEvent, error) {
	switch typ {
	case "text_delta":
		if text != "" {
			d.out = append(d.out, ir.StreamEvent{Kind: ir.StreamText, Text: text})
		}
	case "thinking_delta":
		if text != "" {
			d.out = append(d.out, ir.StreamEvent{Kind: ir.StreamThinking, Text: text})
		}
	case "signature_delta":
		if sig != "" {
			d.out = append(d.out, ir.StreamEvent{Kind: ir.StreamThinking, Signature: sig})
		}
	case "input_json_delta":
		b := d.block(index)
		if b == nil || b.tool < 0 {
			return nil, fmt.Errorf("anthropic: input_json_delta for content block %d, which is not a tool_use", index)
		}
		if !b.args && isBlank(text) {
			return d.out, nil // "" for a parameterless tool; see stop
		}
		b.args = true
		d.out = append(d.out, ir.StreamEvent{Kind: ir.StreamToolArgs, Index: b.tool, Text: text})
	}
	return d.out, nil
}

// block returns the state of content block i, or nil if it never started.
func (d *StreamDecoder) block(i int) *decodedBlock {
	if i < 0 || i >= len(d.blocks) {
		return nil
	}
	return &d.blocks[i]
}

// stop marks b stopped, giving a tool call that had no argument fragment
// its "{}".
func (d *StreamDecoder) stop(b *decodedBlock) {
	if b.stopped {
		return
	}
	b.stopped = true
	if b.tool >= 0 && !b.args {
		b.args = true
		d.out = append(d.out, ir.StreamEvent{Kind: ir.StreamToolArgs, Index: b.tool, Text: "{}"})
	}
}

// streamError is the StreamError for an in-stream error of Anthropic type
// typ. status, when not 0, overrides the status the type implies.
func (d *StreamDecoder) streamError(typ, msg string, status int) []ir.StreamEvent {
	class, st := errorClass(typ)
	if status != 0 {
		st = status
	}
	d.out = append(d.out, ir.StreamEvent{Kind: ir.StreamError, Err: &rewrite.AppError{Status: st, Class: class, Message: msg}})
	return d.out
}

// errorClass maps an Anthropic error type (docs/vendors.md#anthropic-errors) to
// detour's failure class and the status Anthropic pairs with it, so that
// the app's envelope names the same kind of error.
func errorClass(typ string) (class string, status int) {
	switch typ {
	case "overloaded_error":
		return "overloaded", 529
	case "rate_limit_error":
		return "rate_limited", http.StatusTooManyRequests
	case "billing_error":
		return "quota_exhausted", http.StatusPaymentRequired
	case "timeout_error":
		return "timeout", http.StatusGatewayTimeout
	case "authentication_error":
		return "auth", http.StatusUnauthorized
	case "permission_error":
		return "auth", http.StatusForbidden
	case "not_found_error":
		return "invalid_request", http.StatusNotFound
	case "invalid_request_error", "request_too_large", "conflict_error":
		return "invalid_request", http.StatusBadRequest
	}
	return "server_error", http.StatusInternalServerError // api_error and unknown types
}

func deref(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}
