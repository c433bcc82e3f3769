package responses

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/detour-proxy/detour/rewrite/ir"
)

// Wire types of a Responses request as detour writes it for an upstream.
type (
	requestOut struct {
		Model             string      `json:"model"`
		Input             []any       `json:"input"`
		Instructions      string      `json:"instructions,omitempty"`
		Tools             []toolOut   `json:"tools,omitempty"`
		ToolChoice        any         `json:"tool_choice,omitempty"`
		ParallelToolCalls *bool       `json:"parallel_tool_calls,omitempty"`
		MaxOutputTokens   int         `json:"max_output_tokens,omitempty"`
		Temperature       *float64    `json:"temperature,omitempty"`
		TopP              *float64    `json:"top_p,omitempty"`
		Text              *textConfig `json:"text,omitempty"`
		Reasoning         *reasoning  `json:"reasoning,omitempty"`
		Stream            bool        `json:"stream,omitempty"`
		Store             bool        `json:"store"`
		User              string      `json:"user,omitempty"`
	}
	toolOut struct {
		Type        string          `json:"type"`
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters"`
		Strict      bool            `json:"strict"`
	}
	messageOut struct {
		Type    string `json:"type"`
		Role    string `json:"role"`
		Content []any  `json:"content"`
	}
	textPartOut struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	imagePartOut struct {
		Type     string `json:"type"`
		ImageURL string `json:"image_url"`
		Detail   string `json:"detail"`
	}
	filePartOut struct {
		Type     string `json:"type"`
		FileData string `json:"file_data,omitempty"`
		FileURL  string `json:"file_url,omitempty"`
		Filename string `json:"filename,omitempty"`
	}
	functionCallOut struct {
		Type      string `json:"type"`
		CallID    string `json:"call_id"`
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	}
	functionOutputOut struct {
		Type   string `json:"type"`
		CallID string `json:"call_id"`
		Output string `json:"output"`
	}
	namedToolChoice struct {
		Type string `json:"type"`
		Name string `json:"name"`
	}
)

// Thinking budgets at or under these become the effort named (the
// reverse of the Anthropic and Gemini encoders' low 1024, medium 2048,
// high 4096).
const (
	budgetLow    = 1024
	budgetMedium = 2048
)

