package fakevendor

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/detour-proxy/detour/rewrite"
)

// ToolResultPrefix starts the answer to a turn of tool results: the fake
// answers "The tool said: <result>" (results of one turn joined by
// ToolResultSeparator), so that a test can see that a result reached the
// upstream intact.
const ToolResultPrefix = "The tool said: "

// ToolResultSeparator joins the results of one turn in the answer to it.
const ToolResultSeparator = "; "

// toolCallIDPrefix is the id prefix of each shape's tool calls.
var toolCallIDPrefix = map[rewrite.Shape]string{
	rewrite.OpenAI:          "call_fake",
	rewrite.OpenAIResponses: "call_fake",
	rewrite.Anthropic:       "toolu_fake",
	rewrite.Gemini:          "fc_fake",
}

// geminiThoughtSignature is the thoughtSignature of a Gemini function call
// part when Options.GeminiIDs is set: base64 of "signature".
const geminiThoughtSignature = "c2lnbmF0dXJl"

// ToolCall is a tool call the fake answered with.
type ToolCall struct {
	// ID is the call's id: "call_fake<n>_<i>" (OpenAI),
	// "toolu_fake<n>_<i>" (Anthropic) or, with Options.GeminiIDs,
	// "fc_fake<n>_<i>" (Gemini; empty without it), where n is the request's
	// number and i the call's index in the answer.
	ID string
	// Name is the called tool's name.
	Name string
	// Arguments is the JSON object of arguments, as sent (OpenAI's
	// arguments string, Anthropic's input, Gemini's args).
	Arguments string
}

// ToolResult is one tool result of a request's last turn.
type ToolResult struct {
	// ID is the id of the call answered: OpenAI tool_call_id, Anthropic
	// tool_use_id, Gemini functionResponse.id (often empty).
	ID string
	// Name is the tool's name: Gemini's functionResponse.name; for OpenAI
	// and Anthropic the name of the call with ID among the conversation's
	// earlier assistant turns (empty when none has that id).
	Name string
	// Content is the result's text: the content string, or the text parts
	// or blocks concatenated (OpenAI, Anthropic); for Gemini
	// response.output when it is a string, else the compact JSON of output,
	// else response.error (its text or JSON), else the compact JSON of the
	// whole response.
	Content string
	// IsError is Anthropic's is_error, or a Gemini response with an error
	// and no output.
	IsError bool
}

// toolRequest is what a request says about tools.
type toolRequest struct {
	// tools are the declared function tools, in order.
	tools []toolDecl
	// choice is the tool choice in Recorded.ToolChoice's vocabulary.
	choice string
	// allowed, when not empty, restricts the calls to these names (a forced
	// tool, Gemini's allowedFunctionNames).
	allowed []string
	// noParallel is set when the request forbids parallel calls (OpenAI
	// parallel_tool_calls false, Anthropic disable_parallel_tool_use).
	noParallel bool
	// results are the tool results of the last turn; nil when the last turn
	// carries none.
	results []ToolResult
}

// toolDecl is one declared function tool.
type toolDecl struct {
	name   string
	schema json.RawMessage
}

// names is the declared tools' names.
func (tr toolRequest) names() []string {
	if len(tr.tools) == 0 {
		return nil
	}
	out := make([]string, len(tr.tools))
	for i, t := range tr.tools {
		out[i] = t.name
	}
	return out
}

// plan is the successful answer to one request: text (pieces being its
// stream deltas) or, when calls is not empty, tool calls and no text.
type plan struct {
	text   string
	pieces []string
	calls  []ToolCall
}

// outputTokens is the answer's deterministic completion token count: the
// number of words of a text; for tool calls one token per four bytes of each
// call's name and arguments, plus one per call.
func (p plan) outputTokens() int {
	if len(p.calls) == 0 {
		return len(strings.Fields(p.text))
	}
	n := 0
	for _, c := range p.calls {
		n += (len(c.Name)+len(c.Arguments))/4 + 1
	}
	return n
}

