package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/detour-proxy/detour/rewrite/ir"
)

// DecodeRequest decodes an app's chat.completions request body into the IR.
//
// Every system and developer message goes to Request.System, one entry per
// text part, in order (docs/vendors.md#system-prompts: never only the first). Tool
// messages become RoleTool messages, one ToolResult each, named from the
// assistant tool call they answer. Tool-call arguments, a string of JSON on
// the wire, become a JSON object; arguments that are not a JSON object
// become {}.
//
// Fields the IR does not carry (logprobs, penalties, metadata…) are ignored.
// Invalid JSON or a field of the wrong type is an error; content the IR
// cannot hold (audio, a file_id, a non-function tool) is an
// *ir.UnsupportedError.
func DecodeRequest(body []byte) (*ir.Request, error) {
	if err := expectObject(body); err != nil {
		return nil, fmt.Errorf("openai: request: %w", err)
	}
	var in requestIn
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, fmt.Errorf("openai: request: %w", err)
	}
	r := &ir.Request{
		Model:             in.Model,
		ParallelToolCalls: in.ParallelToolCalls,
		Temperature:       in.Temperature,
		TopP:              in.TopP,
		Seed:              in.Seed,
		ReasoningEffort:   in.ReasoningEffort,
		Stream:            in.Stream,
		User:              in.User,
	}
	switch {
	case in.MaxCompletionTokens != nil:
		r.MaxTokens = *in.MaxCompletionTokens
	case in.MaxTokens != nil:
		r.MaxTokens = *in.MaxTokens
	}
	if in.N != nil {
		r.N = *in.N
	}
	if in.StreamOptions != nil {
		r.IncludeUsage = in.StreamOptions.IncludeUsage
	}
	var err error
	if r.Stop, err = decodeStop(in.Stop); err != nil {
		return nil, err
	}
	if r.ToolChoice, err = decodeToolChoice(in.ToolChoice); err != nil {
		return nil, err
	}
	if r.ResponseFormat, err = decodeResponseFormat(in.ResponseFormat); err != nil {
		return nil, err
	}
	if len(in.Tools) > 0 {
		r.Tools = make([]ir.Tool, 0, len(in.Tools))
		for i := range in.Tools {
			t := &in.Tools[i]
			if t.Type != "function" && t.Type != "" {
				return nil, &ir.UnsupportedError{What: fmt.Sprintf("OpenAI %q tool", t.Type)}
			}
			r.Tools = append(r.Tools, ir.Tool{
				Name:        t.Function.Name,
				Description: t.Function.Description,
				Parameters:  nullToNil(t.Function.Parameters),
				Strict:      t.Function.Strict != nil && *t.Function.Strict,
			})
		}
	}
	if err := decodeMessages(in.Messages, r); err != nil {
		return nil, err
	}
	return r, nil
}

// expectObject rejects a body that is not a JSON object, which
// json.Unmarshal would accept silently when it is null.
func expectObject(body []byte) error {
	b := bytes.TrimLeft(body, " \t\r\n")
	if len(b) == 0 || b[0] != '{' {
		return errors.New("body is not a JSON object")
	}
	return nil
}

// nullToNil drops an explicit JSON null from an optional raw value.
func nullToNil(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	return raw
}

func decodeStop(raw []byte) ([]string, error) {
	switch {
	case len(raw) == 0 || string(raw) == "null":
		return nil, nil
	case raw[0] == '"':
		s, err := unquote(raw)
		if err != nil {
			return nil, fmt.Errorf("openai: stop: %w", err)
		}
		return []string{s}, nil
	}
	var list []string
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, fmt.Errorf("openai: stop: want a string or an array of strings: %w", err)
	}
	return list, nil
}

func decodeToolChoice(raw []byte) (*ir.ToolChoice, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if raw[0] == '"' {
		s, err := unquote(raw)
		if err != nil {
			return nil, fmt.Errorf("openai: tool_choice: %w", err)
		}
		switch s {
		case "auto":
			return &ir.ToolChoice{Mode: ir.ToolChoiceAuto}, nil
		case "none":
			return &ir.ToolChoice{Mode: ir.ToolChoiceNone}, nil
		case "required":
			return &ir.ToolChoice{Mode: ir.ToolChoiceRequired}, nil
		}
		return nil, fmt.Errorf("openai: tool_choice: unknown value %q", s)
	}
	var c toolChoiceIn
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, fmt.Errorf("openai: tool_choice: want a string or an object: %w", err)
	}
	if c.Type != "function" {
		// allowed_tools and custom tools have no IR equivalent.
		return nil, &ir.UnsupportedError{What: fmt.Sprintf("OpenAI tool_choice of type %q", c.Type)}
	}
	if c.Function.Name == "" {
		return nil, errors.New("openai: tool_choice: function without a name")
	}
	return &ir.ToolChoice{Mode: ir.ToolChoiceTool, Name: c.Function.Name}, nil
}