// EncodeRequest encodes r as a Responses request for an upstream, with
// model o.Model.
//
// Every system prompt becomes the instructions (joined by a blank line);
// turns become input items: text and media as message content, tool calls
// as function_call items, tool results as function_call_output items.
// store is false: detour asks for nothing to be kept, since a later
// request may be answered elsewhere. Thinking parts are left out (the
// Responses API takes back only its own encrypted reasoning). Stop
// sequences, seed and top_k have no Responses field and are dropped with a
// note; n > 1 is an *ir.UnsupportedError.
func EncodeRequest(r *ir.Request, o ir.EncodeOptions) ([]byte, error) {
	note := func(format string, args ...any) {
		if o.Notes != nil {
			o.Notes(fmt.Sprintf(format, args...))
		}
	}
	if r.N > 1 {
		return nil, &ir.UnsupportedError{What: "n > 1 (the Responses API answers once)"}
	}
	out := requestOut{
		Model:             o.Model,
		Input:             make([]any, 0, len(r.Messages)),
		Instructions:      strings.Join(r.System, "\n\n"),
		ParallelToolCalls: r.ParallelToolCalls,
		MaxOutputTokens:   r.MaxTokens,
		Temperature:       r.Temperature,
		TopP:              r.TopP,
		Stream:            r.Stream,
		User:              r.User,
	}
	if len(r.Stop) > 0 {
		note("stop sequences dropped: the Responses API has none")
	}
	if r.Seed != nil {
		note("seed dropped: the Responses API has none")
	}
	if r.TopK != nil {
		note("top_k dropped: the Responses API has none")
	}
	for _, t := range r.Tools {
		p := t.Parameters
		if len(p) == 0 {
			p = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		out.Tools = append(out.Tools, toolOut{Type: "function", Name: t.Name, Description: t.Description, Parameters: p, Strict: t.Strict})
	}
	if tc := r.ToolChoice; tc != nil {
		switch tc.Mode {
		case ir.ToolChoiceTool:
			out.ToolChoice = namedToolChoice{Type: "function", Name: tc.Name}
		case ir.ToolChoiceAuto, ir.ToolChoiceNone, ir.ToolChoiceRequired:
			out.ToolChoice = string(tc.Mode)
		}
	}
	if f := r.ResponseFormat; f != nil {
		tf := &textFormat{Type: f.Type}
		if f.Type == "json_schema" {
			tf.Name, tf.Schema = f.Name, f.Schema
			if tf.Name == "" {
				tf.Name = "response"
			}
			if f.Strict {
				tf.Strict = &f.Strict
			}
		}
		out.Text = &textConfig{Format: tf}
	}
	switch {
	case r.ReasoningEffort != "":
		out.Reasoning = &reasoning{Effort: r.ReasoningEffort}
	case r.ThinkingBudget > 0:
		e := "high"
		if r.ThinkingBudget <= budgetLow {
			e = "low"
		} else if r.ThinkingBudget <= budgetMedium {
			e = "medium"
		}
		out.Reasoning = &reasoning{Effort: e}
	}
	dropped := false
	for i := range r.Messages {
		var err error
		if out.Input, err = encodeMessage(out.Input, &r.Messages[i], &dropped); err != nil {
			return nil, err
		}
	}
	if dropped {
		note("thinking parts dropped: the Responses API takes back only its own reasoning items")
	}
	return json.Marshal(out)
}

// encodeMessage appends the input items of one message.
func encodeMessage(items []any, m *ir.Message, dropped *bool) ([]any, error) {
	role := "user"
	if m.Role == ir.RoleAssistant {
		role = "assistant"
	}
	var content []any
	flush := func() {
		if len(content) > 0 {
			items = append(items, messageOut{Type: "message", Role: role, Content: content})
			content = nil
		}
	}
	textType := "input_text"
	if role == "assistant" {
		textType = "output_text"
	}
	for _, p := range m.Parts {
		switch p.Kind {
		case ir.PartText:
			content = append(content, textPartOut{Type: textType, Text: p.Text})
		case ir.PartImage:
			if role == "assistant" {
				return nil, &ir.UnsupportedError{What: "an image in an assistant turn"}
			}
			u := p.Media.URL
			if u == "" {
				u = "data:" + p.Media.MediaType + ";base64," + p.Media.Data
			}
			d := p.Media.Detail
			if d == "" {
				d = "auto"
			}
			content = append(content, imagePartOut{Type: "input_image", ImageURL: u, Detail: d})
		case ir.PartDocument:
			if role == "assistant" {
				return nil, &ir.UnsupportedError{What: "a file in an assistant turn"}
			}
			f := filePartOut{Type: "input_file", Filename: p.Media.Filename, FileURL: p.Media.URL}
			if p.Media.URL == "" {
				mt := p.Media.MediaType
				if mt == "" {
					mt = "application/octet-stream"
				}
				f.FileData = "data:" + mt + ";base64," + p.Media.Data
				if f.Filename == "" {
					f.Filename = "file"
				}
			}
			content = append(content, f)
		case ir.PartThinking:
			*dropped = true
		case ir.PartToolCall:
			flush()
			items = append(items, functionCallOut{Type: "function_call", CallID: p.ToolCall.ID, Name: p.ToolCall.Name, Arguments: string(argsOrEmpty(p.ToolCall.Arguments))})
		case ir.PartToolResult:
			flush()
			out := p.ToolResult.Content
			if p.ToolResult.IsError && !p.ToolResult.IsJSON {
				out = "error: " + out
			}
			items = append(items, functionOutputOut{Type: "function_call_output", CallID: p.ToolResult.CallID, Output: out})
		}
	}
	flush()
	return items, nil
}

// argsOrEmpty returns a tool call's arguments, or {} when there are none.
func argsOrEmpty(a json.RawMessage) json.RawMessage {
	if len(a) == 0 {
		return json.RawMessage("{}")
	}
	return a
}
