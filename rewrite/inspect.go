package rewrite

import (
	"bytes"

	"github.com/detour-proxy/detour/rewrite/internal/jsonscan"
	"github.com/detour-proxy/detour/rewrite/sse"
)

// EventKind says what one stream event means for the commit point: detour
// holds a stream's events until the first one that carries content, so that
// an error the upstream sends right after its 200 can still fail over.
type EventKind int

// The kinds of event, from the commit point's point of view.
const (
	// EventMeta carries no content yet: an opening event, a keep-alive, a
	// role-only chunk. Holding it costs the app nothing.
	EventMeta EventKind = iota
	// EventContent carries content (text, a tool call, a finish reason,
	// usage): the app must see it, so the stream commits.
	EventContent
	// EventError is an error the upstream sent inside a 200 stream.
	// Before the commit point it is a reason to fail over.
	EventError
	// EventDone marks the end of the stream (OpenAI "[DONE]", Anthropic
	// message_stop). A stream that ends without content also commits: an
	// empty answer is still an answer.
	EventDone
)

// String returns the kind's name, for logs and test failures.
func (k EventKind) String() string {
	switch k {
	case EventMeta:
		return "meta"
	case EventContent:
		return "content"
	case EventError:
		return "error"
	case EventDone:
		return "done"
	}
	return "EventKind(?)"
}

// InspectEvent classifies one stream event of the given shape.
//
// Events detour cannot read — data that is not JSON, JSON of an unexpected
// form, an event name the vendor does not send, or an unknown shape — are
// EventContent. Holding them until something recognisable arrives could hold
// the whole stream (and the app's first token) to the end, and they are no
// known failure signal to fail over on; the app's SDK is the better judge.
// An error is believed as soon as it is seen, even if the JSON after it is
// broken: a truncated error event is still an error.
//
// Only the few events before the commit point need inspecting, and even
// those are not decoded: the event name or a byte comparison decides where it
// can, and otherwise a scan over the JSON (jsonscan.Scan) looks at the handful of
// fields that matter and allocates nothing.
func InspectEvent(shape Shape, ev sse.Event) EventKind {
	if ev.Comment {
		return EventMeta
	}
	data := bytes.TrimSpace(ev.Data)
	switch shape {
	case OpenAI:
		return inspectOpenAI(data)
	case Anthropic:
		return inspectAnthropic(ev.Name, data)
	case Gemini:
		return inspectGemini(data)
	case Bedrock:
		return inspectBedrock(ev.Name)
	case OpenAIResponses:
		return inspectResponses(ev.Name, data)
	}
	return EventContent
}

// isEmptyJSONValue reports whether v, one valid JSON value, carries nothing:
// null, "", [] or {}.
func isEmptyJSONValue(v []byte) bool {
	if len(v) == 0 || string(v) == "null" || string(v) == `""` {
		return true
	}
	if v[0] == '[' || v[0] == '{' {
		return len(bytes.TrimSpace(v[1:len(v)-1])) == 0
	}
	return false
}

var openAIDoneMarker = []byte("[DONE]")

func inspectOpenAI(data []byte) EventKind {
	if len(data) == 0 {
		return EventMeta
	}
	if bytes.Equal(data, openAIDoneMarker) {
		return EventDone
	}
	it, ok := jsonscan.Scan(data)
	if !ok || !it.IsObject() {
		return EventContent
	}
	// isChunk: the event has the form of a chat.completion.chunk. Only such
	// a chunk can be meta; JSON of another form (say, Responses API events
	// from a misconfigured upstream) would otherwise be held to the end.
	var isChunk, content bool
	for {
		m, ok := it.Next()
		if !ok {
			break
		}
		switch {
		case m.KeyIs("error"):
			// Wins over anything else in the chunk: OpenRouter sends
			// "error" with a choice whose finish_reason is "error".
			if !isEmptyJSONValue(m.Value()) {
				return EventError
			}
		case m.KeyIs("usage"):
			content = content || !isEmptyJSONValue(m.Value())
		case m.KeyIs("choices"):
			isChunk = m.Value()[0] == '['
			content = content || openAIChoicesHaveContent(m.Value())
		}
	}
	if content || !isChunk || it.End() != nil {
		return EventContent
	}
	return EventMeta
}

// openAIChoicesHaveContent reports whether any choice of a chunk has a
// finish_reason or a delta field that carries content.
func openAIChoicesHaveContent(choices []byte) bool {
	it, ok := jsonscan.Scan(choices)
	if !ok {
		return false
	}
	for {
		choice, ok := it.Next()
		if !ok {
			return false
		}
		fields, ok := jsonscan.Scan(choice.Value())
		if !ok {
			continue
		}
		for {
			f, ok := fields.Next()
			if !ok {
				break
			}
			if f.KeyIs("finish_reason") && !isEmptyJSONValue(f.Value()) {
				return true
			}
			if f.KeyIs("delta") && openAIDeltaHasContent(f.Value()) {
				return true
			}
		}
	}
}

