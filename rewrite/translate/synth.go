package translate

// This file makes answers that no upstream sent in this exchange — a
// cached answer replayed, a static last-resort answer — and reads an answer
// the app received back into the IR so that it can be cached. Both
// directions go through the same vendor codecs as live traffic, so a
// synthesized answer is byte for byte what a translated one would be, and
// the official SDKs read it the same way (docs/vendors.md#what-the-go-sdks-insist-on).

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/detour-proxy/detour/rewrite"
	"github.com/detour-proxy/detour/rewrite/anthropic"
	"github.com/detour-proxy/detour/rewrite/gemini"
	"github.com/detour-proxy/detour/rewrite/ir"
	"github.com/detour-proxy/detour/rewrite/openai"
	"github.com/detour-proxy/detour/rewrite/responses"
	"github.com/detour-proxy/detour/rewrite/sse"
)

// The content types of synthesized answers. The vendors add
// "; charset=utf-8" to some of them; the SDKs look at the media type only.
const (
	contentTypeJSON = "application/json"
	contentTypeSSE  = "text/event-stream"
)

// Synthesize renders r as the complete answer an app of shape app would
// get from its vendor, for the model the app asked for (r.Model when model
// is ""). Not streamed, it is the codec's EncodeResponse as
// application/json. Streamed, it is a whole SSE stream from the shape's
// stream encoder: StreamStart, one event per part in order (text,
// thinking, a tool call's start and its arguments in one piece),
// StreamFinish, StreamUsage, Close; includeUsage is OpenAI's
// stream_options.include_usage, without which OpenAI sends no usage chunk
// (the other shapes always carry usage).
//
// r is not modified. A missing ID is generated in the vendor's style
// (chatcmpl-…, msg_…, a Gemini responseId), as are missing tool call ids
// for OpenAI and Anthropic, whose apps must echo them in the tool result
// (Gemini's calls may go without one, as Gemini's own did before Gemini
// 3); Created 0 becomes now. Media parts have no stream event in any
// shape: a streamed answer leaves them out.
func Synthesize(app rewrite.Shape, model string, r *ir.Response, stream, includeUsage bool) (contentType string, body []byte, err error) {
	if r == nil {
		return "", nil, errors.New("translate: synthesize: nil response")
	}
	if !app.Valid() {
		return "", nil, fmt.Errorf("translate: synthesize: unknown shape %q", app)
	}
	r = completeAnswer(app, r)
	if model == "" {
		model = r.Model
	}
	if stream {
		return contentTypeSSE, synthesizeStream(app, model, r, includeUsage), nil
	}
	switch app {
	case rewrite.OpenAI:
		body, err = openai.EncodeResponse(r, model)
	case rewrite.Anthropic:
		body, err = anthropic.EncodeResponse(r, model)
	case rewrite.Gemini:
		body, err = gemini.EncodeResponse(r, model)
	case rewrite.OpenAIResponses:
		body, err = responses.EncodeResponse(r, model)
	}
	if err != nil {
		return "", nil, fmt.Errorf("translate: synthesize %s: %w", app, err)
	}
	return contentTypeJSON, body, nil
}

// StaticResponse is a last-resort answer in the app's shape, made when no
// upstream could answer and the policy says to answer anyway: one text
// part, finish stop, zero usage, through Synthesize. For a shape detour
// does not know it returns the bare text as text/plain, so that a caller
// always has something to write.
func StaticResponse(app rewrite.Shape, model, text string, stream, includeUsage bool) (contentType string, body []byte) {
	r := &ir.Response{
		Model:  model,
		Parts:  []ir.Part{{Kind: ir.PartText, Text: text}},
		Finish: ir.FinishStop,
	}
	ct, b, err := Synthesize(app, model, r, stream, includeUsage)
	if err != nil {
		return "text/plain; charset=utf-8", []byte(text)
	}
	return ct, b
}

