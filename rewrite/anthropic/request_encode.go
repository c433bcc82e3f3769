package anthropic

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/detour-proxy/detour/rewrite/ir"
)

// Thinking budgets for OpenAI's reasoning_effort (docs/vendors.md#request-fields: the
// figures litellm uses), and the smallest budget_tokens the API accepts.
const (
	budgetLow         = 1024
	budgetMedium      = 2048
	budgetHigh        = 4096
	minThinkingBudget = 1024
)

// minThinkingTopP is the lowest top_p the API accepts with thinking on.
const minThinkingTopP = 0.95

// placeholderToolName is declared (and never offered: tool_choice none)
// when the history holds tool calls but the request declares no tools,
// which the API refuses (docs/vendors.md#tool-turn-pairing, litellm's dummy tool).
const placeholderToolName = "detour_placeholder_tool"

// EncodeRequest writes r as the body of an Anthropic Messages request for
// the upstream o describes (docs/vendors.md#request-fields, docs/vendors.md#translation-pitfalls).
// Every lossy change is told to o.Notes. It returns an *ir.UnsupportedError
// for what Anthropic cannot take at all: n > 1, an image or document it
// cannot read, media in an assistant turn, a request with no messages.
func EncodeRequest(r *ir.Request, o ir.EncodeOptions) ([]byte, error) {
	if r == nil {
		return nil, errors.New("anthropic: encode request: nil request")
	}
	if r.N > 1 {
		return nil, &ir.UnsupportedError{What: "n > 1"}
	}
	e := requestEncoder{notes: o.Notes}
	out := outRequest{Model: o.Model, Stream: r.Stream}
	if out.Model == "" {
		out.Model = r.Model
	}
	for _, s := range r.System {
		if !isBlank(s) { // an empty text block is refused (docs/vendors.md#empty-content)
			out.System = append(out.System, outBlock{Type: "text", Text: s})
		}
	}
	msgs, err := e.messages(r.Messages)
	if err != nil {
		return nil, err
	}
	if len(msgs) == 0 {
		return nil, &ir.UnsupportedError{What: "a request without messages"}
	}
	out.Messages = msgs

	budget := e.thinkingBudget(r)
	// Decided before the tools: whether thinking stays on changes how JSON
	// mode and a forced tool_choice can be expressed.
	if budget > 0 && lastToolTurnLacksThinking(msgs) {
		// With thinking on, the assistant turn of an ongoing tool loop must
		// start with its signed thinking block; another vendor's history
		// has none to replay (docs/vendors.md#thinking-and-tools).
		e.note("thinking disabled: the last assistant tool-use turn has no thinking block to replay")
		budget = 0
	}
	out.Tools, out.ToolChoice, budget = e.tools(r, msgs, budget)

	out.Temperature, out.TopP, out.TopK = r.Temperature, r.TopP, r.TopK
	if budget > 0 {
		// Thinking allows neither temperature nor top_k changes, and top_p
		// only from 0.95 up.
		if t := out.Temperature; t != nil && *t != 1 {
			e.note("temperature " + formatFloat(*t) + " dropped: thinking is on")
			out.Temperature = nil
		}
		if out.TopK != nil {
			e.note("top_k dropped: thinking is on")
			out.TopK = nil
		}
		if p := out.TopP; p != nil && *p < minThinkingTopP {
			e.note("top_p " + formatFloat(*p) + " dropped: thinking is on")
			out.TopP = nil
		}
	}
	if t := out.Temperature; t != nil && (*t > 1 || *t < 0) {
		clamped := min(max(*t, 0), 1)
		e.note("temperature clamped from " + formatFloat(*t) + " to " + formatFloat(clamped))
		out.Temperature = &clamped
	}

	out.MaxTokens = r.MaxTokens
	if out.MaxTokens <= 0 {
		out.MaxTokens = o.DefaultMaxTokens
	}
	if out.MaxTokens <= 0 {
		out.MaxTokens = ir.DefaultAnthropicMaxTokens
	}
	if budget > 0 {
		if budget >= out.MaxTokens {
			// budget_tokens must be below max_tokens (docs/vendors.md#max-tokens-and-thinking-budgets): keep the
			// answer's room on top of the thinking.
			raised := budget + out.MaxTokens
			e.note(fmt.Sprintf("max_tokens raised from %d to %d above the thinking budget %d", out.MaxTokens, raised, budget))
			out.MaxTokens = raised
		}
		out.Thinking = &outThinking{Type: "enabled", BudgetTokens: budget}
	}

	for _, s := range r.Stop {
		if isBlank(s) {
			e.note("blank stop sequence " + strconv.Quote(s) + " removed")
			continue
		}
		out.StopSequences = append(out.StopSequences, s)
	}
	if r.Seed != nil {
		e.note("seed dropped: Anthropic has none")
	}
	if r.User != "" {
		out.Metadata = &outMetadata{UserID: r.User}
	}
	return marshal(&out, 1024)
}