func decodeResponseFormat(f *formatIn) (*ir.ResponseFormat, error) {
	if f == nil {
		return nil, nil
	}
	switch f.Type {
	case "text", "":
		return nil, nil
	case "json_object":
		return &ir.ResponseFormat{Type: "json_object"}, nil
	case "json_schema":
		rf := &ir.ResponseFormat{Type: "json_schema"}
		if s := f.JSONSchema; s != nil {
			rf.Name = s.Name
			rf.Schema = nullToNil(s.Schema)
			rf.Strict = s.Strict != nil && *s.Strict
		}
		return rf, nil
	}
	return nil, &ir.UnsupportedError{What: fmt.Sprintf("OpenAI response_format %q", f.Type)}
}

// decodeMessages fills r.System and r.Messages from the wire messages.
func decodeMessages(msgs []messageIn, r *ir.Request) error {
	r.Messages = make([]ir.Message, 0, len(msgs))
	// callNames maps the tool calls seen so far to their tool's name, so a
	// tool result carries the name Gemini's functionResponse needs.
	var callNames map[string]string
	for i := range msgs {
		m := &msgs[i]
		switch m.Role {
		case "system", "developer":
			parts, err := decodeContent(m.Content, false)
			if err != nil {
				return fmt.Errorf("openai: messages[%d]: %w", i, err)
			}
			for _, p := range parts {
				if p.Kind != ir.PartText {
					return fmt.Errorf("openai: messages[%d]: a %s message may hold only text", i, m.Role)
				}
				r.System = append(r.System, p.Text)
			}
		case "user":
			parts, err := decodeContent(m.Content, false)
			if err != nil {
				return fmt.Errorf("openai: messages[%d]: %w", i, err)
			}
			r.Messages = append(r.Messages, ir.Message{Role: ir.RoleUser, Parts: parts, Name: m.Name})
		case "assistant":
			parts, err := decodeContent(m.Content, true)
			if err != nil {
				return fmt.Errorf("openai: messages[%d]: %w", i, err)
			}
			if m.Refusal != "" {
				parts = append(parts, ir.Part{Kind: ir.PartText, Text: m.Refusal})
			}
			for j := range m.ToolCalls {
				tc := &m.ToolCalls[j]
				if tc.Type != "function" && tc.Type != "" {
					return &ir.UnsupportedError{What: fmt.Sprintf("OpenAI %q tool call", tc.Type)}
				}
				parts = append(parts, toolCallPart(tc.ID, tc.Function))
				if callNames == nil {
					callNames = make(map[string]string)
				}
				callNames[tc.ID] = tc.Function.Name
			}
			if fc := m.FunctionCall; fc != nil && len(m.ToolCalls) == 0 {
				// The legacy functions API has no call ids; the call is
				// answered by a role "function" message, which is refused
				// below, so this only keeps a history readable.
				parts = append(parts, toolCallPart(ir.GeneratedToolID(fc.Name, 0), *fc))
			}
			r.Messages = append(r.Messages, ir.Message{Role: ir.RoleAssistant, Parts: parts, Name: m.Name})
		case "tool":
			text, err := decodeToolContent(m.Content)
			if err != nil {
				return fmt.Errorf("openai: messages[%d]: %w", i, err)
			}
			r.Messages = append(r.Messages, ir.Message{Role: ir.RoleTool, Parts: []ir.Part{{
				Kind: ir.PartToolResult,
				ToolResult: &ir.ToolResult{
					CallID:  m.ToolCallID,
					Name:    callNames[m.ToolCallID],
					Content: text,
				},
			}}})
		case "function":
			return &ir.UnsupportedError{What: "OpenAI legacy role \"function\" message"}
		default:
			return fmt.Errorf("openai: messages[%d]: unknown role %q", i, m.Role)
		}
	}
	return nil
}

// toolCallPart makes the IR part of one assistant tool call.
func toolCallPart(id string, f functionIO) ir.Part {
	return ir.Part{Kind: ir.PartToolCall, ToolCall: &ir.ToolCall{
		ID:        id,
		Name:      f.Name,
		Arguments: argumentsObject(f.Arguments),
	}}
}