func openAIDeltaHasContent(delta []byte) bool {
	it, ok := jsonscan.Scan(delta)
	if !ok {
		return false
	}
	for {
		f, ok := it.Next()
		if !ok {
			return false
		}
		if isEmptyJSONValue(f.Value()) {
			continue
		}
		if f.KeyIs("content") || f.KeyIs("refusal") || f.KeyIs("tool_calls") ||
			f.KeyIs("reasoning_content") || // DeepSeek, vLLM
			f.KeyIs("reasoning") || // OpenRouter, newer vLLM
			f.KeyIs("function_call") || // the legacy functions API
			f.KeyIs("audio") {
			return true
		}
	}
}

// anthropicEventKind classifies an Anthropic event by its type, which is
// both the SSE event name and the JSON "type". block is true for
// content_block_start, whose kind depends on the block. known is false for
// types Anthropic does not document.
func anthropicEventKind(typ string) (kind EventKind, block, known bool) {
	k, known := anthropicEventKinds[typ]
	if !known {
		return EventContent, false, false
	}
	return k.kind, k.block, true
}

// anthropicEventKinds is a map rather than a switch so that a type read
// from JSON can be looked up as anthropicEventKinds[string(b)], which Go
// does without allocating.
var anthropicEventKinds = map[string]struct {
	kind  EventKind
	block bool
}{
	"message_start":       {EventMeta, false},
	"ping":                {EventMeta, false},
	"content_block_start": {EventContent, true},
	"content_block_delta": {EventContent, false},
	"content_block_stop":  {EventContent, false},
	"message_delta":       {EventContent, false},
	"message_stop":        {EventDone, false},
	"error":               {EventError, false},
}

func inspectAnthropic(name string, data []byte) EventKind {
	kind, block, known := anthropicEventKind(name)
	if known && !block {
		return kind
	}
	if len(data) == 0 {
		if name == "" {
			return EventMeta // a stray blank line
		}
		return EventContent // an event we cannot read (see InspectEvent)
	}
	it, ok := jsonscan.Scan(data)
	if !ok || !it.IsObject() {
		return EventContent
	}
	var (
		typeKnown, typeBlock, hasError, emptyText bool
		typeKind                                  = EventContent
	)
	for {
		m, ok := it.Next()
		if !ok {
			break
		}
		switch {
		case m.KeyIs("type"):
			switch v := m.Value(); {
			case v[0] != '"':
			case bytes.IndexByte(v, '\\') < 0:
				k, found := anthropicEventKinds[string(v[1:len(v)-1])]
				typeKind, typeBlock, typeKnown = k.kind, k.block, found
			default:
				typeKind, typeBlock, typeKnown = anthropicEventKind(jsonscan.String(v))
			}
		case m.KeyIs("error"):
			hasError = !isEmptyJSONValue(m.Value())
		case m.KeyIs("content_block"):
			emptyText = anthropicBlockIsEmptyText(m.Value())
		}
	}
	if it.End() != nil {
		return EventContent
	}
	if !known {
		// anthropic-sdk-go dispatches on the event name; detour falls back
		// to the JSON type for streams whose names a gateway dropped.
		switch {
		case typeKnown && !typeBlock:
			return typeKind
		case !typeKnown && hasError:
			return EventError
		case !typeKnown:
			return EventContent
		}
	}
	// content_block_start: an empty text block is only an announcement;
	// any other block (tool_use with its name, thinking, server tool use…)
	// is something the app renders.
	if emptyText {
		return EventMeta
	}
	return EventContent
}

// anthropicBlockIsEmptyText reports whether a content_block is a text block
// whose text is empty.
func anthropicBlockIsEmptyText(block []byte) bool {
	it, ok := jsonscan.Scan(block)
	if !ok || !it.IsObject() {
		return false
	}
	isText, hasText := false, false
	for {
		f, ok := it.Next()
		if !ok {
			break
		}
		switch {
		case f.KeyIs("type"):
			isText = string(f.Value()) == `"text"`
		case f.KeyIs("text"):
			hasText = !isEmptyJSONValue(f.Value())
		}
	}
	return isText && !hasText
}

func inspectGemini(data []byte) EventKind {
	if len(data) == 0 {
		return EventMeta
	}
	it, ok := jsonscan.Scan(data)
	if !ok {
		return EventContent
	}
	if !it.IsObject() {
		// Google wraps errors in an array ([{"error":…}]) in some places;
		// go-genai and the Python SDK unwrap it, so detour does too.
		for {
			el, ok := it.Next()
			if !ok {
				return EventContent
			}
			if e, ok := jsonscan.Scan(el.Value()); ok && e.IsObject() && geminiChunkKind(&e) == EventError {
				return EventError
			}
		}
	}
	kind := geminiChunkKind(&it)
	if kind != EventError && it.End() != nil {
		return EventContent
	}
	return kind
}

