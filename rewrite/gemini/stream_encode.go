package gemini

import (
	"crypto/rand"
	"encoding/base64"
	"strconv"

	"github.com/detour-proxy/detour/rewrite"
	"github.com/detour-proxy/detour/rewrite/ir"
)

// StreamEncoder encodes IR stream events as the streamGenerateContent?alt=sse
// stream a Gemini app reads. go-genai is strict (docs/vendors.md#go-genai): every
// event must be "data: " + one line of JSON + a blank line; a comment, an
// event: or id: field, or a [DONE] is an error in the app. So the encoder
// writes nothing else, and no opening or closing events: Gemini has none.
//
// Each chunk is a whole GenerateContentResponse with one candidate, the
// app's model as modelVersion and one responseId throughout. Text and
// thinking go out as they come. Gemini sends function calls whole, so a
// call's StreamToolStart and StreamToolArgs fragments are buffered and sent
// as one functionCall part when the call is complete: at the next event
// that is not an argument fragment of that call, at the finish, or at
// Close. The finishReason chunk is held until the usage after it arrives,
// or Close, so that it carries the final usageMetadata as Gemini's last
// chunk does; usage that arrives before is carried by the next chunk.
//
// A StreamEncoder is created per stream and is not safe for concurrent use.
type StreamEncoder struct {
	model string
	id    string
	// suffix is `,"modelVersion":…,"responseId":…}` once the id is known.
	suffix []byte

	usage      ir.TokenUsage
	hasUsage   bool
	usageDirty bool // usage changed since a chunk last carried it

	tool    pendingTool
	hasTool bool

	finish     ir.FinishReason
	finishHeld bool
	finalSent  bool
	closed     bool
}

// pendingTool is a tool call whose arguments are still arriving.
type pendingTool struct {
	index         int
	id, name, sig string
	args          []byte
}

// NewStreamEncoder returns an encoder for one stream; o.Model is sent as
// every chunk's modelVersion.
func NewStreamEncoder(o ir.StreamOptions) *StreamEncoder {
	return &StreamEncoder{model: o.Model}
}

// Encode appends the SSE bytes for ev to dst and returns the extended
// slice; many events append nothing (StreamStart, argument fragments, the
// held finish). After a StreamError or Close it appends nothing.
func (e *StreamEncoder) Encode(dst []byte, ev ir.StreamEvent) []byte {
	if e.closed {
		return dst
	}
	if e.finalSent && ev.Kind != ir.StreamError {
		// The finishReason chunk is the stream's last for go-genai; an
		// upstream that sends content after its finish is not followed.
		return dst
	}
	switch ev.Kind {
	case ir.StreamStart:
		if e.id == "" {
			e.id = ev.ID
		}
		if ev.Usage != (ir.TokenUsage{}) {
			e.setUsage(ev.Usage)
		}
	case ir.StreamText:
		dst = e.flushTool(dst)
		if ev.Text != "" {
			dst = e.openChunk(dst)
			dst = append(dst, `{"text":`...)
			dst = appendString(dst, ev.Text)
			dst = append(dst, '}')
			dst = e.closeChunk(dst, "")
		}
	case ir.StreamThinking:
		dst = e.flushTool(dst)
		// A signature alone (Anthropic's) has no Gemini form.
		if ev.Text != "" {
			dst = e.openChunk(dst)
			dst = append(dst, `{"text":`...)
			dst = appendString(dst, ev.Text)
			dst = append(dst, `,"thought":true}`...)
			dst = e.closeChunk(dst, "")
		}
	case ir.StreamToolStart:
		dst = e.flushTool(dst)
		e.tool = pendingTool{index: ev.Index, id: ev.ID, name: ev.Name, sig: ev.Signature, args: e.tool.args[:0]}
		e.hasTool = true
	case ir.StreamToolArgs:
		if e.hasTool && e.tool.index == ev.Index {
			e.tool.args = append(e.tool.args, ev.Text...)
			break
		}
		// A fragment of no open call (or of one already sent, which
		// cannot be amended) has nowhere to go.
		dst = e.flushTool(dst)
	case ir.StreamFinish:
		dst = e.flushTool(dst)
		if !e.finalSent {
			e.finish, e.finishHeld = ev.Finish, true
		}
	case ir.StreamUsage:
		e.setUsage(ev.Usage)
		if e.finishHeld && !e.finalSent {
			dst = e.final(dst)
		}
	case ir.StreamError:
		appErr := rewrite.AppError{}
		if ev.Err != nil {
			appErr = *ev.Err
		}
		// A call still buffered may lack arguments: the app gets the error
		// instead of a guess.
		e.hasTool = false
		e.closed = true
		dst = append(dst, rewrite.StreamErrorEvent(rewrite.Gemini, appErr)...)
	}
	return dst
}

// Close appends what ends the stream: the buffered tool call, if any, and
// the finishReason chunk (STOP when the upstream ended without one), exactly
// once. It appends nothing after a StreamError or a previous Close.
func (e *StreamEncoder) Close(dst []byte) []byte {
	if e.closed {
		return dst
	}
	dst = e.flushTool(dst)
	if !e.finalSent {
		dst = e.final(dst)
	}
	e.closed = true
	return dst
}