// requestEncoder carries what EncodeRequest reports while it works.
type requestEncoder struct{ notes func(string) }

func (e *requestEncoder) note(s string) {
	if e.notes != nil {
		e.notes(s)
	}
}

// messages turns the IR's turns into Anthropic's: user and assistant only,
// consecutive turns of one role merged, tool results first in their user
// turn, no empty blocks or turns.
func (e *requestEncoder) messages(in []ir.Message) ([]outMessage, error) {
	out := make([]outMessage, 0, len(in))
	for i := range in {
		m := &in[i]
		var role string
		switch m.Role {
		case ir.RoleUser, ir.RoleTool:
			role = "user"
		case ir.RoleAssistant:
			role = "assistant"
		default:
			return nil, fmt.Errorf("anthropic: messages[%d]: unknown role %q", i, m.Role)
		}
		blocks := make([]outBlock, 0, len(m.Parts))
		for j := range m.Parts {
			b, ok, err := e.block(role, &m.Parts[j])
			if err != nil {
				return nil, fmt.Errorf("anthropic: messages[%d].parts[%d]: %w", i, j, err)
			}
			if ok {
				blocks = append(blocks, b)
			}
		}
		if len(blocks) == 0 {
			if len(m.Parts) > 0 {
				e.note(fmt.Sprintf("message %d dropped: nothing Anthropic accepts in it", i))
			}
			continue
		}
		if n := len(out); n > 0 && out[n-1].Role == role {
			out[n-1].Content = append(out[n-1].Content, blocks...)
			continue
		}
		out = append(out, outMessage{Role: role, Content: blocks})
	}
	for i := range out {
		if out[i].Role == "user" {
			resultsFirst(out[i].Content)
		}
	}
	if n := len(out); n > 0 && out[n-1].Role == "assistant" {
		// A final assistant turn is a prefill, which may not end in
		// whitespace.
		c := out[n-1].Content
		if last := &c[len(c)-1]; last.Type == "text" {
			last.Text = strings.TrimRightFunc(last.Text, isSpace)
			if last.Text == "" {
				out[n-1].Content = c[:len(c)-1]
				if len(out[n-1].Content) == 0 {
					out = out[:n-1]
				}
			}
		}
	}
	return out, nil
}

// resultsFirst moves a user turn's tool_result blocks before its other
// blocks, keeping each group's order: the API wants the results first.
func resultsFirst(c []outBlock) {
	seenOther := false
	for i := range c {
		if c[i].Type != "tool_result" {
			seenOther = true
		} else if seenOther {
			slices.SortStableFunc(c, func(a, b outBlock) int {
				return resultRank(a) - resultRank(b)
			})
			return
		}
	}
}

func resultRank(b outBlock) int {
	if b.Type == "tool_result" {
		return 0
	}
	return 1
}

