package responses

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/detour-proxy/detour/rewrite/ir"
)

// statefulHint ends the *ir.UnsupportedError of a request that
// leans on state only OpenAI holds.
const statefulHint = " (state kept by OpenAI: the request stays on OpenAI-shaped upstreams)"

// DecodeRequest decodes an app's Responses request body into the IR.
//
// instructions and every system or developer message go to
// Request.System, in order; message items become messages (input_text,
// output_text and refusal parts as text, input_image and input_file as
// media); function_call items become tool calls of an assistant turn,
// function_call_output items tool results. Reasoning items carry
// OpenAI-encrypted state no other vendor can read and are left out.
//
// previous_response_id, conversation, background: true and item_reference
// items name state kept by OpenAI: they are an *ir.UnsupportedError, so
// that the request is answered only where that state lives. store is not
// among them: it defaults to true in the API, so nearly every request
// carries it, and storing an answer the app can later refer to is a
// convenience the request itself does not depend on
// (docs/vendors.md#openai-responses).
//
// Built-in tools (web_search, file_search, …), a file_id and other content
// the IR cannot hold are an *ir.UnsupportedError too; invalid JSON or a
// field of the wrong type is an error.
func DecodeRequest(body []byte) (*ir.Request, error) {
	if t := bytes.TrimLeft(body, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		return nil, errors.New("responses: request: not a JSON object")
	}
	var in requestIn
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, fmt.Errorf("responses: request: %w", err)
	}
	switch {
	case in.PreviousResponseID != nil && *in.PreviousResponseID != "":
		return nil, &ir.UnsupportedError{What: "previous_response_id" + statefulHint}
	case len(in.Conversation) > 0 && string(in.Conversation) != "null":
		return nil, &ir.UnsupportedError{What: "conversation" + statefulHint}
	case in.Background != nil && *in.Background:
		return nil, &ir.UnsupportedError{What: "background" + statefulHint}
	}
	r := &ir.Request{
		Model:             in.Model,
		ParallelToolCalls: in.ParallelToolCalls,
		Temperature:       in.Temperature,
		TopP:              in.TopP,
		Stream:            in.Stream,
		User:              in.User,
		// The Responses stream always ends with its usage.
		IncludeUsage: true,
	}
	if r.User == "" {
		r.User = in.SafetyIdentifier
	}
	if in.MaxOutputTokens != nil {
		r.MaxTokens = *in.MaxOutputTokens
	}
	if in.Reasoning != nil {
		r.ReasoningEffort = in.Reasoning.Effort
	}
	if in.Instructions != nil && *in.Instructions != "" {
		r.System = append(r.System, *in.Instructions)
	}
	var err error
	if r.ToolChoice, err = decodeToolChoice(in.ToolChoice); err != nil {
		return nil, err
	}
	if in.Text != nil && in.Text.Format != nil {
		if r.ResponseFormat, err = decodeFormat(in.Text.Format); err != nil {
			return nil, err
		}
	}
	for i := range in.Tools {
		t := &in.Tools[i]
		if t.Type != "function" {
			return nil, &ir.UnsupportedError{What: fmt.Sprintf("Responses %q tool", t.Type)}
		}
		p := t.Parameters
		if string(p) == "null" {
			p = nil
		}
		r.Tools = append(r.Tools, ir.Tool{Name: t.Name, Description: t.Description, Parameters: p, Strict: t.Strict != nil && *t.Strict})
	}
	if err := decodeInput(in.Input, r); err != nil {
		return nil, err
	}
	return r, nil
}

// decodeToolChoice reads "auto", "none", "required" or {"type":"function","name":…}.
func decodeToolChoice(raw json.RawMessage) (*ir.ToolChoice, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, fmt.Errorf("responses: tool_choice: %w", err)
		}
		switch s {
		case "auto":
			return &ir.ToolChoice{Mode: ir.ToolChoiceAuto}, nil
		case "none":
			return &ir.ToolChoice{Mode: ir.ToolChoiceNone}, nil
		case "required":
			return &ir.ToolChoice{Mode: ir.ToolChoiceRequired}, nil
		}
		return nil, fmt.Errorf("responses: tool_choice %q", s)
	}
	var o struct {
		Type string `json:"type"`
		Name string `json:"name"`
	}
	if err := json.Unmarshal(raw, &o); err != nil {
		return nil, fmt.Errorf("responses: tool_choice: %w", err)
	}
	if o.Type != "function" || o.Name == "" {
		return nil, &ir.UnsupportedError{What: fmt.Sprintf("Responses tool_choice of type %q", o.Type)}
	}
	return &ir.ToolChoice{Mode: ir.ToolChoiceTool, Name: o.Name}, nil
}

