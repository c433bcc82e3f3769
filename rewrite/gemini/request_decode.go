package gemini

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/detour-proxy/detour/rewrite/ir"
)

// requestIDScope is the scope of the ids DecodeRequest generates for
// function calls that came without one (Gemini before version 3, and apps
// that build their history by hand). The same request decodes to the same
// ids, so a retry sends the upstream exactly what the first attempt did.
const requestIDScope = "req"

// orphanIDScope is the scope of the ids given to function responses that
// answer no earlier call: every result needs an id in the other shapes.
const orphanIDScope = "orphan"

// DecodeRequest decodes a generateContent request body into an ir.Request.
// model and stream come from the URL path (see rewrite.GeminiModelFromPath),
// since Gemini puts neither in the body.
//
// Function calls without an id get ir.GeneratedToolID("req", n), n counting
// the calls of the request from 0. A function response without an id
// answers the earliest unanswered call with the same name before it.
// Whatever the IR cannot carry is left out: safety settings, cached content,
// built-in tools (googleSearch, codeExecution), executableCode parts,
// penalties, logprobs, thought signatures on parts other than function
// calls.
func DecodeRequest(body []byte, model string, stream bool) (*ir.Request, error) {
	var w reqBody
	if err := json.Unmarshal(body, &w); err != nil {
		return nil, fmt.Errorf("gemini: request body: %w", err)
	}
	r := &ir.Request{Model: model, Stream: stream}
	sys, err := decodeSystem(pickRaw(w.SystemInstruction, w.SystemInstructionS))
	if err != nil {
		return nil, err
	}
	r.System = sys

	d := requestDecoder{}
	for i, c := range w.Contents {
		m, err := d.content(c)
		if err != nil {
			return nil, fmt.Errorf("gemini: contents[%d]: %w", i, err)
		}
		if len(m.Parts) > 0 {
			r.Messages = append(r.Messages, m)
		}
	}

	for _, t := range w.Tools {
		for _, f := range pickSlice(t.FunctionDeclarations, t.FunctionDeclarationsS) {
			tool := ir.Tool{Name: f.Name, Description: f.Description}
			if js := pickRaw(f.ParametersJSONSchema, f.ParametersJSONSchemaS); !isNull(js) {
				tool.Parameters = compactRaw(js)
			} else if !isNull(f.Parameters) {
				tool.Parameters = jsonSchemaFromGemini(f.Parameters)
			}
			r.Tools = append(r.Tools, tool)
		}
	}
	if tc := pick(w.ToolConfig, w.ToolConfigS); tc != nil {
		choice, err := decodeToolChoice(pick(tc.FunctionCallingConfig, tc.FunctionCallingConfigS))
		if err != nil {
			return nil, err
		}
		r.ToolChoice = choice
	}
	if g := pick(w.GenerationConfig, w.GenerationConfigS); g != nil {
		decodeGenerationConfig(g, r)
	}
	return r, nil
}

// decodeSystem reads systemInstruction: a Content whose text parts are the
// system prompts, in order. A bare string is taken too: some clients send
// one and the API's Content conversion accepts it.
func decodeSystem(raw json.RawMessage) ([]string, error) {
	if isNull(raw) {
		return nil, nil
	}
	if raw = bytes.TrimSpace(raw); raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, fmt.Errorf("gemini: systemInstruction: %w", err)
		}
		if s == "" {
			return nil, nil
		}
		return []string{s}, nil
	}
	var c reqContent
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, fmt.Errorf("gemini: systemInstruction: %w", err)
	}
	var out []string
	for _, p := range c.Parts {
		if p.Text != "" {
			out = append(out, p.Text)
		}
	}
	return out, nil
}

// requestDecoder holds what decoding contents needs across turns: the count
// of function calls, for generated ids, and the calls not yet answered, to
// pair function responses that carry no id.
type requestDecoder struct {
	calls   int
	orphans int
	pending []pendingCall
}

// pendingCall is a function call seen in the request.
type pendingCall struct {
	id, name string
	answered bool
}

// content decodes one turn.
func (d *requestDecoder) content(c reqContent) (ir.Message, error) {
	var m ir.Message
	switch c.Role {
	case "", "user":
		m.Role = ir.RoleUser
	case "model":
		m.Role = ir.RoleAssistant
	case "function", "tool":
		// Early Gemini API versions put function responses in a turn of
		// their own role; they are user turns now.
		m.Role = ir.RoleUser
	default:
		return m, fmt.Errorf("role %q is not user or model", c.Role)
	}
	for _, p := range c.Parts {
		if part, ok := d.part(p); ok {
			m.Parts = append(m.Parts, part)
		}
	}
	return m, nil
}