// plan decides the answer to request number n carrying tr: the tool results
// echoed, else tool calls when tools are declared and the choice is not
// "none", else the vendor's text.
func (v *Vendor) plan(tr toolRequest, n int) plan {
	if len(tr.results) > 0 {
		texts := make([]string, len(tr.results))
		for i, r := range tr.results {
			texts[i] = r.Content
		}
		text := ToolResultPrefix + strings.Join(texts, ToolResultSeparator)
		return plan{text: text, pieces: splitText(text, v.chunks)}
	}
	if len(tr.tools) == 0 || tr.choice == "none" {
		return plan{text: v.text, pieces: v.pieces}
	}
	candidates := tr.tools
	if len(tr.allowed) > 0 {
		var allowed []toolDecl
		for _, t := range tr.tools {
			if slices.Contains(tr.allowed, t.name) {
				allowed = append(allowed, t)
			}
		}
		// A choice naming no declared tool falls back to every tool.
		if len(allowed) > 0 {
			candidates = allowed
		}
	}
	k := 1
	if v.parallelTools && !tr.noParallel && len(candidates) >= 2 {
		k = 2
	}
	p := plan{calls: make([]ToolCall, k)}
	for i, t := range candidates[:k] {
		call := ToolCall{Name: t.name, Arguments: string(toolArguments(t.schema))}
		if v.shape != rewrite.Gemini || v.geminiIDs {
			call.ID = toolCallIDPrefix[v.shape] + pad(n) + "_" + strconv.Itoa(i)
		}
		p.calls[i] = call
	}
	return p
}

// toolArguments builds deterministic arguments for a tool whose parameters
// schema is schema: a value for each required property, or for every
// property when none is required (see argValue). Keys come out sorted. A
// schema that is missing or not an object gives {}.
func toolArguments(schema json.RawMessage) []byte {
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
		Required   []string                   `json:"required"`
	}
	_ = json.Unmarshal(schema, &s) // Lenient: what does not parse is absent.
	names := s.Required
	if len(names) == 0 {
		names = slices.Sorted(maps.Keys(s.Properties))
	}
	args := make(map[string]any, len(names))
	for _, name := range names {
		args[name] = argValue(name, s.Properties[name])
	}
	return marshal(args)
}

// argValue is the deterministic value of property name with schema prop, by
// its type (case-insensitive, the first non-null one of a list): string
// "Paris" for a property named city or location, else "test"; number and
// integer 1; boolean true; array []; object {}; null null. A missing or
// unknown type is a string.
func argValue(name string, prop json.RawMessage) any {
	var p struct {
		Type json.RawMessage `json:"type"`
	}
	_ = json.Unmarshal(prop, &p)
	var types []string
	var one string
	if json.Unmarshal(p.Type, &one) == nil {
		types = []string{one}
	} else {
		_ = json.Unmarshal(p.Type, &types)
	}
	typ := ""
	for _, t := range types {
		typ = strings.ToLower(t)
		if typ != "null" {
			break
		}
	}
	switch typ {
	case "number", "integer":
		return 1
	case "boolean":
		return true
	case "array":
		return []any{}
	case "object":
		return map[string]any{}
	case "null":
		return nil
	}
	switch strings.ToLower(name) {
	case "city", "location":
		return "Paris"
	}
	return "test"
}

// splitArgs splits a tool call's JSON arguments into the two or three
// fragments of a stream, as docs/vendors.md#streams shows them: after the first
// colon, and after the first comma that follows it ({"city": | "Paris"});
// arguments without a colon ("{}") in the middle, at a rune boundary.
func splitArgs(args string) []string {
	i := strings.IndexByte(args, ':')
	if i < 0 {
		return splitText(args, 2)
	}
	head, rest := args[:i+1], args[i+1:]
	if rest == "" {
		return []string{head}
	}
	j := strings.IndexByte(rest, ',')
	if j < 0 || j == len(rest)-1 {
		return []string{head, rest}
	}
	return []string{head, rest[:j+1], rest[j+1:]}
}

// --- reading the requests ---

// parseTools reads what body (a JSON object of the vendor's shape) says
// about tools. It is lenient: what does not parse is taken as absent.
func parseTools(shape rewrite.Shape, body []byte) toolRequest {
	switch shape {
	case rewrite.Anthropic:
		return parseAnthropicTools(body)
	case rewrite.Gemini:
		return parseGeminiTools(body)
	case rewrite.OpenAIResponses:
		return parseResponsesTools(body)
	}
	return parseOpenAITools(body)
}

