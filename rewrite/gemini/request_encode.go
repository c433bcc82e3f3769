package gemini

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"mime"
	"net/http"
	"net/url"
	"path"
	"regexp"
	"strings"

	"github.com/detour-proxy/detour/rewrite/ir"
)

// Limits of the Gemini API that EncodeRequest enforces.
const (
	// maxStopSequences is how many stopSequences Gemini accepts.
	maxStopSequences = 5
	// maxTemperature is the top of Gemini's temperature range (0–2).
	maxTemperature = 2.0
)

// skipThoughtSignature is the placeholder Google documents for function
// calls Gemini did not produce (another vendor's turns, hand-built
// history): Gemini 3 answers 400 "Function call is missing a
// thought_signature" to a call in the current turn without one
// (docs/vendors.md#thought-signatures). It is valid base64url, as the bytes field needs.
const skipThoughtSignature = "skip_thought_signature_validator"

// reasoningBudgets maps reasoning effort onto a thinking budget (litellm's
// values, docs/vendors.md#request-fields). "minimal" has no Gemini 2.5 equivalent that
// every model takes (Pro cannot turn thinking off), so it is "low".
var reasoningBudgets = map[string]int{
	"minimal": 1024, "low": 1024, "medium": 2048, "high": 4096,
}

// functionName is what Gemini accepts as a function name ("Must start with
// a letter or an underscore … maximum length of 64").
var functionName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.:-]{0,63}$`)

// EncodeRequest encodes r as a generateContent request body for a Gemini
// upstream. The model is not in the body: the caller builds the path
// /v1beta/models/{o.Model}:generateContent, or :streamGenerateContent?alt=sse
// when r.Stream.
//
// What Gemini cannot take is an *ir.UnsupportedError (an image by http URL,
// which Gemini cannot fetch; a recursive schema; a tool name Gemini
// refuses; a tool result whose call is unknown), so that the chain skips
// this upstream instead of dropping part of the request. Lossy changes
// (temperature clamped, stop sequences dropped, schema keywords removed)
// are told to o.Notes.
func EncodeRequest(r *ir.Request, o ir.EncodeOptions) ([]byte, error) {
	e := requestEncoder{notes: o.Notes, names: map[string]string{}}
	out := outRequest{Contents: []outContent{}}

	for _, s := range r.System {
		if s != "" {
			if out.SystemInstruction == nil {
				out.SystemInstruction = &outContent{}
			}
			out.SystemInstruction.Parts = append(out.SystemInstruction.Parts, outPart{Text: s})
		}
	}

	// Function responses need the function's name, which the other shapes
	// keep only on the call: map every call id to its name first.
	for _, m := range r.Messages {
		for _, p := range m.Parts {
			if p.Kind == ir.PartToolCall && p.ToolCall != nil && p.ToolCall.ID != "" {
				e.names[p.ToolCall.ID] = p.ToolCall.Name
			}
		}
	}
	for i, m := range r.Messages {
		role := "user" // RoleUser, and RoleTool: results are user turns
		if m.Role == ir.RoleAssistant {
			role = "model"
		}
		parts, err := e.parts(m.Parts)
		if err != nil {
			return nil, fmt.Errorf("gemini: messages[%d]: %w", i, err)
		}
		if len(parts) == 0 {
			// Gemini rejects a turn without parts (docs/vendors.md#empty-content).
			continue
		}
		// Gemini wants turns to alternate; tool results after tool results
		// (OpenAI sends one message per result) become one turn, which is
		// also where Gemini wants all responses to a turn's calls.
		if n := len(out.Contents); n > 0 && out.Contents[n-1].Role == role {
			out.Contents[n-1].Parts = append(out.Contents[n-1].Parts, parts...)
			continue
		}
		out.Contents = append(out.Contents, outContent{Role: role, Parts: parts})
	}

	if len(r.Tools) > 0 {
		decls := make([]outFuncDecl, 0, len(r.Tools))
		for _, t := range r.Tools {
			d, err := e.tool(t)
			if err != nil {
				return nil, err
			}
			decls = append(decls, d)
		}
		out.Tools = []outTool{{FunctionDeclarations: decls}}
		out.ToolConfig = encodeToolChoice(r.ToolChoice)
	}
	if r.ParallelToolCalls != nil && !*r.ParallelToolCalls {
		e.note("parallel_tool_calls=false dropped: Gemini has no such setting")
	}

	g, err := e.generationConfig(r)
	if err != nil {
		return nil, err
	}
	out.GenerationConfig = g
	return marshal(out)
}

// requestEncoder holds what encoding one request needs.
type requestEncoder struct {
	notes func(string)
	names map[string]string // tool call id → function name
}

// note tells the caller of a lossy change, when it listens.
func (e *requestEncoder) note(format string, args ...any) {
	if e.notes != nil {
		e.notes(fmt.Sprintf("gemini: "+format, args...))
	}
}

// parts encodes the parts of one message, leaving out empty text.
func (e *requestEncoder) parts(in []ir.Part) ([]outPart, error) {
	out := make([]outPart, 0, len(in))
	for _, p := range in {
		switch p.Kind {
		case ir.PartText:
			if p.Text != "" {
				out = append(out, outPart{Text: p.Text})
			}
		case ir.PartThinking:
			// The model's earlier reasoning goes back as a thought part, as
			// go-genai's chat history sends it. An Anthropic signature
			// means nothing to Gemini and is not sent; redacted thinking
			// (no text) is left out.
			if p.Text != "" {
				out = append(out, outPart{Text: p.Text, Thought: true})
			}
		case ir.PartImage, ir.PartDocument:
			part, err := mediaPart(p.Kind, p.Media)
			if err != nil {
				return nil, err
			}
			out = append(out, part)
		case ir.PartToolCall:
			if p.ToolCall == nil {
				continue
			}
			out = append(out, e.toolCall(p.ToolCall))
		case ir.PartToolResult:
			if p.ToolResult == nil {
				continue
			}
			part, err := e.toolResult(p.ToolResult)
			if err != nil {
				return nil, err
			}
			out = append(out, part)
		}
	}
	return out, nil
}

// toolCall encodes a call the assistant made earlier.
//
// The id is always sent, also one detour generated: FunctionCall.id is a
// field of both the Gemini API and Vertex AI (go-genai passes it to both),
// so Gemini 2.x accepts it and ignores it, and Gemini 3 pairs calls with
// responses by it; the matching functionResponse carries the same id.
func (e *requestEncoder) toolCall(c *ir.ToolCall) outPart {
	args := compactObject(c.Arguments)
	if args == nil {
		if !isNull(c.Arguments) {
			e.note("arguments of call %s to %s are not a JSON object; sent as {}", c.ID, c.Name)
		}
		args = emptyObject
	}
	sig := c.ThoughtSignature
	if !upstreamSignature(sig) {
		// No signature, or one that is not Gemini's (not base64, which the
		// bytes field needs, or Gemini would reject the whole request).
		sig = skipThoughtSignature
	}
	return outPart{
		FunctionCall:     &wireFunctionCall{ID: c.ID, Name: c.Name, Args: args},
		ThoughtSignature: sig,
	}
}

// toolResult encodes a tool result as a functionResponse.
func (e *requestEncoder) toolResult(t *ir.ToolResult) (outPart, error) {
	name := t.Name
	if name == "" {
		name = e.names[t.CallID]
	}
	if name == "" {
		return outPart{}, &ir.UnsupportedError{What: "tool result " + t.CallID + " that answers no tool call in the request (Gemini needs the function name)"}
	}
	return outPart{FunctionResponse: &wireFunctionResult{
		ID: t.CallID, Name: name, Response: resultObject(t),
	}}, nil
}

// resultObject is functionResponse.response for t: a JSON object result as
// it is, anything else under "output" (or "error" for a failed call), as
// the Gemini docs do. A JSON value that is not an object keeps its type.
func resultObject(t *ir.ToolResult) json.RawMessage {
	key := "output"
	if t.IsError {
		key = "error"
	}
	var value []byte
	if t.IsJSON {
		if obj := compactObject([]byte(t.Content)); obj != nil {
			return obj
		}
		if c := bytes.TrimSpace([]byte(t.Content)); json.Valid(c) {
			var buf bytes.Buffer
			_ = json.Compact(&buf, c) // valid, so cannot fail
			value = buf.Bytes()
		}
	}
	if value == nil {
		value = appendString(nil, t.Content)
	}
	b := make([]byte, 0, len(key)+len(value)+5)
	b = append(b, '{')
	b = appendString(b, key)
	b = append(b, ':')
	b = append(b, value...)
	return append(b, '}')
}

// filesAPIHost is where the Gemini Files API serves uploaded files; their
// URIs are taken as fileData.
const filesAPIHost = "generativelanguage.googleapis.com"

// mediaPart encodes an image or a document: inline data as inlineData;
// gs:// and Gemini Files API URIs as fileData. Gemini cannot fetch http(s)
// URLs, and fetching them here would be egress detour must not make, so
// those are an *ir.UnsupportedError: the chain skips this upstream rather
// than drop the image silently.
func mediaPart(kind ir.PartKind, m *ir.Media) (outPart, error) {
	what := "image"
	if kind == ir.PartDocument {
		what = "document"
	}
	if m == nil {
		return outPart{}, &ir.UnsupportedError{What: what + " without content"}
	}
	if m.Data != "" {
		if strings.HasPrefix(m.Data, "data:") {
			return dataURIPart(what, m.Data)
		}
		mt := m.MediaType
		if mt == "" {
			mt = sniffBase64(m.Data)
		}
		if mt == "" {
			return outPart{}, &ir.UnsupportedError{What: what + " without a media type"}
		}
		return outPart{InlineData: &outBlob{MimeType: mt, Data: m.Data}}, nil
	}
	u, err := url.Parse(m.URL)
	if m.URL == "" || err != nil {
		return outPart{}, &ir.UnsupportedError{What: what + " without content"}
	}
	switch strings.ToLower(u.Scheme) {
	case "data":
		return dataURIPart(what, m.URL)
	case "gs":
	case "https", "http":
		if !strings.EqualFold(u.Host, filesAPIHost) || !strings.Contains(u.Path, "/files/") {
			return outPart{}, &ir.UnsupportedError{What: what + " by http URL"}
		}
	default:
		return outPart{}, &ir.UnsupportedError{What: what + " by " + u.Scheme + " URL"}
	}
	mt := m.MediaType
	if mt == "" {
		// mimeType is optional for fileData (the file's own metadata has
		// it); an extension still helps for gs:// objects.
		mt = mime.TypeByExtension(path.Ext(u.Path))
		mt, _, _ = strings.Cut(mt, ";")
	}
	return outPart{FileData: &outFileData{MimeType: mt, FileURI: m.URL}}, nil
}

// dataURIPart encodes a data: URI (what OpenAI apps send as an image_url)
// as inline data.
func dataURIPart(what, uri string) (outPart, error) {
	meta, payload, ok := strings.Cut(strings.TrimPrefix(uri, "data:"), ",")
	if !ok {
		return outPart{}, &ir.UnsupportedError{What: what + " with a malformed data: URI"}
	}
	mt, params, _ := strings.Cut(meta, ";")
	data := payload
	if !strings.Contains(";"+params+";", ";base64;") {
		raw, err := url.PathUnescape(payload)
		if err != nil {
			return outPart{}, &ir.UnsupportedError{What: what + " with a malformed data: URI"}
		}
		data = base64.StdEncoding.EncodeToString([]byte(raw))
	}
	if mt == "" {
		mt = sniffBase64(data)
	}
	if mt == "" {
		return outPart{}, &ir.UnsupportedError{What: what + " without a media type"}
	}
	return outPart{InlineData: &outBlob{MimeType: mt, Data: data}}, nil
}

// upstreamSignature reports whether sig can be sent to Gemini as a
// thoughtSignature: proto3 JSON reads bytes as standard or URL-safe
// base64, padded or not.
func upstreamSignature(sig string) bool {
	if sig == "" {
		return false
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
		if _, err := enc.DecodeString(sig); err == nil {
			return true
		}
	}
	return false
}

// sniffBase64 guesses the media type of base64 data from its first bytes,
// or returns "" when it cannot tell.
func sniffBase64(data string) string {
	head := data[:min(len(data), 64)]
	head = head[:len(head)/4*4]
	b, err := base64.StdEncoding.DecodeString(head)
	if err != nil {
		b, err = base64.URLEncoding.DecodeString(head)
		if err != nil {
			return ""
		}
	}
	mt, _, _ := strings.Cut(http.DetectContentType(b), ";")
	if mt == "application/octet-stream" || strings.HasPrefix(mt, "text/plain") {
		return ""
	}
	return mt
}

// tool encodes one function declaration, its parameters sanitised into
// Gemini's schema subset (see schema.go).
func (e *requestEncoder) tool(t ir.Tool) (outFuncDecl, error) {
	if !functionName.MatchString(t.Name) {
		return outFuncDecl{}, &ir.UnsupportedError{What: fmt.Sprintf("tool name %q (Gemini names start with a letter or _ and have at most 64 of A-Z a-z 0-9 _ . : -)", t.Name)}
	}
	params, dropped, err := sanitizeSchema(t.Parameters, false)
	if err != nil {
		return outFuncDecl{}, fmt.Errorf("gemini: tool %s: %w", t.Name, err)
	}
	if len(dropped) > 0 {
		e.note("tool %s: schema keywords Gemini cannot take were removed: %s", t.Name, strings.Join(dropped, ", "))
	}
	if !hasProperties(params) {
		// A parameterless tool is sent without parameters: an OBJECT with
		// no properties is a 400.
		params = nil
	}
	return outFuncDecl{Name: t.Name, Description: t.Description, Parameters: params}, nil
}

// hasProperties reports whether a sanitised schema says anything a
// function's parameters need: properties, another type than OBJECT, or any
// keyword beyond annotations. An OBJECT without properties is a 400 for
// function parameters ("should be non-empty for OBJECT type").
func hasProperties(schema []byte) bool {
	if schema == nil {
		return false
	}
	var s map[string]json.RawMessage
	if json.Unmarshal(schema, &s) != nil {
		return true
	}
	for k, v := range s {
		switch k {
		case "type":
			if string(v) != `"OBJECT"` {
				return true
			}
		case "description", "title", "nullable", "required", "propertyOrdering":
		default:
			return true
		}
	}
	return false
}

// encodeToolChoice maps the IR's tool choice onto functionCallingConfig;
// nil leaves Gemini's default (AUTO).
func encodeToolChoice(c *ir.ToolChoice) *outToolConfig {
	if c == nil {
		return nil
	}
	switch c.Mode {
	case ir.ToolChoiceAuto:
		return &outToolConfig{FunctionCallingConfig: outCallingConfig{Mode: "AUTO"}}
	case ir.ToolChoiceNone:
		return &outToolConfig{FunctionCallingConfig: outCallingConfig{Mode: "NONE"}}
	case ir.ToolChoiceRequired:
		return &outToolConfig{FunctionCallingConfig: outCallingConfig{Mode: "ANY"}}
	case ir.ToolChoiceTool:
		return &outToolConfig{FunctionCallingConfig: outCallingConfig{Mode: "ANY", AllowedFunctionNames: []string{c.Name}}}
	}
	return nil
}

// generationConfig encodes the sampling and output settings; nil when the
// request sets none.
func (e *requestEncoder) generationConfig(r *ir.Request) (*outGenConfig, error) {
	g := &outGenConfig{MaxOutputTokens: max(r.MaxTokens, 0), TopP: r.TopP, TopK: r.TopK}
	if t := r.Temperature; t != nil {
		v := *t
		if v < 0 || v > maxTemperature {
			v = min(max(v, 0), maxTemperature)
			e.note("temperature %g clamped to %g (Gemini's range is 0–2)", *t, v)
		}
		g.Temperature = &v
	}
	for _, s := range r.Stop {
		switch {
		case s == "":
			e.note("empty stop sequence dropped")
		case len(g.StopSequences) == maxStopSequences:
			e.note("stop sequence %q dropped: Gemini takes at most %d", s, maxStopSequences)
		default:
			g.StopSequences = append(g.StopSequences, s)
		}
	}
	if r.N > 1 {
		g.CandidateCount = r.N
	}
	if r.Seed != nil {
		// Gemini's seed is an int32; wrapping keeps a given seed giving the
		// same answers, which is what a seed is for.
		s := *r.Seed
		if s < math.MinInt32 || s > math.MaxInt32 {
			s = int64(int32(s))
			e.note("seed %d wrapped to %d (Gemini's seed is 32-bit)", *r.Seed, s)
		}
		g.Seed = &s
	}
	if f := r.ResponseFormat; f != nil {
		switch f.Type {
		case "json_object":
			g.ResponseMimeType = "application/json"
		case "json_schema":
			g.ResponseMimeType = "application/json"
			schema, dropped, err := sanitizeSchema(f.Schema, true)
			if err != nil {
				return nil, fmt.Errorf("gemini: response_format: %w", err)
			}
			if len(dropped) > 0 {
				e.note("response schema: keywords Gemini cannot take were removed: %s", strings.Join(dropped, ", "))
			}
			g.ResponseSchema = schema
		}
	}
	switch budget, ok := reasoningBudgets[r.ReasoningEffort]; {
	case r.ThinkingBudget > 0:
		// An explicit budget is Anthropic's thinking (or Gemini's own):
		// the app expects to see the thinking, so ask for thought parts.
		b := r.ThinkingBudget
		g.ThinkingConfig = &outThinking{IncludeThoughts: true, ThinkingBudget: &b}
	case ok:
		// OpenAI Chat Completions never shows reasoning: do not pay for
		// thought summaries nobody will see.
		g.ThinkingConfig = &outThinking{ThinkingBudget: &budget}
	case r.ReasoningEffort != "":
		e.note("reasoning_effort %q has no thinking budget; left to the model's default", r.ReasoningEffort)
	}
	if g.MaxOutputTokens == 0 && g.Temperature == nil && g.TopP == nil && g.TopK == nil &&
		g.StopSequences == nil && g.CandidateCount == 0 && g.Seed == nil &&
		g.ResponseMimeType == "" && g.ThinkingConfig == nil {
		return nil, nil
	}
	return g, nil
}