// part decodes one part; ok is false for a part the IR has no place for.
func (d *requestDecoder) part(p reqPart) (ir.Part, bool) {
	if fc := pick(p.FunctionCall, p.FunctionCallS); fc != nil {
		id := fc.ID
		if id == "" {
			id = ir.GeneratedToolID(requestIDScope, d.calls)
		}
		d.calls++
		d.pending = append(d.pending, pendingCall{id: id, name: fc.Name})
		return ir.Part{Kind: ir.PartToolCall, ToolCall: &ir.ToolCall{
			ID:               id,
			Name:             fc.Name,
			Arguments:        argsObject(fc.Args),
			ThoughtSignature: pick(p.ThoughtSignature, p.ThoughtSignatureS),
		}}, true
	}
	if fr := pick(p.FunctionResponse, p.FunctionResponseS); fr != nil {
		id, name := d.answer(fr.ID, fr.Name)
		res := &ir.ToolResult{CallID: id, Name: pick(fr.Name, name)}
		res.Content, res.IsJSON, res.IsError = resultContent(fr.Response)
		return ir.Part{Kind: ir.PartToolResult, ToolResult: res}, true
	}
	if b := pick(p.InlineData, p.InlineDataS); b != nil {
		mt := pick(b.MimeType, b.MimeTypeS)
		return ir.Part{Kind: mediaKind(mt), Media: &ir.Media{MediaType: mt, Data: b.Data}}, true
	}
	if f := pick(p.FileData, p.FileDataS); f != nil {
		mt := pick(f.MimeType, f.MimeTypeS)
		return ir.Part{Kind: mediaKind(mt), Media: &ir.Media{MediaType: mt, URL: pick(f.FileURI, f.FileURIS)}}, true
	}
	if p.Text == "" {
		return ir.Part{}, false
	}
	if p.Thought {
		return ir.Part{Kind: ir.PartThinking, Text: p.Text}, true
	}
	return ir.Part{Kind: ir.PartText, Text: p.Text}, true
}

// answer returns the call a function response answers, by id and name,
// and marks it answered: the call with the response's id (Gemini 3), else
// the earliest unanswered call of the same name, else the response's own
// id, or a generated one so that the other shapes still get an id.
func (d *requestDecoder) answer(id, name string) (string, string) {
	if id != "" {
		for i := range d.pending {
			if c := &d.pending[i]; c.id == id {
				c.answered = true
				return c.id, c.name
			}
		}
	}
	for i := range d.pending {
		if c := &d.pending[i]; !c.answered && c.name == name {
			// An id that answers no call is the app's own invention;
			// the call's id is what the other shapes pair on.
			c.answered = true
			return c.id, c.name
		}
	}
	if id == "" {
		id = ir.GeneratedToolID(orphanIDScope, d.orphans)
		d.orphans++
	}
	return id, name
}

// mediaKind is PartImage for image/* and PartDocument for anything else
// (PDFs, audio, video, text files).
func mediaKind(mimeType string) ir.PartKind {
	if strings.HasPrefix(strings.ToLower(mimeType), "image/") {
		return ir.PartImage
	}
	return ir.PartDocument
}

// emptyObject is the arguments of a call that has none.
var emptyObject = json.RawMessage(`{}`)

// argsObject returns a function call's args as the IR wants them: a JSON
// object, {} when absent or not an object.
func argsObject(raw json.RawMessage) json.RawMessage {
	if c := compactObject(raw); c != nil {
		return c
	}
	return emptyObject
}

// compactRaw returns raw without insignificant whitespace, or raw itself if
// it is not valid JSON.
func compactRaw(raw json.RawMessage) json.RawMessage {
	var buf bytes.Buffer
	if json.Compact(&buf, raw) != nil {
		return raw
	}
	return buf.Bytes()
}