// completeAnswer returns r, or a copy of it with what the vendor would
// never leave out filled in: the message id, the creation time, tool call
// ids (OpenAI and Anthropic) and the finish reason. Filling them in once,
// before encoding, keeps them the same in every chunk of a stream (the
// OpenAI encoder would otherwise make up a call id of its own).
func completeAnswer(app rewrite.Shape, r *ir.Response) *ir.Response {
	c := *r
	if c.ID == "" {
		c.ID = newAnswerID(app)
	}
	if c.Created == 0 {
		c.Created = time.Now().Unix()
	}
	hasCall := false
	copied := false
	for i := range c.Parts {
		tc := c.Parts[i].ToolCall
		if c.Parts[i].Kind != ir.PartToolCall || tc == nil {
			continue
		}
		hasCall = true
		if tc.ID != "" || app == rewrite.Gemini {
			continue
		}
		if !copied {
			// The caller's parts and calls stay as they were: a cached
			// answer is replayed many times, maybe concurrently.
			c.Parts = append([]ir.Part(nil), c.Parts...)
			copied = true
		}
		call := *tc
		call.ID = newToolCallID(app)
		c.Parts[i].ToolCall = &call
	}
	if c.Finish == "" {
		c.Finish = ir.FinishStop
		if hasCall {
			c.Finish = ir.FinishToolCalls
		}
	}
	return &c
}

// synthesizeStream encodes r (completed) as a whole stream of shape app.
func synthesizeStream(app rewrite.Shape, model string, r *ir.Response, includeUsage bool) []byte {
	o := ir.StreamOptions{Model: model, IncludeUsage: includeUsage, Created: r.Created}
	var enc streamEncoder
	switch app {
	case rewrite.OpenAI:
		enc = openai.NewStreamEncoder(o)
	case rewrite.Anthropic:
		enc = anthropic.NewStreamEncoder(o)
	case rewrite.OpenAIResponses:
		enc = responses.NewStreamEncoder(o)
	default:
		enc = gemini.NewStreamEncoder(o)
	}
	size := 1024
	for i := range r.Parts {
		size += len(r.Parts[i].Text) + 256
	}
	out := make([]byte, 0, size)
	// The start carries only the input figures, as a vendor's first event
	// does (Anthropic's message_start, Gemini's first chunk); the output
	// count comes with the finish.
	out = enc.Encode(out, ir.StreamEvent{
		Kind: ir.StreamStart, ID: r.ID, Model: r.Model,
		Usage: ir.TokenUsage{Input: r.Usage.Input, CachedInput: r.Usage.CachedInput},
	})
	calls := 0
	for i := range r.Parts {
		p := &r.Parts[i]
		switch p.Kind {
		case ir.PartText:
			out = enc.Encode(out, ir.StreamEvent{Kind: ir.StreamText, Text: p.Text})
		case ir.PartThinking:
			out = enc.Encode(out, ir.StreamEvent{Kind: ir.StreamThinking, Text: p.Text, Signature: p.Signature})
		case ir.PartToolCall:
			tc := p.ToolCall
			if tc == nil {
				continue
			}
			out = enc.Encode(out, ir.StreamEvent{Kind: ir.StreamToolStart, Index: calls, ID: tc.ID, Name: tc.Name, Signature: tc.ThoughtSignature})
			out = enc.Encode(out, ir.StreamEvent{Kind: ir.StreamToolArgs, Index: calls, Text: string(argumentsObject(tc.Arguments))})
			calls++
		}
	}
	out = enc.Encode(out, ir.StreamEvent{Kind: ir.StreamFinish, Finish: r.Finish})
	out = enc.Encode(out, ir.StreamEvent{Kind: ir.StreamUsage, Usage: r.Usage})
	return enc.Close(out)
}

// argumentsObject returns a call's arguments as compact JSON, or {} when
// they are not a JSON object: every SDK parses them as one, and the
// non-streamed encoders send the same.
func argumentsObject(args []byte) []byte {
	args = bytes.TrimSpace(args)
	if len(args) == 0 || args[0] != '{' {
		return []byte("{}")
	}
	var buf bytes.Buffer
	buf.Grow(len(args))
	if json.Compact(&buf, args) != nil {
		return []byte("{}")
	}
	return buf.Bytes()
}

// idAlphabet is what vendor ids are made of.
const idAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

// randomToken returns n characters drawn uniformly from idAlphabet.
func randomToken(n int) string {
	out := make([]byte, 0, n)
	var buf [64]byte
	for len(out) < n {
		_, _ = rand.Read(buf[:]) // crypto/rand.Read never fails (Go 1.24+)
		for _, b := range buf {
			// 248 = 4×62: rejecting the rest keeps the draw uniform.
			if b < 248 && len(out) < n {
				out = append(out, idAlphabet[b%62])
			}
		}
	}
	return string(out)
}