// argumentsObject parses a call's argument string into a compact JSON
// object, or {} when it is not one: missing or unparseable arguments become
// {} (docs/vendors.md#tool-arguments-are-always-an-object: Anthropic rejects a non-object input, and
// streams "" for parameterless tools). Each call gets its own slice, so no
// consumer can change another's arguments.
func argumentsObject(s string) json.RawMessage {
	b := bytes.TrimSpace([]byte(s))
	if len(b) == 0 || b[0] != '{' || !json.Valid(b) {
		return json.RawMessage(`{}`)
	}
	var buf bytes.Buffer
	buf.Grow(len(b))
	if json.Compact(&buf, b) != nil {
		return json.RawMessage(`{}`)
	}
	return buf.Bytes()
}

// decodeContent reads a message's content: a string, null, or an array of
// parts. For an assistant, empty text is dropped (see below).
func decodeContent(raw []byte, assistant bool) ([]ir.Part, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if raw[0] == '"' {
		s, err := unquote(raw)
		if err != nil {
			return nil, fmt.Errorf("content: %w", err)
		}
		if s == "" && assistant {
			// "" beside tool calls is a placeholder, and an empty text
			// block is rejected by Anthropic (docs/vendors.md#empty-content).
			return nil, nil
		}
		return []ir.Part{{Kind: ir.PartText, Text: s}}, nil
	}
	if raw[0] != '[' {
		return nil, errors.New("content: want a string, null or an array of parts")
	}
	var in []partIn
	if err := json.Unmarshal(raw, &in); err != nil {
		return nil, fmt.Errorf("content: %w", err)
	}
	parts := make([]ir.Part, 0, len(in))
	for j := range in {
		p := &in[j]
		switch p.Type {
		case "text":
			if p.Text == "" && assistant {
				continue
			}
			parts = append(parts, ir.Part{Kind: ir.PartText, Text: p.Text})
		case "refusal":
			parts = append(parts, ir.Part{Kind: ir.PartText, Text: p.Refusal})
		case "image_url":
			m, err := decodeImageURL(p.ImageURL)
			if err != nil {
				return nil, fmt.Errorf("content[%d]: %w", j, err)
			}
			parts = append(parts, ir.Part{Kind: ir.PartImage, Media: m})
		case "file":
			m, err := decodeFile(p.File)
			if err != nil {
				return nil, err
			}
			parts = append(parts, ir.Part{Kind: ir.PartDocument, Media: m})
		default:
			// input_audio and whatever OpenAI adds next: the IR has no
			// place for it, and dropping it silently would change the
			// question.
			return nil, &ir.UnsupportedError{What: fmt.Sprintf("OpenAI %q content part", p.Type)}
		}
	}
	return parts, nil
}

func decodeImageURL(raw []byte) (*ir.Media, error) {
	var img imageURLIO
	switch {
	case len(raw) == 0 || string(raw) == "null":
		return nil, errors.New("image_url part without image_url")
	case raw[0] == '"':
		// Some clients send the URL as a bare string.
		s, err := unquote(raw)
		if err != nil {
			return nil, err
		}
		img.URL = s
	default:
		if err := json.Unmarshal(raw, &img); err != nil {
			return nil, fmt.Errorf("image_url: %w", err)
		}
	}
	if img.URL == "" {
		return nil, errors.New("image_url without a url")
	}
	mediaType, data, isData, err := parseDataURI(img.URL)
	if err != nil {
		return nil, fmt.Errorf("image_url: %w", err)
	}
	if isData {
		return &ir.Media{MediaType: mediaType, Data: data, Detail: img.Detail}, nil
	}
	return &ir.Media{URL: img.URL, Detail: img.Detail}, nil
}

func decodeFile(f *fileIO) (*ir.Media, error) {
	if f == nil {
		return nil, errors.New("file part without file")
	}
	if f.FileData == "" {
		if f.FileID != "" {
			// A reference into OpenAI's Files API: no other vendor can
			// read it.
			return nil, &ir.UnsupportedError{What: "OpenAI file_id reference"}
		}
		return nil, errors.New("file part without file_data or file_id")
	}
	mediaType, data, isData, err := parseDataURI(f.FileData)
	if err != nil {
		return nil, fmt.Errorf("file_data: %w", err)
	}
	if !isData {
		// Bare base64: Chat Completions takes only PDFs as files.
		mediaType, data = "application/pdf", f.FileData
	}
	return &ir.Media{MediaType: mediaType, Data: data, Filename: f.Filename}, nil
}

// decodeToolContent reads a tool message's content: a string or text parts,
// concatenated.
func decodeToolContent(raw []byte) (string, error) {
	parts, err := decodeContent(raw, false)
	if err != nil {
		return "", err
	}
	if len(parts) == 1 && parts[0].Kind == ir.PartText {
		return parts[0].Text, nil
	}
	var buf bytes.Buffer
	for _, p := range parts {
		if p.Kind != ir.PartText {
			return "", errors.New("a tool message may hold only text")
		}
		buf.WriteString(p.Text)
	}
	return buf.String(), nil
}
