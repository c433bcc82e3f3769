package anthropic

import (
	"strings"

	"github.com/detour-proxy/detour/rewrite"
	"github.com/detour-proxy/detour/rewrite/ir"
)

// blockKind is the kind of the content block a StreamEncoder has open.
type blockKind uint8

const (
	noBlock blockKind = iota
	textBlock
	thinkingBlock
	toolBlock
)

// encodedTool is what a StreamEncoder remembers of one tool call.
type encodedTool struct {
	index  int  // the IR's tool call Index
	block  int  // its content block index
	args   bool // a non-blank argument fragment was sent
	closed bool // its content_block_stop was sent
}

// StreamEncoder writes vendor-neutral stream events as the Anthropic
// Messages stream anthropic-sdk-go accumulates (docs/vendors.md#anthropic-stream, docs/vendors.md#anthropic-sdk-go):
// message_start before anything else; content_block_start indexes 0, 1, 2…
// with one block open at a time; deltas and stops only for started blocks;
// every `event:` line equal to the JSON type; message_delta and
// message_stop exactly once, from Close. Create one per stream; it is not
// safe for concurrent use. Text deltas cost no allocation when dst has room.
type StreamEncoder struct {
	opts    ir.StreamOptions
	started bool
	closed  bool

	blocks int       // content blocks started so far
	open   blockKind // the open block, whose index is blocks-1
	tools  []encodedTool
	cur    int // index in tools of the open tool block

	finish    ir.FinishReason
	usage     ir.TokenUsage // latest StreamUsage
	usageSeen bool
	startIn   ir.TokenUsage // the input figures message_start reported
}

// NewStreamEncoder returns an encoder for one stream answering an app that
// asked for model o.Model.
func NewStreamEncoder(o ir.StreamOptions) *StreamEncoder {
	return &StreamEncoder{opts: o}
}

