package openai

import (
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"strings"
	"time"

	"github.com/detour-proxy/detour/rewrite"
	"github.com/detour-proxy/detour/rewrite/ir"
)

// StreamEncoder writes IR stream events as the chat.completion.chunk stream
// openai-go and the other official SDKs expect (docs/vendors.md#openai-stream, docs/vendors.md#openai-go):
//
//   - one id for the whole stream (ChatCompletionAccumulator refuses a
//     chunk whose id differs), object chat.completion.chunk, one created
//     time, model = the model the app asked for;
//   - a first chunk with delta {"role":"assistant","content":""};
//   - text as delta.content, thinking as delta.reasoning_content (the
//     DeepSeek and vLLM name; openai-go ignores it);
//   - a tool call's first delta with its index, id, type and name, and
//     arguments:""; later deltas with only the index and an argument
//     fragment — the name is sent once, since the accumulator concatenates
//     names. Indexes are dense from 0 in order of appearance, so no
//     placeholder call appears in the app's list;
//   - a finish chunk with an empty delta and finish_reason, tool_calls
//     whenever calls were streamed (docs/vendors.md#finish-after-tool-calls);
//   - with IncludeUsage, a final chunk with choices:[] and the usage, sent
//     once (the accumulator sums usage across chunks), and "usage":null on
//     every other chunk; without it, no usage field at all;
//   - data: [DONE].
//
// Nothing is written after the finish chunk but the usage chunk and
// [DONE]: the accumulator overwrites finish_reason with every chunk, so a
// late delta would clear it. Create one encoder per attempt; it is not safe
// for concurrent use.
type StreamEncoder struct {
	model        string
	created      int64
	includeUsage bool

	// head is every chunk's opening up to the choices array; tail closes a
	// chunk after the choices (with "usage":null when IncludeUsage).
	head []byte
	tail string
	id   string // the stream's chunk id

	started  bool
	finished bool
	closed   bool
	calls    []encodedCall
	usage    ir.TokenUsage
}

// encodedCall is a tool call the app has been sent the first delta of.
type encodedCall struct {
	irIndex int
	args    bool // an argument fragment was sent
}

// NewStreamEncoder returns an encoder for one app stream.
func NewStreamEncoder(o ir.StreamOptions) *StreamEncoder {
	e := &StreamEncoder{model: o.Model, created: o.Created, includeUsage: o.IncludeUsage}
	if e.created == 0 {
		e.created = time.Now().Unix()
	}
	e.tail = "]}\n\n"
	if e.includeUsage {
		e.tail = `],"usage":null}` + "\n\n"
	}
	return e
}

// The fixed pieces of a chunk's choice.
const (
	choiceOpen  = `{"index":0,"delta":{`
	choiceClose = `},"finish_reason":null}`
	roleDelta   = `"role":"assistant","content":""`
)

// Encode appends the SSE bytes for ev to dst and returns the extended
// slice. Usage is held for the usage chunk; Start only opens the stream;
// StreamError writes OpenAI's in-stream error event (openai-go ends the
// stream with a StreamError) and closes the encoder. After Close or an
// error, Encode appends nothing.
func (e *StreamEncoder) Encode(dst []byte, ev ir.StreamEvent) []byte {
	if e.closed {
		return dst
	}
	switch ev.Kind {
	case ir.StreamStart:
		e.mergeUsage(ev.Usage)
		if !e.started {
			if e.model == "" {
				e.model = ev.Model
			}
			dst = e.start(dst, ev.ID)
		}
		return dst
	case ir.StreamUsage:
		e.mergeUsage(ev.Usage)
		return dst
	case ir.StreamError:
		var ae rewrite.AppError
		if ev.Err != nil {
			ae = *ev.Err
		}
		e.closed = true
		return append(dst, rewrite.StreamErrorEvent(rewrite.OpenAI, ae)...)
	}
	if e.finished {
		return dst
	}
	if !e.started {
		dst = e.start(dst, "")
	}
	switch ev.Kind {
	case ir.StreamText:
		if ev.Text == "" {
			return dst
		}
		dst = e.openChoice(dst)
		dst = append(dst, `"content":`...)
		dst = appendString(dst, ev.Text)
		return e.closeChoice(dst)
	case ir.StreamThinking:
		if ev.Text == "" {
			return dst // a signature: OpenAI has no place for it
		}
		dst = e.openChoice(dst)
		dst = append(dst, `"reasoning_content":`...)
		dst = appendString(dst, ev.Text)
		return e.closeChoice(dst)
	case ir.StreamToolStart:
		if e.call(ev.Index) >= 0 {
			return dst // the name goes once
		}
		dst, _ = e.openCall(dst, ev.Index, ev.ID, ev.Name)
		return dst
	case ir.StreamToolArgs:
		if ev.Text == "" {
			return dst
		}
		n := e.call(ev.Index)
		if n < 0 {
			// Arguments for a call that was never opened: open it, so the
			// fragment still has an id to belong to.
			dst, n = e.openCall(dst, ev.Index, "", "")
		}
		return e.appendArgs(dst, n, ev.Text)
	case ir.StreamFinish:
		return e.finish(dst, ev.Finish)
	}
	return dst
}