// decodeFormat reads text.format; "text" is the default and asks for
// nothing.
func decodeFormat(f *textFormat) (*ir.ResponseFormat, error) {
	switch f.Type {
	case "", "text":
		return nil, nil
	case "json_object":
		return &ir.ResponseFormat{Type: "json_object"}, nil
	case "json_schema":
		// The schema goes on as sent: the target judges it, as OpenAI
		// would.
		schema := f.Schema
		if string(schema) == "null" {
			schema = nil
		}
		return &ir.ResponseFormat{Type: "json_schema", Name: f.Name, Schema: schema, Strict: f.Strict != nil && *f.Strict}, nil
	}
	return nil, fmt.Errorf("responses: text.format type %q", f.Type)
}

// decodeInput reads input: a string (one user message) or a list of items.
func decodeInput(raw json.RawMessage, r *ir.Request) error {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return fmt.Errorf("responses: input: %w", err)
		}
		r.Messages = append(r.Messages, ir.Message{Role: ir.RoleUser, Parts: []ir.Part{{Kind: ir.PartText, Text: s}}})
		return nil
	}
	var items []itemIn
	if err := json.Unmarshal(raw, &items); err != nil {
		return fmt.Errorf("responses: input: %w", err)
	}
	for i := range items {
		if err := decodeItem(&items[i], r); err != nil {
			return err
		}
	}
	return nil
}

// decodeItem appends one input item to r. Consecutive function calls join
// one assistant turn (as parallel calls are one turn in Chat Completions),
// and consecutive outputs one tool turn.
func decodeItem(it *itemIn, r *ir.Request) error {
	switch it.Type {
	case "", "message":
		return decodeMessage(it, r)
	case "function_call":
		args := json.RawMessage(it.Arguments)
		if !json.Valid(args) || len(bytes.TrimSpace(args)) == 0 || bytes.TrimSpace(args)[0] != '{' {
			args = json.RawMessage("{}")
		}
		p := ir.Part{Kind: ir.PartToolCall, ToolCall: &ir.ToolCall{ID: it.CallID, Name: it.Name, Arguments: args}}
		if n := len(r.Messages); n > 0 && r.Messages[n-1].Role == ir.RoleAssistant {
			r.Messages[n-1].Parts = append(r.Messages[n-1].Parts, p)
			return nil
		}
		r.Messages = append(r.Messages, ir.Message{Role: ir.RoleAssistant, Parts: []ir.Part{p}})
		return nil
	case "function_call_output":
		content, err := outputText(it.Output)
		if err != nil {
			return err
		}
		p := ir.Part{Kind: ir.PartToolResult, ToolResult: &ir.ToolResult{CallID: it.CallID, Name: toolName(r, it.CallID), Content: content}}
		if n := len(r.Messages); n > 0 && r.Messages[n-1].Role == ir.RoleTool {
			r.Messages[n-1].Parts = append(r.Messages[n-1].Parts, p)
			return nil
		}
		r.Messages = append(r.Messages, ir.Message{Role: ir.RoleTool, Parts: []ir.Part{p}})
		return nil
	case "reasoning":
		// OpenAI's own reasoning state (encrypted_content, or an id it
		// stored): no other vendor can read it, and the turn stands
		// without it.
		return nil
	case "item_reference":
		return &ir.UnsupportedError{What: "item_reference" + statefulHint}
	}
	return &ir.UnsupportedError{What: fmt.Sprintf("Responses %q input item", it.Type)}
}

// toolName finds the name of the call a result answers, for Gemini.
func toolName(r *ir.Request, callID string) string {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		for _, p := range r.Messages[i].Parts {
			if p.Kind == ir.PartToolCall && p.ToolCall.ID == callID {
				return p.ToolCall.Name
			}
		}
	}
	return ""
}