// block encodes one part of a turn of the given Anthropic role. ok is false
// for a part that is left out (blank text, unsigned thinking).
func (e *requestEncoder) block(role string, p *ir.Part) (b outBlock, ok bool, err error) {
	switch p.Kind {
	case ir.PartText:
		if isBlank(p.Text) { // "text content blocks must be non-empty" (docs/vendors.md#empty-content)
			return b, false, nil
		}
		return outBlock{Type: "text", Text: p.Text}, true, nil
	case ir.PartImage, ir.PartDocument:
		if role != "user" {
			return b, false, &ir.UnsupportedError{What: string(p.Kind) + " in an assistant turn"}
		}
		if p.Kind == ir.PartImage {
			src, err := imageSource(p.Media)
			return outBlock{Type: "image", Source: src}, err == nil, err
		}
		src, err := documentSource(p.Media)
		b = outBlock{Type: "document", Source: src}
		if p.Media != nil {
			b.Title = p.Media.Filename
		}
		return b, err == nil, err
	case ir.PartToolCall:
		tc := p.ToolCall
		if tc == nil {
			return b, false, errors.New("tool_call part without a tool call")
		}
		if role != "assistant" {
			return b, false, &ir.UnsupportedError{What: "a tool call in a user turn"}
		}
		args := bytes.TrimSpace(tc.Arguments)
		if !isObject(args) {
			// Anthropic refuses a non-object input (docs/vendors.md#tool-arguments-are-always-an-object).
			if len(args) > 0 {
				e.note("tool call " + strconv.Quote(tc.Name) + " arguments are not a JSON object: sent as {}")
			}
			args = emptyObject()
		}
		return outBlock{Type: "tool_use", ID: ir.SafeToolID(tc.ID), Name: tc.Name, Input: args}, true, nil
	case ir.PartToolResult:
		tr := p.ToolResult
		if tr == nil {
			return b, false, errors.New("tool_result part without a tool result")
		}
		if role != "user" {
			return b, false, &ir.UnsupportedError{What: "a tool result in an assistant turn"}
		}
		// An empty result is sent without content rather than as "".
		return outBlock{Type: "tool_result", ToolUseID: ir.SafeToolID(tr.CallID), Content: tr.Content, IsError: tr.IsError}, true, nil
	case ir.PartThinking:
		if role != "assistant" {
			e.note("thinking in a user turn dropped")
			return b, false, nil
		}
		if p.Signature == "" {
			// Anthropic verifies the signature of every replayed thinking
			// block; another vendor's reasoning has none.
			e.note("thinking without a signature dropped")
			return b, false, nil
		}
		if p.Text == "" {
			return outBlock{Type: "redacted_thinking", Data: p.Signature}, true, nil
		}
		return outBlock{Type: "thinking", Thinking: p.Text, Signature: p.Signature}, true, nil
	}
	return b, false, fmt.Errorf("unknown part kind %q", p.Kind)
}

// imageTypes are the image media types the API reads.
var imageTypes = map[string]bool{"image/jpeg": true, "image/png": true, "image/gif": true, "image/webp": true}

// imageSource is an image's source block: base64 data, or a URL (https or
// http; a data: URL is unpacked into base64).
func imageSource(m *ir.Media) (*outSource, error) {
	if m == nil {
		return nil, errors.New("image part without media")
	}
	mt, data := m.MediaType, m.Data
	if data == "" {
		if u, ok := unpackDataURL(m.URL); ok {
			mt, data = u.mediaType, u.data
		} else if isHTTPURL(m.URL) {
			return &outSource{Type: "url", URL: m.URL}, nil
		} else {
			return nil, &ir.UnsupportedError{What: "image URL " + quote(urlScheme(m.URL))}
		}
	}
	mt = strings.ToLower(mt)
	if !imageTypes[mt] {
		return nil, &ir.UnsupportedError{What: "image type " + quote(mt)}
	}
	return &outSource{Type: "base64", MediaType: mt, Data: data}, nil
}

// documentSource is a document's source block: a base64 PDF, plain text,
// or a URL to a PDF.
func documentSource(m *ir.Media) (*outSource, error) {
	if m == nil {
		return nil, errors.New("document part without media")
	}
	mt, data := m.MediaType, m.Data
	if data == "" {
		if u, ok := unpackDataURL(m.URL); ok {
			mt, data = u.mediaType, u.data
		} else if isHTTPURL(m.URL) {
			return &outSource{Type: "url", URL: m.URL}, nil
		} else {
			return nil, &ir.UnsupportedError{What: "document URL " + quote(urlScheme(m.URL))}
		}
	}
	mt = strings.ToLower(mt)
	switch {
	case mt == "application/pdf":
		return &outSource{Type: "base64", MediaType: mt, Data: data}, nil
	case mt == "text/plain" || strings.HasPrefix(mt, "text/plain;"):
		text, err := base64.StdEncoding.DecodeString(data)
		if err != nil {
			return nil, fmt.Errorf("text document: %w", err)
		}
		return &outSource{Type: "text", MediaType: "text/plain", Data: string(text)}, nil
	}
	return nil, &ir.UnsupportedError{What: "document type " + quote(mt)}
}