// Close appends the stream's closing events: the finish chunk if none was
// sent (finish_reason stop, or tool_calls after tool calls), the usage
// chunk when the app asked for usage, and data: [DONE]. It does so exactly
// once, also when the upstream ended early; after a StreamError or a
// previous Close it appends nothing.
func (e *StreamEncoder) Close(dst []byte) []byte {
	if e.closed {
		return dst
	}
	e.closed = true
	if !e.started {
		dst = e.start(dst, "")
	}
	if !e.finished {
		dst = e.finish(dst, ir.FinishStop)
	}
	if e.includeUsage {
		dst = append(dst, e.head...)
		dst = append(dst, `],"usage":{"prompt_tokens":`...)
		dst = appendInt(dst, e.usage.Input)
		dst = append(dst, `,"completion_tokens":`...)
		dst = appendInt(dst, e.usage.Output)
		dst = append(dst, `,"total_tokens":`...)
		dst = appendInt(dst, e.usage.Input+e.usage.Output)
		dst = append(dst, `,"prompt_tokens_details":{"cached_tokens":`...)
		dst = appendInt(dst, e.usage.CachedInput)
		dst = append(dst, `},"completion_tokens_details":{"reasoning_tokens":`...)
		dst = appendInt(dst, e.usage.Reasoning)
		dst = append(dst, "}}}\n\n"...)
	}
	return append(dst, "data: [DONE]\n\n"...)
}

// start builds the chunk head for the stream id and writes the role chunk.
func (e *StreamEncoder) start(dst []byte, id string) []byte {
	e.started = true
	if id == "" {
		id = newID()
	}
	e.id = chunkID(id)
	h := make([]byte, 0, 96+len(e.id)+len(e.model))
	h = append(h, `data: {"id":`...)
	h = appendString(h, e.id)
	h = append(h, `,"object":"chat.completion.chunk","created":`...)
	h = appendInt(h, e.created)
	h = append(h, `,"model":`...)
	h = appendString(h, e.model)
	h = append(h, `,"choices":[`...)
	e.head = h
	dst = e.openChoice(dst)
	dst = append(dst, roleDelta...)
	return e.closeChoice(dst)
}

func (e *StreamEncoder) openChoice(dst []byte) []byte {
	dst = append(dst, e.head...)
	return append(dst, choiceOpen...)
}

func (e *StreamEncoder) closeChoice(dst []byte) []byte {
	dst = append(dst, choiceClose...)
	return append(dst, e.tail...)
}

// call returns the position of IR tool call irIndex among the calls sent,
// which is its index in the app's stream, or -1.
func (e *StreamEncoder) call(irIndex int) int {
	for i := range e.calls {
		if e.calls[i].irIndex == irIndex {
			return i
		}
	}
	return -1
}

// openCall writes the first delta of a tool call: index, id, type, name and
// empty arguments.
func (e *StreamEncoder) openCall(dst []byte, irIndex int, id, name string) ([]byte, int) {
	n := len(e.calls)
	e.calls = append(e.calls, encodedCall{irIndex: irIndex})
	if id == "" {
		// Short, because the app sends it back, and OpenAI refuses ids
		// over 40 characters (see maxToolIDLen).
		id = "call_" + strings.TrimPrefix(e.id, idPrefix)
		if len(id) > maxToolIDLen-4 {
			id = id[:maxToolIDLen-4]
		}
		id += "_" + strconv.Itoa(n)
	}
	dst = e.openChoice(dst)
	dst = append(dst, `"tool_calls":[{"index":`...)
	dst = appendInt(dst, int64(n))
	dst = append(dst, `,"id":`...)
	dst = appendString(dst, id)
	dst = append(dst, `,"type":"function","function":{"name":`...)
	dst = appendString(dst, name)
	dst = append(dst, `,"arguments":""}}]`...)
	return e.closeChoice(dst), n
}

// appendArgs writes an argument fragment of the app's tool call n.
func (e *StreamEncoder) appendArgs(dst []byte, n int, frag string) []byte {
	e.calls[n].args = true
	dst = e.openChoice(dst)
	dst = append(dst, `"tool_calls":[{"index":`...)
	dst = appendInt(dst, int64(n))
	dst = append(dst, `,"function":{"arguments":`...)
	dst = appendString(dst, frag)
	dst = append(dst, `}}]`...)
	return e.closeChoice(dst)
}

// finish writes the finish chunk. A tool call that never got an argument
// fragment (Anthropic streams none for a parameterless tool) first gets
// "{}", so that the app can parse its arguments (docs/vendors.md#tool-arguments-are-always-an-object).
func (e *StreamEncoder) finish(dst []byte, f ir.FinishReason) []byte {
	for i := range e.calls {
		if !e.calls[i].args {
			dst = e.appendArgs(dst, i, "{}")
		}
	}
	e.finished = true
	dst = append(dst, e.head...)
	dst = append(dst, `{"index":0,"delta":{},"finish_reason":"`...)
	dst = append(dst, finishOut(f, len(e.calls) > 0)...)
	dst = append(dst, `"}`...)
	return append(dst, e.tail...)
}

// mergeUsage takes a later usage report: each figure it states replaces
// the one held (Anthropic states input at the start and output at the end;
// Gemini and OpenAI restate everything).
func (e *StreamEncoder) mergeUsage(u ir.TokenUsage) {
	if u.Input != 0 {
		e.usage.Input = u.Input
	}
	if u.Output != 0 {
		e.usage.Output = u.Output
	}
	if u.CachedInput != 0 {
		e.usage.CachedInput = u.CachedInput
	}
	if u.Reasoning != 0 {
		e.usage.Reasoning = u.Reasoning
	}
}

// newID makes an id for a stream or completion that arrived without one.
// Tests replace it to make golden files stable.
var newID = randomID

func randomID() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return "detour" + hex.EncodeToString(b[:])
}
