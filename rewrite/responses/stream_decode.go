package responses

import (
	"encoding/json"
	"fmt"

	"github.com/detour-proxy/detour/rewrite"
	"github.com/detour-proxy/detour/rewrite/ir"
	"github.com/detour-proxy/detour/rewrite/sse"
)

// streamEventIn is the members of a Responses stream event that detour
// reads, for every event type it reads.
type streamEventIn struct {
	Type        string        `json:"type"`
	Delta       string        `json:"delta"`
	ItemID      string        `json:"item_id"`
	OutputIndex int           `json:"output_index"`
	Item        *outputItemIn `json:"item"`
	Response    *responseIn   `json:"response"`
	Code        *string       `json:"code"`
	Message     string        `json:"message"`
}

// StreamDecoder turns an upstream's Responses event stream into IR stream
// events (docs/vendors.md#openai-responses-stream). Create one per
// attempt; it is not safe for concurrent use.
type StreamDecoder struct {
	started  bool
	failed   bool
	finished bool
	// calls are the function_call items seen, by output index; the IR
	// index of a call is its position here.
	calls []streamCall
	ev    streamEventIn
	out   [3]ir.StreamEvent
}

// streamCall is one function call item of the stream.
type streamCall struct {
	output int    // its output_index
	itemID string // its item id
	args   bool   // an argument delta was seen
}

// NewStreamDecoder returns a decoder for one upstream stream.
func NewStreamDecoder() *StreamDecoder { return &StreamDecoder{} }

// Decode decodes one upstream SSE event into zero or more IR events:
//
//   - response.created → StreamStart{ID, Model};
//   - response.output_text.delta and response.refusal.delta → StreamText;
//     response.reasoning_summary_text.delta and response.reasoning_text.delta
//     → StreamThinking;
//   - response.output_item.added of a function_call → StreamToolStart,
//     response.function_call_arguments.delta → StreamToolArgs (and a call
//     whose item is done without any delta gets its arguments whole);
//   - response.completed and response.incomplete → StreamFinish and
//     StreamUsage;
//   - error and response.failed → StreamError, after which the stream is
//     over;
//   - every other event → nothing.
//
// The returned slice is valid until the next call. Data that is not JSON
// is an error; the stream may go on with the next event.
func (d *StreamDecoder) Decode(ev sse.Event) ([]ir.StreamEvent, error) {
	if ev.Comment || d.failed || len(ev.Data) == 0 {
		return nil, nil
	}
	if d.started && isDeltaName(ev.Name) {
		if e, ok := fastDelta(ev.Data); ok && string(e.typ) == ev.Name {
			return d.decodeDelta(e), nil
		}
	}
	d.ev = streamEventIn{}
	if err := json.Unmarshal(ev.Data, &d.ev); err != nil {
		return nil, fmt.Errorf("responses: stream event: %w", err)
	}
	e := &d.ev
	typ := e.Type
	if typ == "" {
		typ = ev.Name
	}
	out := d.out[:0]
	if !d.started && typ != "error" {
		d.started = true
		s := ir.StreamEvent{Kind: ir.StreamStart}
		if e.Response != nil {
			s.ID, s.Model = e.Response.ID, e.Response.Model
		}
		out = append(out, s)
	}
	switch typ {
	case "response.output_text.delta", "response.refusal.delta":
		if e.Delta != "" {
			out = append(out, ir.StreamEvent{Kind: ir.StreamText, Text: e.Delta})
		}
	case "response.reasoning_summary_text.delta", "response.reasoning_text.delta":
		if e.Delta != "" {
			out = append(out, ir.StreamEvent{Kind: ir.StreamThinking, Text: e.Delta})
		}
	case "response.output_item.added":
		if e.Item != nil && e.Item.Type == "function_call" {
			d.calls = append(d.calls, streamCall{output: e.OutputIndex, itemID: e.Item.ID})
			i := len(d.calls) - 1
			out = append(out, ir.StreamEvent{Kind: ir.StreamToolStart, Index: i, ID: e.Item.CallID, Name: e.Item.Name})
			if e.Item.Arguments != "" {
				d.calls[i].args = true
				out = append(out, ir.StreamEvent{Kind: ir.StreamToolArgs, Index: i, Text: e.Item.Arguments})
			}
		}
	case "response.function_call_arguments.delta":
		if i := d.call(e.ItemID, e.OutputIndex); i >= 0 && e.Delta != "" {
			d.calls[i].args = true
			out = append(out, ir.StreamEvent{Kind: ir.StreamToolArgs, Index: i, Text: e.Delta})
		}
	case "response.output_item.done":
		if e.Item != nil && e.Item.Type == "function_call" {
			if i := d.call(e.Item.ID, e.OutputIndex); i >= 0 && !d.calls[i].args && e.Item.Arguments != "" {
				d.calls[i].args = true
				out = append(out, ir.StreamEvent{Kind: ir.StreamToolArgs, Index: i, Text: e.Item.Arguments})
			}
		}
	case "response.completed", "response.incomplete":
		if d.finished {
			break
		}
		d.finished = true
		var status string
		var details *incompleteDetails
		var usage *usageWire
		if e.Response != nil {
			status, details, usage = e.Response.Status, e.Response.IncompleteDetails, e.Response.Usage
		}
		if status == "" && typ == "response.incomplete" {
			status = "incomplete"
		}
		out = append(out, ir.StreamEvent{Kind: ir.StreamFinish, Finish: finishOf(status, details, len(d.calls) > 0)})
		if usage != nil {
			out = append(out, ir.StreamEvent{Kind: ir.StreamUsage, Usage: usageOf(usage)})
		}
	case "error", "response.failed":
		d.failed = true
		msg, code := e.Message, ""
		if e.Code != nil {
			code = *e.Code
		}
		if e.Response != nil && e.Response.Error != nil {
			msg, code = e.Response.Error.Message, e.Response.Error.Code
		}
		if msg == "" {
			msg = "upstream stream failed"
		}
		out = append(out, ir.StreamEvent{Kind: ir.StreamError, Err: &rewrite.AppError{Class: classOfCode(code), Message: msg}})
	}
	return out, nil
}

// call finds a function call by item id (or, without one, output index).
func (d *StreamDecoder) call(itemID string, output int) int {
	for i := len(d.calls) - 1; i >= 0; i-- {
		c := &d.calls[i]
		if (itemID != "" && c.itemID == itemID) || (itemID == "" && c.output == output) {
			return i
		}
	}
	return -1
}

// classOfCode maps a Responses error code onto detour's failure class
// names (rewrite.AppError.Class), "" when the code names none.
func classOfCode(code string) string {
	switch code {
	case "rate_limit_exceeded":
		return "rate_limited"
	case "insufficient_quota":
		return "quota_exhausted"
	case "server_is_overloaded", "slow_down":
		return "overloaded"
	case "context_length_exceeded":
		return "context_too_long"
	case "server_error":
		return "server_error"
	case "invalid_prompt":
		return "invalid_request"
	}
	return ""
}