// parseOpenAITools reads tools[].function, tool_choice,
// parallel_tool_calls and the trailing role "tool" messages.
func parseOpenAITools(body []byte) toolRequest {
	var req struct {
		Tools []struct {
			Type     string `json:"type"`
			Function *struct {
				Name       string          `json:"name"`
				Parameters json.RawMessage `json:"parameters"`
			} `json:"function"`
		} `json:"tools"`
		ToolChoice        json.RawMessage `json:"tool_choice"`
		ParallelToolCalls *bool           `json:"parallel_tool_calls"`
		Messages          []struct {
			Role       string          `json:"role"`
			Content    json.RawMessage `json:"content"`
			ToolCallID string          `json:"tool_call_id"`
			ToolCalls  []struct {
				ID       string `json:"id"`
				Function struct {
					Name string `json:"name"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"messages"`
	}
	_ = json.Unmarshal(body, &req)
	var tr toolRequest
	for _, t := range req.Tools {
		if (t.Type == "" || t.Type == "function") && t.Function != nil && t.Function.Name != "" {
			tr.tools = append(tr.tools, toolDecl{name: t.Function.Name, schema: t.Function.Parameters})
		}
	}
	var mode string
	var named struct {
		Type     string `json:"type"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	switch {
	case json.Unmarshal(req.ToolChoice, &mode) == nil:
		tr.choice = mode
	case json.Unmarshal(req.ToolChoice, &named) == nil && named.Function.Name != "":
		tr.choice = named.Function.Name
		tr.allowed = []string{named.Function.Name}
	case len(req.ToolChoice) > 0 && string(req.ToolChoice) != "null":
		tr.choice = "auto" // allowed_tools and other forms: treated as auto.
	}
	tr.noParallel = req.ParallelToolCalls != nil && !*req.ParallelToolCalls

	names := map[string]string{}
	for _, m := range req.Messages {
		for _, c := range m.ToolCalls {
			names[c.ID] = c.Function.Name
		}
	}
	first := len(req.Messages)
	for first > 0 && req.Messages[first-1].Role == "tool" {
		first--
	}
	for _, m := range req.Messages[first:] {
		tr.results = append(tr.results, ToolResult{ID: m.ToolCallID, Name: names[m.ToolCallID], Content: textContent(m.Content)})
	}
	return tr
}

// parseAnthropicTools reads tools[] (custom tools only), tool_choice and the
// tool_result blocks of a last user message.
func parseAnthropicTools(body []byte) toolRequest {
	var req struct {
		Tools []struct {
			Type        string          `json:"type"`
			Name        string          `json:"name"`
			InputSchema json.RawMessage `json:"input_schema"`
		} `json:"tools"`
		ToolChoice *struct {
			Type                   string `json:"type"`
			Name                   string `json:"name"`
			DisableParallelToolUse bool   `json:"disable_parallel_tool_use"`
		} `json:"tool_choice"`
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	_ = json.Unmarshal(body, &req)
	var tr toolRequest
	for _, t := range req.Tools {
		// Server tools (web_search_…, bash_…) have a versioned type.
		if (t.Type == "" || t.Type == "custom") && t.Name != "" {
			tr.tools = append(tr.tools, toolDecl{name: t.Name, schema: t.InputSchema})
		}
	}
	if tc := req.ToolChoice; tc != nil {
		switch tc.Type {
		case "any":
			tr.choice = "required"
		case "tool":
			tr.choice = tc.Name
			tr.allowed = []string{tc.Name}
		default:
			tr.choice = tc.Type
		}
		tr.noParallel = tc.DisableParallelToolUse
	}

	type block struct {
		Type      string          `json:"type"`
		ID        string          `json:"id"`
		Name      string          `json:"name"`
		ToolUseID string          `json:"tool_use_id"`
		Content   json.RawMessage `json:"content"`
		IsError   bool            `json:"is_error"`
	}
	names := map[string]string{}
	for i, m := range req.Messages {
		var blocks []block
		if json.Unmarshal(m.Content, &blocks) != nil {
			continue
		}
		for _, b := range blocks {
			if m.Role == "assistant" && b.Type == "tool_use" {
				names[b.ID] = b.Name
			}
			if i == len(req.Messages)-1 && m.Role == "user" && b.Type == "tool_result" {
				tr.results = append(tr.results, ToolResult{
					ID: b.ToolUseID, Name: names[b.ToolUseID], Content: textContent(b.Content), IsError: b.IsError,
				})
			}
		}
	}
	return tr
}

// parseGeminiTools reads tools[].functionDeclarations, toolConfig and the
// functionResponse parts of a last user turn (camelCase field names, as
// the SDKs send them).
func parseGeminiTools(body []byte) toolRequest {
	var req struct {
		Tools []struct {
			FunctionDeclarations []struct {
				Name                 string          `json:"name"`
				Parameters           json.RawMessage `json:"parameters"`
				ParametersJSONSchema json.RawMessage `json:"parametersJsonSchema"`
			} `json:"functionDeclarations"`
		} `json:"tools"`
		ToolConfig *struct {
			FunctionCallingConfig *struct {
				Mode                 string   `json:"mode"`
				AllowedFunctionNames []string `json:"allowedFunctionNames"`
			} `json:"functionCallingConfig"`
		} `json:"toolConfig"`
		Contents []struct {
			Role  string `json:"role"`
			Parts []struct {
				FunctionResponse *struct {
					ID       string          `json:"id"`
					Name     string          `json:"name"`
					Response json.RawMessage `json:"response"`
				} `json:"functionResponse"`
			} `json:"parts"`
		} `json:"contents"`
	}
	_ = json.Unmarshal(body, &req)
	var tr toolRequest
	for _, t := range req.Tools {
		for _, d := range t.FunctionDeclarations {
			if d.Name == "" {
				continue
			}
			schema := d.Parameters
			if len(schema) == 0 {
				schema = d.ParametersJSONSchema
			}
			tr.tools = append(tr.tools, toolDecl{name: d.Name, schema: schema})
		}
	}
	if tc := req.ToolConfig; tc != nil && tc.FunctionCallingConfig != nil {
		fc := tc.FunctionCallingConfig
		switch mode := strings.ToUpper(fc.Mode); mode {
		case "ANY":
			tr.choice = "required"
			tr.allowed = fc.AllowedFunctionNames
			if len(fc.AllowedFunctionNames) == 1 {
				tr.choice = fc.AllowedFunctionNames[0]
			}
		case "", "MODE_UNSPECIFIED":
			tr.choice = "auto"
		default: // AUTO, NONE, VALIDATED
			tr.choice = strings.ToLower(mode)
		}
	}
	if n := len(req.Contents); n > 0 && req.Contents[n-1].Role != "model" {
		for _, p := range req.Contents[n-1].Parts {
			if fr := p.FunctionResponse; fr != nil {
				content, isErr := geminiResultText(fr.Response)
				tr.results = append(tr.results, ToolResult{ID: fr.ID, Name: fr.Name, Content: content, IsError: isErr})
			}
		}
	}
	return tr
}

// textContent is the text of an OpenAI or Anthropic content value: the
// string itself, or the text of its text parts or blocks concatenated.
func textContent(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	_ = json.Unmarshal(raw, &parts)
	var b strings.Builder
	for _, p := range parts {
		if p.Type == "text" {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

// geminiResultText is the text of a functionResponse.response, as
// ToolResult.Content describes, and whether it is an error.
func geminiResultText(raw json.RawMessage) (string, bool) {
	var r map[string]json.RawMessage
	if json.Unmarshal(raw, &r) != nil {
		return compactJSON(raw), false
	}
	if out, ok := r["output"]; ok {
		return jsonText(out), false
	}
	if e, ok := r["error"]; ok {
		return jsonText(e), true
	}
	return compactJSON(raw), false
}

// jsonText is a JSON string's value, or the compact JSON of any other value.
func jsonText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return compactJSON(raw)
}

// compactJSON is raw without insignificant whitespace (raw itself when it
// is not JSON).
func compactJSON(raw json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}