// setUsage records usage (cumulative: the latest wins).
func (e *StreamEncoder) setUsage(u ir.TokenUsage) {
	if !e.hasUsage || u != e.usage {
		e.usageDirty = true
	}
	e.usage, e.hasUsage = u, true
}

// final appends the finishReason chunk.
func (e *StreamEncoder) final(dst []byte) []byte {
	e.finalSent, e.finishHeld = true, false
	dst = e.openChunk(dst)
	// Gemini's own last chunk has an empty text part; clients that read
	// content.parts unconditionally expect one.
	dst = append(dst, `{"text":""}`...)
	e.usageDirty = e.hasUsage // the final chunk always carries usage
	return e.closeChunk(dst, encodeFinish(e.finish))
}

// flushTool appends the buffered tool call, if any, as one functionCall
// part. Arguments that are not a JSON object are sent as {}: go-genai
// decodes args into a map.
func (e *StreamEncoder) flushTool(dst []byte) []byte {
	if !e.hasTool {
		return dst
	}
	e.hasTool = false
	t := &e.tool
	dst = e.openChunk(dst)
	dst = append(dst, `{"functionCall":{`...)
	if t.id != "" {
		dst = append(dst, `"id":`...)
		dst = appendString(dst, t.id)
		dst = append(dst, ',')
	}
	dst = append(dst, `"name":`...)
	dst = appendString(dst, t.name)
	dst = append(dst, `,"args":`...)
	if args := compactObject(t.args); args != nil {
		dst = append(dst, args...)
	} else {
		dst = append(dst, emptyObject...)
	}
	dst = append(dst, '}')
	if validSignature(t.sig) {
		dst = append(dst, `,"thoughtSignature":`...)
		dst = appendString(dst, t.sig)
	}
	dst = append(dst, '}')
	return e.closeChunk(dst, "")
}

// openChunk appends the start of a chunk, up to its first part.
func (e *StreamEncoder) openChunk(dst []byte) []byte {
	return append(dst, `data: {"candidates":[{"content":{"role":"model","parts":[`...)
}

// closeChunk appends the rest of a chunk after its parts: the finish
// reason when set, usage when it changed, modelVersion and responseId.
func (e *StreamEncoder) closeChunk(dst []byte, finish string) []byte {
	dst = append(dst, "]}"...)
	if finish != "" {
		dst = append(dst, `,"finishReason":"`...)
		dst = append(dst, finish...)
		dst = append(dst, '"')
	}
	dst = append(dst, `,"index":0}]`...)
	if e.usageDirty {
		e.usageDirty = false
		dst = appendUsage(dst, e.usage)
	}
	if e.suffix == nil {
		if e.id == "" {
			e.id = newResponseID()
		}
		e.suffix = append(e.suffix, `,"modelVersion":`...)
		e.suffix = appendString(e.suffix, e.model)
		e.suffix = append(e.suffix, `,"responseId":`...)
		e.suffix = appendString(e.suffix, e.id)
		e.suffix = append(e.suffix, '}')
	}
	dst = append(dst, e.suffix...)
	return append(dst, '\n', '\n')
}

// appendUsage appends `,"usageMetadata":{…}` for u (see encodeUsage).
func appendUsage(dst []byte, u ir.TokenUsage) []byte {
	m := encodeUsage(u)
	dst = append(dst, `,"usageMetadata":{"promptTokenCount":`...)
	dst = strconv.AppendInt(dst, m.PromptTokenCount, 10)
	dst = append(dst, `,"candidatesTokenCount":`...)
	dst = strconv.AppendInt(dst, m.CandidatesTokenCount, 10)
	dst = append(dst, `,"totalTokenCount":`...)
	dst = strconv.AppendInt(dst, m.TotalTokenCount, 10)
	if m.CachedContentTokenCount != 0 {
		dst = append(dst, `,"cachedContentTokenCount":`...)
		dst = strconv.AppendInt(dst, m.CachedContentTokenCount, 10)
	}
	if m.ThoughtsTokenCount != 0 {
		dst = append(dst, `,"thoughtsTokenCount":`...)
		dst = strconv.AppendInt(dst, m.ThoughtsTokenCount, 10)
	}
	return append(dst, '}')
}

// validSignature reports whether sig can go to a Gemini app as a
// thoughtSignature: go-genai decodes the field as []byte, which
// encoding/json reads as padded standard base64 only, and a value it cannot
// decode would fail the whole chunk. Signatures come from Gemini, which
// sends exactly that; anything else is not passed on.
func validSignature(sig string) bool {
	if sig == "" || len(sig)%4 != 0 {
		return false
	}
	for i := 0; i < len(sig); i++ {
		c := sig[i]
		switch {
		case c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '+', c == '/':
		case c == '=' && i >= len(sig)-2:
		default:
			return false
		}
	}
	_, err := base64.StdEncoding.DecodeString(sig)
	return err == nil
}

// newResponseID makes a responseId for a stream whose upstream gave none.
func newResponseID() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return "dtr" + base64.RawURLEncoding.EncodeToString(b[:])
}