// newAnswerID makes a message id the way the vendor spells them:
// chatcmpl- and 29 characters (OpenAI), msg_01 and 22 (Anthropic), a bare
// 23-character responseId (Gemini). Some log pipelines and apps match on
// the prefixes.
func newAnswerID(app rewrite.Shape) string {
	switch app {
	case rewrite.OpenAI:
		return "chatcmpl-" + randomToken(29)
	case rewrite.Anthropic:
		return "msg_01" + randomToken(22)
	case rewrite.OpenAIResponses:
		return "resp_" + randomToken(48)
	}
	return randomToken(23)
}

// newToolCallID makes a tool call id in the vendor's style: call_ and 24
// characters (OpenAI, which refuses ids over 40 characters), toolu_01 and
// 22 (Anthropic, whose charset [A-Za-z0-9_-] these fit).
func newToolCallID(app rewrite.Shape) string {
	if app == rewrite.Anthropic {
		return "toolu_01" + randomToken(22)
	}
	return "call_" + randomToken(24)
}

// DecodeAnswer reads a whole answer of shape shape — a response body, or
// with stream the raw bytes of a whole SSE stream as the app received
// them — back into one ir.Response, for the response cache.
//
// Not streamed, it is the codec's DecodeResponse. Streamed, the events of
// the shape's stream decoder are gathered: consecutive text fragments into
// one text part, consecutive thinking fragments into one thinking part with
// its signature (a fragment after a signature starts a new part, as a new
// block would), tool calls by Index with their id, name, thoughtSignature
// and arguments (joined, compacted, {} when not an object, as
// DecodeResponse makes them), the finish, the latest usage, and ID and
// Model from StreamStart. For OpenAI, Created comes from the first chunk.
//
// A stream that carries an error event, has an event the decoder cannot
// read, or ends without a finish reason is an error: the cache must not
// keep a broken or cut answer. Note that a stream detour translated always
// ends with a finish, since the encoders close what the upstream left
// open; whether the upstream itself finished is for the caller to know.
func DecodeAnswer(shape rewrite.Shape, body []byte, stream bool) (*ir.Response, error) {
	if !stream {
		r, err := decodeResponse(shape, body)
		if err != nil {
			return nil, fmt.Errorf("translate: decode answer: %w", err)
		}
		if r.Parts == nil {
			r.Parts = []ir.Part{} // as a streamed answer has: "parts":[] in JSON
		}
		return r, nil
	}
	var dec streamDecoder
	switch shape {
	case rewrite.OpenAI:
		dec = openai.NewStreamDecoder()
	case rewrite.Anthropic:
		dec = anthropic.NewStreamDecoder()
	case rewrite.Gemini:
		dec = gemini.NewStreamDecoder()
	case rewrite.OpenAIResponses:
		dec = responses.NewStreamDecoder()
	default:
		return nil, fmt.Errorf("translate: decode answer: unknown shape %q", shape)
	}
	a := newAnswer()
	rd := sse.NewReader(bytes.NewReader(body))
	for {
		ev, err := rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("translate: decode %s answer stream: %w", shape, err)
		}
		if shape == rewrite.OpenAI && a.r.Created == 0 {
			// The IR's StreamStart has no creation time; OpenAI's chunks
			// all carry the same one.
			a.r.Created = chunkCreated(ev.Data)
		}
		evs, err := dec.Decode(ev)
		if err != nil {
			return nil, fmt.Errorf("translate: decode %s answer stream: %w", shape, err)
		}
		for i := range evs {
			if err := a.add(&evs[i]); err != nil {
				return nil, fmt.Errorf("translate: decode %s answer stream: %w", shape, err)
			}
		}
	}
	if err := a.finish(); err != nil {
		return nil, fmt.Errorf("translate: decode %s answer stream: %w", shape, err)
	}
	return &a.r, nil
}

// chunkCreated reads the "created" of an OpenAI chunk; 0 when there is
// none.
func chunkCreated(data []byte) int64 {
	data = bytes.TrimSpace(data)
	if len(data) == 0 || data[0] != '{' {
		return 0
	}
	var c struct {
		Created int64 `json:"created"`
	}
	if json.Unmarshal(data, &c) != nil {
		return 0
	}
	return c.Created
}

// answer gathers the events of one stream into a Response.
type answer struct {
	r         ir.Response
	started   bool
	finished  bool
	usageSeen bool
	// open is the index in r.Parts of the text or thinking part that
	// fragments of its kind go to, -1 when none; its text is in frag until
	// the part is closed, so that joining costs no quadratic copying.
	open  int
	frag  strings.Builder
	tools []answerTool
}