// outputText reads a function_call_output's output: a string, or a list of
// input_text parts (joined).
func outputText(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	if raw[0] == '"' {
		var s string
		err := json.Unmarshal(raw, &s)
		return s, err
	}
	var parts []contentIn
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", fmt.Errorf("responses: function_call_output: %w", err)
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type != "input_text" && p.Type != "output_text" {
			return "", &ir.UnsupportedError{What: fmt.Sprintf("Responses %q part in a function_call_output", p.Type)}
		}
		b.WriteString(p.Text)
	}
	return b.String(), nil
}

// decodeMessage appends a message item.
func decodeMessage(it *itemIn, r *ir.Request) error {
	var parts []ir.Part
	var text []string
	if len(it.Content) > 0 && it.Content[0] == '"' {
		var s string
		if err := json.Unmarshal(it.Content, &s); err != nil {
			return fmt.Errorf("responses: message content: %w", err)
		}
		parts = []ir.Part{{Kind: ir.PartText, Text: s}}
		text = []string{s}
	} else if len(it.Content) > 0 && string(it.Content) != "null" {
		var cs []contentIn
		if err := json.Unmarshal(it.Content, &cs); err != nil {
			return fmt.Errorf("responses: message content: %w", err)
		}
		for i := range cs {
			p, err := decodePart(&cs[i])
			if err != nil {
				return err
			}
			parts = append(parts, p)
			if p.Kind == ir.PartText {
				text = append(text, p.Text)
			}
		}
	}
	switch it.Role {
	case "system", "developer":
		if len(text) != len(parts) {
			return &ir.UnsupportedError{What: "media in a " + it.Role + " message"}
		}
		r.System = append(r.System, text...)
		return nil
	case "user":
		r.Messages = append(r.Messages, ir.Message{Role: ir.RoleUser, Parts: parts})
	case "assistant":
		r.Messages = append(r.Messages, ir.Message{Role: ir.RoleAssistant, Parts: parts})
	default:
		return fmt.Errorf("responses: message role %q", it.Role)
	}
	return nil
}

// decodePart reads one content part of a message.
func decodePart(c *contentIn) (ir.Part, error) {
	switch c.Type {
	case "input_text", "output_text":
		return ir.Part{Kind: ir.PartText, Text: c.Text}, nil
	case "refusal":
		return ir.Part{Kind: ir.PartText, Text: c.Refusal}, nil
	case "input_image":
		if c.ImageURL == "" {
			return ir.Part{}, &ir.UnsupportedError{What: "Responses input_image by file_id"}
		}
		m, err := media(c.ImageURL, c.Detail)
		if err != nil {
			return ir.Part{}, err
		}
		return ir.Part{Kind: ir.PartImage, Media: m}, nil
	case "input_file":
		switch {
		case c.FileData != "":
			m, err := media(c.FileData, "")
			if err != nil {
				return ir.Part{}, err
			}
			m.Filename = c.Filename
			return ir.Part{Kind: ir.PartDocument, Media: m}, nil
		case c.FileURL != "":
			return ir.Part{Kind: ir.PartDocument, Media: &ir.Media{URL: c.FileURL, Filename: c.Filename}}, nil
		}
		return ir.Part{}, &ir.UnsupportedError{What: "Responses input_file by file_id"}
	}
	return ir.Part{}, &ir.UnsupportedError{What: fmt.Sprintf("Responses %q content part", c.Type)}
}

// media reads an image_url or file_data: a data: URI (base64) or a URL.
func media(s, detail string) (*ir.Media, error) {
	rest, ok := strings.CutPrefix(s, "data:")
	if !ok {
		// By reference: whether the target can fetch it is the target
		// encoder's call (some take only http(s), Gemini gs:// too).
		return &ir.Media{URL: s, Detail: detail}, nil
	}
	meta, payload, found := strings.Cut(rest, ",")
	if !found {
		return nil, errors.New("responses: data URI without a comma")
	}
	mt, isB64 := strings.CutSuffix(meta, ";base64")
	mt, _, _ = strings.Cut(mt, ";")
	if !isB64 {
		text, err := url.PathUnescape(payload)
		if err != nil {
			return nil, fmt.Errorf("responses: data URI: %w", err)
		}
		payload = base64.StdEncoding.EncodeToString([]byte(text))
	}
	return &ir.Media{MediaType: mt, Data: payload, Detail: detail}, nil
}