// dataURL is what a data: URL holds.
type dataURL struct{ mediaType, data string }

// unpackDataURL reads "data:<media type>;base64,<data>". Other data: URLs
// (percent-encoded) are not read.
func unpackDataURL(u string) (dataURL, bool) {
	rest, ok := strings.CutPrefix(u, "data:")
	if !ok {
		return dataURL{}, false
	}
	meta, data, ok := strings.Cut(rest, ",")
	if !ok {
		return dataURL{}, false
	}
	mt, ok := strings.CutSuffix(meta, ";base64")
	if !ok || data == "" {
		return dataURL{}, false
	}
	return dataURL{mediaType: mt, data: data}, true
}

func isHTTPURL(u string) bool {
	return strings.HasPrefix(u, "https://") || strings.HasPrefix(u, "http://")
}

// urlScheme is the part of u before ':' (for messages; never the data).
func urlScheme(u string) string {
	if i := strings.IndexByte(u, ':'); i >= 0 {
		return u[:i]
	}
	return "no scheme"
}

// thinkingBudget returns budget_tokens for r, 0 for thinking off: the
// request's own budget, else its reasoning effort's.
func (e *requestEncoder) thinkingBudget(r *ir.Request) int {
	b := r.ThinkingBudget
	if b == 0 {
		switch r.ReasoningEffort {
		case "", "none":
			return 0
		case "minimal", "low":
			b = budgetLow
		case "medium":
			b = budgetMedium
		case "high", "xhigh", "max":
			b = budgetHigh
		default:
			e.note("reasoning_effort " + quote(r.ReasoningEffort) + " not understood: thinking off")
			return 0
		}
	}
	if b < 0 {
		// Gemini's -1: the model decides. Anthropic needs a number.
		e.note("dynamic thinking budget sent as " + strconv.Itoa(budgetMedium))
		b = budgetMedium
	}
	if b < minThinkingBudget {
		e.note(fmt.Sprintf("thinking budget raised from %d to %d (the API minimum)", b, minThinkingBudget))
		b = minThinkingBudget
	}
	return b
}