// Encode appends to dst the SSE events (each with its `event:` line) that
// ev becomes, and returns the extended slice; often none (usage and finish
// are held for the closing message_delta). After a StreamError or Close it
// appends nothing.
//
// Tool arguments: fragments go to their tool call's block as
// input_json_delta; blank fragments before the first real one are skipped,
// and a tool call that got none is given "{}" before its block stops, so
// the accumulated input is always JSON (docs/vendors.md#tool-arguments-are-always-an-object). Fragments for
// a call whose block was already stopped (by a later call or text) are
// dropped: the SDK has settled that input.
func (e *StreamEncoder) Encode(dst []byte, ev ir.StreamEvent) []byte {
	if e.closed {
		return dst
	}
	if ev.Kind == ir.StreamError {
		// The SDK turns `event: error` into an API error and stops reading:
		// no block needs closing.
		e.closed = true
		var appErr rewrite.AppError
		if ev.Err != nil {
			appErr = *ev.Err
		}
		return append(dst, rewrite.StreamErrorEvent(rewrite.Anthropic, appErr)...)
	}
	if !e.started {
		dst = e.start(dst, ev)
	}
	switch ev.Kind {
	case ir.StreamStart:
		if !e.usageSeen && ev.Usage.Input > 0 {
			// A StreamStart after other events (message_start is out):
			// its input goes into message_delta.
			e.usage.Input, e.usage.CachedInput = ev.Usage.Input, ev.Usage.CachedInput
		}
	case ir.StreamText:
		if ev.Text == "" {
			return dst
		}
		if e.open != textBlock {
			dst = e.closeBlock(dst)
			dst = e.openBlock(dst, textBlock, `{"type":"text","text":""}`)
		}
		dst = e.deltaHead(dst, e.blocks-1, "text_delta")
		dst = append(dst, `,"text":`...)
		dst = appendString(dst, ev.Text)
		dst = append(dst, "}}\n\n"...)
	case ir.StreamThinking:
		if ev.Text == "" && ev.Signature == "" {
			return dst
		}
		if e.open != thinkingBlock {
			dst = e.closeBlock(dst)
			dst = e.openBlock(dst, thinkingBlock, `{"type":"thinking","thinking":"","signature":""}`)
		}
		if ev.Text != "" {
			dst = e.deltaHead(dst, e.blocks-1, "thinking_delta")
			dst = append(dst, `,"thinking":`...)
			dst = appendString(dst, ev.Text)
			dst = append(dst, "}}\n\n"...)
		}
		if ev.Signature != "" {
			dst = e.deltaHead(dst, e.blocks-1, "signature_delta")
			dst = append(dst, `,"signature":`...)
			dst = appendString(dst, ev.Signature)
			dst = append(dst, "}}\n\n"...)
		}
	case ir.StreamToolStart:
		dst = e.closeBlock(dst)
		e.tools = append(e.tools, encodedTool{index: ev.Index, block: e.blocks})
		e.cur = len(e.tools) - 1
		dst = append(dst, "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":"...)
		dst = appendInt(dst, int64(e.blocks))
		dst = append(dst, `,"content_block":{"type":"tool_use","id":`...)
		dst = appendString(dst, ir.SafeToolID(ev.ID))
		dst = append(dst, `,"name":`...)
		dst = appendString(dst, ev.Name)
		dst = append(dst, ",\"input\":{}}}\n\n"...)
		e.blocks++
		e.open = toolBlock
	case ir.StreamToolArgs:
		t := e.tool(ev.Index)
		if t == nil || t.closed {
			// No call to put them in (the upstream never named it), or a
			// call whose block has stopped: the SDK has already settled its
			// input then. Upstreams finish one call's arguments before they
			// start the next (OpenAI), or send them whole (Gemini).
			return dst
		}
		frag := ev.Text
		if !t.args {
			frag = strings.TrimLeft(frag, " \t\r\n")
			if frag == "" {
				return dst
			}
			t.args = true
		} else if frag == "" {
			return dst
		}
		// The SDK replaces content_block_start's "{}" with the first
		// fragment and appends the rest (docs/vendors.md#anthropic-sdk-go).
		dst = e.deltaHead(dst, t.block, "input_json_delta")
		dst = append(dst, `,"partial_json":`...)
		dst = appendString(dst, frag)
		dst = append(dst, "}}\n\n"...)
	case ir.StreamFinish:
		e.finish = ev.Finish
		dst = e.closeBlock(dst)
	case ir.StreamUsage:
		e.usage = ev.Usage
		e.usageSeen = true
	}
	return dst
}

// Close appends the events that end the message — the open block's
// content_block_stop, message_delta with the stop reason and usage, and
// message_stop — and returns the extended slice. It writes them once: also
// when the upstream ended without a finish (the message then ends as
// end_turn, or tool_use after tool calls), and not at all after a
// StreamError or an earlier Close. A stream that carried nothing still
// gets its message_start first.
func (e *StreamEncoder) Close(dst []byte) []byte {
	if e.closed {
		return dst
	}
	if !e.started {
		dst = e.start(dst, ir.StreamEvent{})
	}
	dst = e.closeBlock(dst)
	e.closed = true
	dst = append(dst, "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\""...)
	dst = append(dst, stopReason(e.finish, len(e.tools) > 0)...)
	dst = append(dst, `","stop_sequence":null},"usage":{`...)
	if u := e.usage; u.Input > 0 && (u.Input != e.startIn.Input || u.CachedInput != e.startIn.CachedInput) {
		// Input known only at the end (an OpenAI upstream reports usage
		// last): the SDK takes message_delta's input_tokens when present.
		dst = append(dst, `"input_tokens":`...)
		dst = appendInt(dst, max(u.Input-u.CachedInput, 0))
		dst = append(dst, `,"cache_read_input_tokens":`...)
		dst = appendInt(dst, u.CachedInput)
		dst = append(dst, ',')
	}
	dst = append(dst, `"output_tokens":`...)
	dst = appendInt(dst, e.usage.Output)
	dst = append(dst, "}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"...)
	return dst
}

// start appends message_start, with the id, model and input usage of ev
// when it is the StreamStart.
func (e *StreamEncoder) start(dst []byte, ev ir.StreamEvent) []byte {
	e.started = true
	var id, model string
	if ev.Kind == ir.StreamStart {
		id, model = ev.ID, ev.Model
		e.startIn = ir.TokenUsage{Input: ev.Usage.Input, CachedInput: ev.Usage.CachedInput}
		e.usage = e.startIn
	}
	if e.opts.Model != "" {
		model = e.opts.Model // the SDK sees the model it asked for
	}
	dst = append(dst, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":"...)
	dst = appendString(dst, messageID(id))
	dst = append(dst, `,"type":"message","role":"assistant","content":[],"model":`...)
	dst = appendString(dst, model)
	dst = append(dst, `,"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":`...)
	dst = appendInt(dst, max(e.startIn.Input-e.startIn.CachedInput, 0))
	if e.startIn.CachedInput > 0 {
		dst = append(dst, `,"cache_read_input_tokens":`...)
		dst = appendInt(dst, e.startIn.CachedInput)
	}
	dst = append(dst, ",\"output_tokens\":0}}}\n\n"...)
	return dst
}

// openBlock appends content_block_start for a new block of kind k, whose
// content_block JSON is block.
func (e *StreamEncoder) openBlock(dst []byte, k blockKind, block string) []byte {
	dst = append(dst, "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":"...)
	dst = appendInt(dst, int64(e.blocks))
	dst = append(dst, `,"content_block":`...)
	dst = append(dst, block...)
	dst = append(dst, "}\n\n"...)
	e.blocks++
	e.open = k
	return dst
}

// closeBlock appends content_block_stop for the open block, if any; a tool
// call that got no arguments gets "{}" first.
func (e *StreamEncoder) closeBlock(dst []byte) []byte {
	if e.open == noBlock {
		return dst
	}
	if e.open == toolBlock {
		t := &e.tools[e.cur]
		if !t.args {
			t.args = true
			dst = e.deltaHead(dst, t.block, "input_json_delta")
			dst = append(dst, ",\"partial_json\":\"{}\"}}\n\n"...)
		}
		t.closed = true
	}
	dst = append(dst, "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":"...)
	dst = appendInt(dst, int64(e.blocks-1))
	dst = append(dst, "}\n\n"...)
	e.open = noBlock
	return dst
}

// deltaHead appends a content_block_delta event up to its delta's type;
// the caller appends the delta's field and "}}\n\n".
func (e *StreamEncoder) deltaHead(dst []byte, index int, typ string) []byte {
	dst = append(dst, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":"...)
	dst = appendInt(dst, int64(index))
	dst = append(dst, `,"delta":{"type":"`...)
	dst = append(dst, typ...)
	return append(dst, '"')
}

// tool returns the tool call with the IR Index i, or nil. A message has a
// handful of calls, so a scan beats a map.
func (e *StreamEncoder) tool(i int) *encodedTool {
	for j := len(e.tools) - 1; j >= 0; j-- {
		if e.tools[j].index == i {
			return &e.tools[j]
		}
	}
	return nil
}