// geminiChunkKind classifies a GenerateContentResponse (or a Gemini error
// envelope) by walking its members with it.
func geminiChunkKind(it *jsonscan.Iter) EventKind {
	// Only JSON with a field of a GenerateContentResponse can be meta; JSON
	// of another form would otherwise be held to the end of the stream.
	var isResponse, content bool
	for {
		m, ok := it.Next()
		if !ok {
			if content || !isResponse {
				return EventContent
			}
			return EventMeta
		}
		isResponse = isResponse || geminiResponseFields[string(m.Key())]
		switch {
		case m.KeyIs("error"):
			if !isEmptyJSONValue(m.Value()) {
				return EventError
			}
		case m.KeyIs("candidates"):
			content = content || geminiCandidatesHaveContent(m.Value())
		case m.KeyIs("promptFeedback"):
			// A blocked prompt has no candidates, only a blockReason: the
			// app's answer, not a failure.
			content = content || memberNotEmpty(m.Value(), "blockReason")
		}
	}
}

// geminiResponseFields are the top-level fields of a GenerateContentResponse.
var geminiResponseFields = map[string]bool{
	"candidates": true, "promptFeedback": true, "usageMetadata": true,
	"modelVersion": true, "responseId": true, "createTime": true,
}

// geminiCandidatesHaveContent reports whether any candidate has parts or a
// finishReason.
func geminiCandidatesHaveContent(candidates []byte) bool {
	it, ok := jsonscan.Scan(candidates)
	if !ok {
		return false
	}
	for {
		c, ok := it.Next()
		if !ok {
			return false
		}
		if memberNotEmpty(c.Value(), "finishReason") {
			return true
		}
		fields, ok := jsonscan.Scan(c.Value())
		if !ok || !fields.IsObject() {
			continue
		}
		for {
			f, ok := fields.Next()
			if !ok {
				break
			}
			if f.KeyIs("content") && memberNotEmpty(f.Value(), "parts") {
				return true
			}
		}
	}
}

// memberNotEmpty reports whether the object obj has a member key whose
// value is not empty (see isEmptyJSONValue).
func memberNotEmpty(obj []byte, key string) bool {
	it, ok := jsonscan.Scan(obj)
	if !ok || !it.IsObject() {
		return false
	}
	for {
		m, ok := it.Next()
		if !ok {
			return false
		}
		if m.KeyIs(key) && !isEmptyJSONValue(m.Value()) {
			return true
		}
	}
}

// Usage is the token count of one response, in detour's terms: Input is
// every prompt token the upstream billed (cached ones included), Output every
// generated token (reasoning included).
type Usage struct {
	Input, Output int64
}

// Merge returns u updated with a later report next: each non-zero figure in
// next replaces u's. This is how a stream's reports add up in every shape,
// when the caller merges each event's ExtractUsage result in order:
//   - OpenAI reports usage once, in the last chunk before [DONE] (only with
//     stream_options.include_usage); servers that report it in every chunk
//     report running totals, so the last report wins either way.
//   - Anthropic reports input (and a placeholder output) in message_start,
//     and the running output total in each message_delta (lately with the
//     input repeated): input from message_start unless a message_delta
//     restates it, output from the last message_delta.
//   - Gemini repeats cumulative usageMetadata in every chunk: the last wins.
func (u Usage) Merge(next Usage) Usage {
	if next.Input != 0 {
		u.Input = next.Input
	}
	if next.Output != 0 {
		u.Output = next.Output
	}
	return u
}

// ExtractUsage reads the token counts in one stream event's data, or in a
// whole non-stream response body, of the given shape. ok is false when there
// are none (most stream events) or data cannot be read. See Usage.Merge for
// combining a stream's reports.
//
// Most events carry no usage, or OpenAI's "usage":null, and are rejected by a
// byte search without decoding, so calling this on every event of a stream
// is cheap; only Gemini, which repeats usageMetadata in every chunk, pays for
// a decode (of a minimal struct) per event.
func ExtractUsage(shape Shape, data []byte) (u Usage, ok bool) {
	if !mayHoldUsage(data) {
		return Usage{}, false
	}
	if shape == OpenAIResponses {
		return extractResponsesUsage(data)
	}
	return extractUsage(shape, data)
}

// usageMembers finds the usage object of one answer or stream event of
// shape (Gemini's usageMetadata, everyone else's usage) and, for
// Anthropic, the message that message_start nests its usage in. The last
// of duplicate keys wins, as with encoding/json. ok is false when data is
// not a well-formed JSON object.
func usageMembers(shape Shape, data []byte) (usage, message []byte, ok bool) {
	it, isContainer := jsonscan.Scan(data)
	return usageMembersOf(shape, &it, isContainer)
}