// tools returns the tools and tool_choice to send, and the thinking budget
// left after resolving their conflicts: a forced tool_choice and thinking
// exclude each other (docs/vendors.md#thinking-and-tools).
func (e *requestEncoder) tools(r *ir.Request, msgs []outMessage, budget int) ([]outTool, *outToolChoice, int) {
	var tools []outTool
	if n := len(r.Tools); n > 0 {
		tools = make([]outTool, 0, n+1)
	}
	for _, t := range r.Tools {
		// input_schema is required and must be an object schema.
		schema := bytes.TrimSpace(t.Parameters)
		if !isObject(schema) || string(schema) == "{}" {
			if len(schema) > 0 && string(schema) != "{}" && string(schema) != "null" {
				e.note("tool " + strconv.Quote(t.Name) + " parameters are not a JSON object: sent as an empty object schema")
			}
			schema = json.RawMessage(`{"type":"object"}`)
		}
		tools = append(tools, outTool{Name: t.Name, Description: t.Description, InputSchema: schema})
	}
	choice := toolChoice(r.ToolChoice)

	if rf := r.ResponseFormat; rf != nil && (rf.Type == "json_object" || rf.Type == "json_schema") {
		schema := json.RawMessage(`{"type":"object"}`)
		if rf.Type == "json_schema" && isObject(rf.Schema) {
			schema = rf.Schema
		}
		desc := "Respond with the answer as this tool's input, a JSON object."
		if rf.Name != "" {
			desc = "Respond with the answer as this tool's input, a JSON object (" + rf.Name + ")."
		}
		tools = append(tools, outTool{Name: JSONToolName, Description: desc, InputSchema: schema})
		switch {
		case budget > 0:
			e.note("JSON mode: " + JSONToolName + " offered, not forced, because thinking is on")
			choice = &outToolChoice{Type: "auto"}
		case r.ToolChoice != nil && r.ToolChoice.Mode == ir.ToolChoiceTool:
			// The app forces one of its own tools; keep that.
		case len(r.Tools) > 0 && (r.ToolChoice == nil || r.ToolChoice.Mode != ir.ToolChoiceNone):
			// Some tool must be called: one of the app's, or the answer.
			choice = &outToolChoice{Type: "any"}
		default:
			choice = &outToolChoice{Type: "tool", Name: JSONToolName}
		}
	} else if budget > 0 && choice != nil && (choice.Type == "any" || choice.Type == "tool") {
		// The app's forced tool matters more to its code than reasoning.
		e.note("thinking disabled: tool_choice forces a tool")
		budget = 0
	}

	if len(tools) == 0 {
		if !historyHasTools(msgs) {
			return nil, nil, budget
		}
		tools = []outTool{{
			Name:        placeholderToolName,
			Description: "Placeholder for the tools of earlier turns. Not available.",
			InputSchema: json.RawMessage(`{"type":"object"}`),
		}}
		e.note("placeholder tool declared (tool_choice none): the history has tool calls but the request declares no tools")
		return tools, &outToolChoice{Type: "none"}, budget
	}
	if p := r.ParallelToolCalls; p != nil && !*p {
		if choice == nil {
			choice = &outToolChoice{Type: "auto"}
		}
		if choice.Type != "none" {
			choice.DisableParallelToolUse = true
		}
	}
	return tools, choice, budget
}

// toolChoice maps the IR's tool choice; nil leaves Anthropic's default
// (auto).
func toolChoice(tc *ir.ToolChoice) *outToolChoice {
	if tc == nil {
		return nil
	}
	switch tc.Mode {
	case ir.ToolChoiceNone:
		return &outToolChoice{Type: "none"}
	case ir.ToolChoiceRequired:
		return &outToolChoice{Type: "any"}
	case ir.ToolChoiceTool:
		return &outToolChoice{Type: "tool", Name: tc.Name}
	}
	return &outToolChoice{Type: "auto"}
}

// historyHasTools reports whether any turn holds a tool_use or tool_result.
func historyHasTools(msgs []outMessage) bool {
	for _, m := range msgs {
		for _, b := range m.Content {
			if b.Type == "tool_use" || b.Type == "tool_result" {
				return true
			}
		}
	}
	return false
}

// lastToolTurnLacksThinking reports whether the last assistant turn calls a
// tool without starting with a thinking block, which the API refuses when
// thinking is on.
func lastToolTurnLacksThinking(msgs []outMessage) bool {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role != "assistant" {
			continue
		}
		c := msgs[i].Content
		if t := c[0].Type; t == "thinking" || t == "redacted_thinking" {
			return false
		}
		return slices.ContainsFunc(c, func(b outBlock) bool { return b.Type == "tool_use" })
	}
	return false
}

// isObject reports whether v is a JSON object.
func isObject(v json.RawMessage) bool {
	t := bytes.TrimSpace(v)
	return len(t) >= 2 && t[0] == '{' && json.Valid(t)
}

// isBlank reports whether s is empty or only whitespace.
func isBlank(s string) bool { return strings.TrimFunc(s, isSpace) == "" }

// isSpace is the whitespace the API trims (Unicode White_Space).
func isSpace(r rune) bool {
	switch r {
	case ' ', '\t', '\n', '\r', '\v', '\f':
		return true
	}
	return r > 0x7f && strings.ContainsRune("\u0085\u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000", r)
}

func formatFloat(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

// marshal encodes v as compact JSON without HTML escaping (the text is the
// user's, and the API reads it either way), sizeHint bytes preallocated.
func marshal(v any, sizeHint int) ([]byte, error) {
	buf := bytes.NewBuffer(make([]byte, 0, sizeHint))
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("anthropic: encode: %w", err)
	}
	b := buf.Bytes()
	return b[:len(b)-1], nil // Encode's newline
}
