package responses

import (
	"time"

	"github.com/detour-proxy/detour/rewrite"
	"github.com/detour-proxy/detour/rewrite/ir"
)

// StreamEncoder writes vendor-neutral stream events as the Responses
// API's typed event stream (docs/vendors.md#openai-responses-stream):
// response.created and response.in_progress first; for text,
// response.output_item.added (a message), response.content_part.added,
// response.output_text.delta…, then response.output_text.done,
// response.content_part.done and response.output_item.done when the
// message ends; for a tool call, response.output_item.added (a
// function_call), response.function_call_arguments.delta…, .done and
// response.output_item.done; and response.completed (or
// response.incomplete) with the whole response and its usage, from Close.
// Every event's `event:` line is its type, and sequence_number counts from
// 0. One item is open at a time. Create one per stream; it is not safe for
// concurrent use. A text delta costs no allocation once the message's text
// buffer has grown to hold it.
type StreamEncoder struct {
	opts    ir.StreamOptions
	started bool
	closed  bool
	seq     int64
	asm     *assembly
	open    int // index in asm.items of the open item; -1 none
	finish  ir.FinishReason
	usage   ir.TokenUsage
}

// NewStreamEncoder returns an encoder for one stream answering an app that
// asked for model o.Model.
func NewStreamEncoder(o ir.StreamOptions) *StreamEncoder {
	if o.Created == 0 {
		o.Created = time.Now().Unix()
	}
	return &StreamEncoder{opts: o, open: -1}
}

// head appends an event's first bytes, up to and including its
// sequence_number; the caller appends the rest and "}\n\n".
func (e *StreamEncoder) head(dst []byte, typ string) []byte {
	dst = append(dst, "event: "...)
	dst = append(dst, typ...)
	dst = append(dst, "\ndata: {\"type\":\""...)
	dst = append(dst, typ...)
	dst = append(dst, `","sequence_number":`...)
	dst = appendInt(dst, e.seq)
	e.seq++
	return dst
}

// Encode appends to dst the events ev becomes and returns the extended
// slice. Thinking has no place in the stream (the Responses API shows
// reasoning only as its own encrypted items) and is dropped. After a
// StreamError or Close it appends nothing.
func (e *StreamEncoder) Encode(dst []byte, ev ir.StreamEvent) []byte {
	if e.closed {
		return dst
	}
	if !e.started {
		dst = e.start(dst, ev)
	}
	switch ev.Kind {
	case ir.StreamText:
		if ev.Text == "" {
			return dst
		}
		if e.open < 0 || e.asm.items[e.open].kind != messageItem {
			dst = e.closeItem(dst)
			e.asm.text("")
			e.open = len(e.asm.items) - 1
			dst = e.itemAdded(dst)
			it := &e.asm.items[e.open]
			dst = e.head(dst, "response.content_part.added")
			dst = e.itemRef(dst, it)
			dst = append(dst, ",\"content_index\":0,\"part\":{\"type\":\"output_text\",\"text\":\"\",\"annotations\":[],\"logprobs\":[]}}\n\n"...)
		}
		it := &e.asm.items[e.open]
		it.text = append(it.text, ev.Text...)
		dst = e.head(dst, "response.output_text.delta")
		dst = e.itemRef(dst, it)
		dst = append(dst, `,"content_index":0,"delta":`...)
		dst = appendString(dst, ev.Text)
		dst = append(dst, ",\"logprobs\":[]}\n\n"...)
	case ir.StreamToolStart:
		dst = e.closeItem(dst)
		e.open = e.asm.call(ev.ID, ev.Name, "")
		e.asm.items[e.open].index = ev.Index
		dst = e.itemAdded(dst)
	case ir.StreamToolArgs:
		if e.open < 0 {
			return dst
		}
		it := &e.asm.items[e.open]
		if it.kind != callItem || it.index != ev.Index || ev.Text == "" {
			// A call whose item is done: the app has its arguments.
			return dst
		}
		it.text = append(it.text, ev.Text...)
		dst = e.head(dst, "response.function_call_arguments.delta")
		dst = e.itemRef(dst, it)
		dst = append(dst, `,"delta":`...)
		dst = appendString(dst, ev.Text)
		dst = append(dst, "}\n\n"...)
	case ir.StreamFinish:
		e.finish = ev.Finish
		dst = e.closeItem(dst)
	case ir.StreamUsage:
		e.usage = ev.Usage
	case ir.StreamStart:
		if ev.Usage.Input > 0 {
			e.usage.Input, e.usage.CachedInput = ev.Usage.Input, ev.Usage.CachedInput
		}
	case ir.StreamError:
		var appErr rewrite.AppError
		if ev.Err != nil {
			appErr = *ev.Err
		}
		return e.fail(dst, appErr)
	}
	return dst
}