// usageMembersOf is usageMembers over a walk already started: a validating
// one (Scan), or one over data known to be valid (Object).
func usageMembersOf(shape Shape, it *jsonscan.Iter, isContainer bool) (usage, message []byte, ok bool) {
	if !isContainer || !it.IsObject() {
		return nil, nil, false
	}
	for {
		m, more := it.Next()
		if !more {
			break
		}
		switch {
		case shape == Gemini && m.KeyIs("usageMetadata"),
			shape != Gemini && m.KeyIs("usage"):
			usage = m.Value()
		case shape == Anthropic && m.KeyIs("message"):
			message = m.Value()
		}
	}
	return usage, message, it.End() == nil
}

// extractUsage is ExtractUsage without the byte pre-check.
func extractUsage(shape Shape, data []byte) (u Usage, ok bool) {
	usage, message, ok := usageMembers(shape, data)
	if !ok {
		return Usage{}, false
	}
	return usageOf(shape, usage, message)
}

// usageOf reads the token counts from the members usageMembers found.
func usageOf(shape Shape, usage, message []byte) (u Usage, ok bool) {
	switch shape {
	case OpenAI:
		return usageCounts(usage, &openAIUsageFields)
	case Anthropic:
		// message_start nests the usage in the message; message_delta and a
		// non-stream message have it at the top. input_tokens excludes the
		// cached part; detour counts every prompt token processed, like
		// OpenAI's prompt_tokens and Gemini's promptTokenCount.
		if message != nil {
			if inner, ok := memberValue(message, "usage"); ok {
				usage = inner
			}
		}
		return usageCounts(usage, &anthropicUsageFields)
	case Gemini:
		return usageCounts(usage, &geminiUsageFields)
	case Bedrock:
		return usageCounts(usage, &bedrockUsageFields)
	}
	return Usage{}, false
}

// usageFields names the members of a usage object whose values add up to
// Usage.Input and Usage.Output (at most maxUsageFields each).
type usageFields struct{ input, output []string }

const maxUsageFields = 4

var (
	openAIUsageFields = usageFields{
		input:  []string{"prompt_tokens"},
		output: []string{"completion_tokens"},
	}
	anthropicUsageFields = usageFields{
		input:  []string{"input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"},
		output: []string{"output_tokens"},
	}
	geminiUsageFields = usageFields{
		input:  []string{"promptTokenCount"},
		output: []string{"candidatesTokenCount", "thoughtsTokenCount"},
	}
)

// usageCounts sums the counts named by f in the usage object obj, taking
// the last of duplicate members. ok is false when obj is not an object
// (absent, or null).
func usageCounts(obj []byte, f *usageFields) (u Usage, ok bool) {
	it, ok := jsonscan.Scan(obj)
	if !ok || !it.IsObject() {
		return Usage{}, false
	}
	var in, out [maxUsageFields]int64
	for {
		m, more := it.Next()
		if !more {
			break
		}
		for i, k := range f.input {
			if m.KeyIs(k) {
				in[i], _ = jsonscan.Int(m.Value())
			}
		}
		for i, k := range f.output {
			if m.KeyIs(k) {
				out[i], _ = jsonscan.Int(m.Value())
			}
		}
	}
	for i := range in {
		u.Input += in[i]
		u.Output += out[i]
	}
	return u, true
}

// memberValue returns the value of the last member key of the object obj.
func memberValue(obj []byte, key string) (v []byte, ok bool) {
	it, isObj := jsonscan.Scan(obj)
	if !isObj || !it.IsObject() {
		return nil, false
	}
	for {
		m, more := it.Next()
		if !more {
			return v, ok
		}
		if m.KeyIs(key) {
			v, ok = m.Value(), true
		}
	}
}

var usageKey = []byte(`"usage`) // also the start of Gemini's "usageMetadata"

// mayHoldUsage is the byte search that spares most events a decode: data
// with no "usage… key, or whose only one is OpenAI's "usage":null, has
// nothing to report. The search cannot be fooled by text: a quote inside a
// JSON string is escaped, so `"usage` only matches a key or a value.
func mayHoldUsage(data []byte) bool {
	i := bytes.Index(data, usageKey)
	if i < 0 {
		return false
	}
	rest := data[i+len(usageKey):]
	if !bytes.HasPrefix(rest, []byte(`":`)) {
		return true // "usageMetadata", or "usage" followed by spaces
	}
	rest = bytes.TrimLeft(rest[2:], " \t\r\n")
	if !bytes.HasPrefix(rest, []byte("null")) {
		return true
	}
	return bytes.Contains(rest, usageKey)
}