// resultContent turns a functionResponse.response object into ToolResult
// content: the string under "output" when that is all there is (the form
// detour and the Gemini docs use for plain results), the string under
// "error" as an error result, else the object's JSON.
func resultContent(raw json.RawMessage) (content string, isJSON, isError bool) {
	raw = bytes.TrimSpace(raw)
	if isNull(raw) {
		return "", false, false
	}
	if raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s, false, false
		}
	}
	if raw[0] != '{' {
		return string(compactRaw(raw)), true, false
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(raw, &fields) != nil {
		return string(raw), false, false
	}
	if len(fields) == 1 {
		for k, v := range fields {
			var s string
			isString := json.Unmarshal(v, &s) == nil
			switch {
			case k == "output" && isString:
				return s, false, false
			case k == "error" && isString:
				return s, false, true
			case k == "error":
				return string(compactRaw(raw)), true, true
			}
		}
	}
	return string(compactRaw(raw)), true, false
}

// decodeToolChoice maps functionCallingConfig onto the IR: ANY restricted
// to one function is that function; ANY with several names can only be
// "required" (the restriction is lost). An empty name names no function
// the request declares: the request is refused, as the other shapes
// refuse a forced tool without a name, rather than sent on as a forced
// call of no function, which no upstream accepts.
func decodeToolChoice(c *reqCallingConfig) (*ir.ToolChoice, error) {
	if c == nil {
		return nil, nil
	}
	names := pickSlice(c.AllowedFunctionNames, c.AllowedFunctionNamesS)
	if slices.Contains(names, "") {
		return nil, errors.New("gemini: toolConfig.functionCallingConfig.allowedFunctionNames: an empty function name")
	}
	switch strings.ToUpper(c.Mode) {
	case "AUTO", "VALIDATED":
		return &ir.ToolChoice{Mode: ir.ToolChoiceAuto}, nil
	case "NONE":
		return &ir.ToolChoice{Mode: ir.ToolChoiceNone}, nil
	case "ANY":
		if len(names) == 1 {
			return &ir.ToolChoice{Mode: ir.ToolChoiceTool, Name: names[0]}, nil
		}
		return &ir.ToolChoice{Mode: ir.ToolChoiceRequired}, nil
	}
	return nil, nil
}

// thinkingLevels maps Gemini 3's thinkingLevel onto reasoning effort.
var thinkingLevels = map[string]string{
	"MINIMAL": "low", "LOW": "low", "MEDIUM": "medium", "HIGH": "high",
}

// decodeGenerationConfig copies generationConfig into r.
func decodeGenerationConfig(g *reqGenConfig, r *ir.Request) {
	if v := pick(g.MaxOutputTokens, g.MaxOutputTokensS); v != nil && *v > 0 {
		r.MaxTokens = *v
	}
	r.Temperature = g.Temperature
	r.TopP = pick(g.TopP, g.TopPS)
	if k := pick(g.TopK, g.TopKS); k != nil {
		n := int(*k)
		r.TopK = &n
	}
	r.Stop = pickSlice(g.StopSequences, g.StopSequencesS)
	if n := pick(g.CandidateCount, g.CandidateCountS); n != nil && *n > 0 {
		r.N = *n
	}
	r.Seed = g.Seed
	mt := pick(g.ResponseMimeType, g.ResponseMimeTypeS)
	if mt, _, _ = strings.Cut(mt, ";"); strings.EqualFold(strings.TrimSpace(mt), "application/json") {
		switch js, s := pickRaw(g.ResponseJSONSchema, g.ResponseJSONSchemaS), pickRaw(g.ResponseSchema, g.ResponseSchemaS); {
		case !isNull(js):
			r.ResponseFormat = &ir.ResponseFormat{Type: "json_schema", Name: "response", Schema: compactRaw(js)}
		case !isNull(s):
			r.ResponseFormat = &ir.ResponseFormat{Type: "json_schema", Name: "response", Schema: jsonSchemaFromGemini(s)}
		default:
			r.ResponseFormat = &ir.ResponseFormat{Type: "json_object"}
		}
	}
	if t := pick(g.ThinkingConfig, g.ThinkingConfigS); t != nil {
		// A budget of 0 (thinking off) or -1 (dynamic) has no IR form: both
		// leave the target's default.
		if b := pick(t.ThinkingBudget, t.ThinkingBudgetS); b != nil && *b > 0 {
			r.ThinkingBudget = *b
		}
		if e, ok := thinkingLevels[strings.ToUpper(pick(t.ThinkingLevel, t.ThinkingLevelS))]; ok {
			r.ReasoningEffort = e
		}
	}
}