// fail appends the error event and response.failed, and ends the stream:
// the error event is what openai-go hands the app, response.failed the
// terminal event that clients waiting for the response's end look for.
func (e *StreamEncoder) fail(dst []byte, appErr rewrite.AppError) []byte {
	e.closed = true
	dst = rewrite.AppendResponsesErrorEvent(dst, appErr, e.seq)
	e.seq++
	code, msg := rewrite.ResponsesErrorCode(appErr)
	dst = e.head(dst, "response.failed")
	dst = append(dst, `,"response":`...)
	dst = e.asm.responseObject(dst, e.opts.Model, e.opts.Created, "failed", "", ir.TokenUsage{}, true, &errorObject{Code: code, Message: msg})
	return append(dst, "}\n\n"...)
}

// Close appends the open item's done events and response.completed (or
// response.incomplete, for a length or content-filter finish) with the
// whole response, once; nothing after a StreamError or an earlier Close.
func (e *StreamEncoder) Close(dst []byte) []byte {
	if e.closed {
		return dst
	}
	if !e.started {
		dst = e.start(dst, ir.StreamEvent{})
	}
	dst = e.closeItem(dst)
	e.closed = true
	status := statusOf(e.finish)
	typ := "response.completed"
	if status == "incomplete" {
		typ = "response.incomplete"
	}
	dst = e.head(dst, typ)
	dst = append(dst, `,"response":`...)
	dst = e.asm.responseObject(dst, e.opts.Model, e.opts.Created, status, e.finish, e.usage, true, nil)
	return append(dst, "}\n\n"...)
}

// start appends response.created and response.in_progress.
func (e *StreamEncoder) start(dst []byte, ev ir.StreamEvent) []byte {
	e.started = true
	id, model := "", e.opts.Model
	if ev.Kind == ir.StreamStart {
		id = ev.ID
		if model == "" {
			model = ev.Model
		}
	}
	e.opts.Model = model
	e.asm = newAssembly(id)
	for _, typ := range [...]string{"response.created", "response.in_progress"} {
		dst = e.head(dst, typ)
		dst = append(dst, `,"response":`...)
		dst = e.asm.responseObject(dst, model, e.opts.Created, "in_progress", "", ir.TokenUsage{}, false, nil)
		dst = append(dst, "}\n\n"...)
	}
	return dst
}

// itemAdded appends response.output_item.added for the open item.
func (e *StreamEncoder) itemAdded(dst []byte) []byte {
	dst = e.head(dst, "response.output_item.added")
	dst = append(dst, `,"output_index":`...)
	dst = appendInt(dst, int64(e.open))
	dst = append(dst, `,"item":`...)
	dst = appendItem(dst, &e.asm.items[e.open], "in_progress")
	return append(dst, "}\n\n"...)
}

// itemRef appends an event's item_id and output_index.
func (e *StreamEncoder) itemRef(dst []byte, it *outItem) []byte {
	dst = append(dst, `,"item_id":`...)
	dst = appendString(dst, it.id)
	dst = append(dst, `,"output_index":`...)
	return appendInt(dst, int64(e.open))
}

// closeItem appends the done events of the open item, if any.
func (e *StreamEncoder) closeItem(dst []byte) []byte {
	if e.open < 0 {
		return dst
	}
	it := &e.asm.items[e.open]
	switch it.kind {
	case messageItem:
		dst = e.head(dst, "response.output_text.done")
		dst = e.itemRef(dst, it)
		dst = append(dst, `,"content_index":0,"text":`...)
		dst = appendString(dst, string(it.text))
		dst = append(dst, ",\"logprobs\":[]}\n\n"...)
		dst = e.head(dst, "response.content_part.done")
		dst = e.itemRef(dst, it)
		dst = append(dst, `,"content_index":0,"part":`...)
		dst = appendTextPart(dst, it.text)
		dst = append(dst, "}\n\n"...)
	case callItem:
		dst = e.head(dst, "response.function_call_arguments.done")
		dst = e.itemRef(dst, it)
		dst = append(dst, `,"name":`...)
		dst = appendString(dst, it.name)
		dst = append(dst, `,"arguments":`...)
		dst = appendString(dst, string(finalArgs(it.text)))
		dst = append(dst, "}\n\n"...)
	}
	dst = e.head(dst, "response.output_item.done")
	dst = append(dst, `,"output_index":`...)
	dst = appendInt(dst, int64(e.open))
	dst = append(dst, `,"item":`...)
	dst = appendItem(dst, it, "completed")
	dst = append(dst, "}\n\n"...)
	e.open = -1
	e.asm.open = -1
	return dst
}
