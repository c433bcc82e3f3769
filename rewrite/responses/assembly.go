package responses

import (
	"strings"

	"github.com/detour-proxy/detour/rewrite/ir"
)

// itemKind is the kind of one output item detour writes.
type itemKind uint8

const (
	messageItem itemKind = iota + 1
	callItem
)

// outItem is one output item being written: an assistant message (its
// text so far) or a function call (its arguments so far).
type outItem struct {
	kind   itemKind
	id     string
	text   []byte // message text, or call arguments
	callID string
	name   string
	index  int // a call's IR tool index
}

// assembly collects a response's output items, for the whole response
// object (EncodeResponse, and the stream's response.completed).
type assembly struct {
	respID string
	items  []outItem
	open   int // index in items of the message still taking text; -1 none
}

func newAssembly(id string) *assembly {
	return &assembly{respID: responseID(id), open: -1}
}

// responseID is id in the Responses API's "resp_" form. Ids of other
// vendors are kept behind the prefix so that a log line can be matched to
// the upstream's.
func responseID(id string) string {
	switch {
	case id == "":
		return "resp_detour"
	case strings.HasPrefix(id, "resp_"):
		return id
	}
	return "resp_" + ir.SafeToolID(id)
}

// itemID makes the id of output item n: msg_… or fc_… followed by the
// response id's suffix, so that ids are unique per response and stable
// across a retry of the same answer.
func (a *assembly) itemID(prefix string, n int) string {
	var b strings.Builder
	b.Grow(len(prefix) + len(a.respID) + 4)
	b.WriteString(prefix)
	b.WriteString(strings.TrimPrefix(a.respID, "resp_"))
	b.WriteByte('_')
	b.WriteString(itoa(n))
	return b.String()
}

func itoa(n int) string { return string(appendInt(nil, int64(n))) }

// text adds text to the open message, opening one if needed; it reports
// whether a message was opened.
func (a *assembly) text(s string) bool {
	opened := false
	if a.open < 0 {
		a.items = append(a.items, outItem{kind: messageItem, id: a.itemID("msg_", len(a.items))})
		a.open = len(a.items) - 1
		opened = true
	}
	it := &a.items[a.open]
	it.text = append(it.text, s...)
	return opened
}

// endMessage closes the open message, if any.
func (a *assembly) endMessage() { a.open = -1 }

// call adds a function call item and returns its index.
func (a *assembly) call(callID, name, args string) int {
	a.open = -1
	if callID == "" {
		callID = "call_" + strings.TrimPrefix(a.respID, "resp_") + "_" + itoa(len(a.items))
	}
	a.items = append(a.items, outItem{kind: callItem, id: a.itemID("fc_", len(a.items)), callID: callID, name: name, text: []byte(args)})
	return len(a.items) - 1
}

// appendItem appends item it as JSON with the given status.
func appendItem(dst []byte, it *outItem, status string) []byte {
	switch it.kind {
	case messageItem:
		dst = append(dst, `{"id":`...)
		dst = appendString(dst, it.id)
		dst = append(dst, `,"type":"message","status":"`...)
		dst = append(dst, status...)
		dst = append(dst, `","role":"assistant","content":[`...)
		if status == "completed" {
			dst = appendTextPart(dst, it.text)
		}
		return append(dst, "]}"...)
	}
	dst = append(dst, `{"id":`...)
	dst = appendString(dst, it.id)
	dst = append(dst, `,"type":"function_call","status":"`...)
	dst = append(dst, status...)
	dst = append(dst, `","call_id":`...)
	dst = appendString(dst, it.callID)
	dst = append(dst, `,"name":`...)
	dst = appendString(dst, it.name)
	dst = append(dst, `,"arguments":`...)
	if status == "completed" {
		dst = appendString(dst, string(finalArgs(it.text)))
	} else {
		dst = append(dst, `""`...)
	}
	return append(dst, '}')
}

// finalArgs is a call's argument string as the done events carry it:
// "{}" for a call that got none, so the app can always parse it.
func finalArgs(b []byte) []byte {
	if len(strings.TrimSpace(string(b))) == 0 {
		return []byte("{}")
	}
	return b
}

// appendTextPart appends one output_text content part.
func appendTextPart(dst []byte, text []byte) []byte {
	dst = append(dst, `{"type":"output_text","text":`...)
	dst = appendString(dst, string(text))
	return append(dst, `,"annotations":[],"logprobs":[]}`...)
}

// responseObject appends the response object: dst nil makes a new slice.
// output says whether the items are listed (the stream's opening events
// list none); e is the error of a failed response.
func (a *assembly) responseObject(dst []byte, model string, created int64, status string, finish ir.FinishReason, u ir.TokenUsage, output bool, e *errorObject) []byte {
	dst = append(dst, `{"id":`...)
	dst = appendString(dst, a.respID)
	dst = append(dst, `,"object":"response","created_at":`...)
	dst = appendInt(dst, created)
	dst = append(dst, `,"status":"`...)
	dst = append(dst, status...)
	dst = append(dst, `","background":false,"error":`...)
	if e != nil {
		dst = append(dst, `{"code":`...)
		dst = appendString(dst, e.Code)
		dst = append(dst, `,"message":`...)
		dst = appendString(dst, e.Message)
		dst = append(dst, '}')
	} else {
		dst = append(dst, "null"...)
	}
	dst = append(dst, `,"incomplete_details":`...)
	switch {
	case status != "incomplete":
		dst = append(dst, "null"...)
	case finish == ir.FinishContentFilter:
		dst = append(dst, `{"reason":"content_filter"}`...)
	default:
		dst = append(dst, `{"reason":"max_output_tokens"}`...)
	}
	dst = append(dst, `,"instructions":null,"metadata":{},"model":`...)
	dst = appendString(dst, model)
	dst = append(dst, `,"output":[`...)
	if output {
		for i := range a.items {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendItem(dst, &a.items[i], "completed")
		}
	}
	dst = append(dst, `],"parallel_tool_calls":true,"previous_response_id":null,"store":false,"temperature":null,"text":{"format":{"type":"text"}},"tool_choice":"auto","tools":[],"top_p":null,"truncation":"disabled","usage":`...)
	if status == "in_progress" || status == "failed" {
		dst = append(dst, "null"...)
	} else {
		dst = appendUsage(dst, u)
	}
	return append(dst, '}')
}

// appendUsage appends the Responses usage object.
func appendUsage(dst []byte, u ir.TokenUsage) []byte {
	dst = append(dst, `{"input_tokens":`...)
	dst = appendInt(dst, u.Input)
	dst = append(dst, `,"input_tokens_details":{"cached_tokens":`...)
	dst = appendInt(dst, u.CachedInput)
	dst = append(dst, `},"output_tokens":`...)
	dst = appendInt(dst, u.Output)
	dst = append(dst, `,"output_tokens_details":{"reasoning_tokens":`...)
	dst = appendInt(dst, u.Reasoning)
	dst = append(dst, `},"total_tokens":`...)
	dst = appendInt(dst, u.Input+u.Output)
	return append(dst, '}')
}