// answerTool is a tool call being gathered.
type answerTool struct {
	index int // the IR stream Index
	part  int // in r.Parts
	args  []byte
}

func newAnswer() *answer {
	return &answer{r: ir.Response{Parts: []ir.Part{}}, open: -1}
}

// add takes one stream event.
func (a *answer) add(e *ir.StreamEvent) error {
	switch e.Kind {
	case ir.StreamStart:
		if !a.started {
			a.started = true
			a.r.ID, a.r.Model = e.ID, e.Model
		}
		if !a.usageSeen {
			a.r.Usage = e.Usage
		}
	case ir.StreamText:
		if e.Text != "" {
			if !a.isOpen(ir.PartText) {
				a.openPart(ir.PartText)
			}
			a.frag.WriteString(e.Text)
		}
	case ir.StreamThinking:
		if e.Text != "" {
			if !a.isOpen(ir.PartThinking) || a.r.Parts[a.open].Signature != "" {
				a.openPart(ir.PartThinking)
			}
			a.frag.WriteString(e.Text)
		}
		if e.Signature != "" {
			// A signature ends its block; one after it is another block's
			// (Anthropic's redacted_thinking comes as a signature alone).
			if !a.isOpen(ir.PartThinking) || a.r.Parts[a.open].Signature != "" {
				a.openPart(ir.PartThinking)
			}
			a.r.Parts[a.open].Signature = e.Signature
		}
	case ir.StreamToolStart:
		if a.tool(e.Index) != nil {
			return nil // decoders start a call once; a repeat adds nothing
		}
		a.addTool(e.Index, &ir.ToolCall{ID: e.ID, Name: e.Name, ThoughtSignature: e.Signature})
	case ir.StreamToolArgs:
		t := a.tool(e.Index)
		if t == nil {
			// Arguments of a call never started: keep them, under a call
			// with no name, rather than lose them silently.
			t = a.addTool(e.Index, &ir.ToolCall{})
		}
		t.args = append(t.args, e.Text...)
	case ir.StreamFinish:
		a.finished = true
		a.r.Finish = e.Finish
	case ir.StreamUsage:
		// Usage is cumulative in every shape: the latest report is whole.
		a.usageSeen = true
		a.r.Usage = e.Usage
	case ir.StreamError:
		msg := "error event without a message"
		if e.Err != nil && e.Err.Message != "" {
			msg = e.Err.Message
		}
		return fmt.Errorf("the stream carries an error: %s", msg)
	}
	return nil
}

// isOpen reports whether fragments of kind k continue the open part.
func (a *answer) isOpen(k ir.PartKind) bool {
	return a.open >= 0 && a.r.Parts[a.open].Kind == k
}

// openPart closes the open part and opens a new one of kind k.
func (a *answer) openPart(k ir.PartKind) {
	a.closeOpen()
	a.r.Parts = append(a.r.Parts, ir.Part{Kind: k})
	a.open = len(a.r.Parts) - 1
}

// closeOpen moves the open part's gathered text into it.
func (a *answer) closeOpen() {
	if a.open < 0 {
		return
	}
	a.r.Parts[a.open].Text = a.frag.String()
	a.frag.Reset()
	a.open = -1
}

// addTool closes the open part and appends a tool call part.
func (a *answer) addTool(index int, tc *ir.ToolCall) *answerTool {
	a.closeOpen()
	a.r.Parts = append(a.r.Parts, ir.Part{Kind: ir.PartToolCall, ToolCall: tc})
	a.tools = append(a.tools, answerTool{index: index, part: len(a.r.Parts) - 1})
	return &a.tools[len(a.tools)-1]
}

// tool returns the call with stream Index i, or nil. An answer has a
// handful of calls: a scan beats a map.
func (a *answer) tool(i int) *answerTool {
	for j := range a.tools {
		if a.tools[j].index == i {
			return &a.tools[j]
		}
	}
	return nil
}

// finish completes the Response, or says why the stream is no answer.
func (a *answer) finish() error {
	a.closeOpen()
	for _, t := range a.tools {
		a.r.Parts[t.part].ToolCall.Arguments = json.RawMessage(argumentsObject(t.args))
	}
	if !a.finished {
		return errors.New("the stream ended without a finish reason")
	}
	return nil
}
