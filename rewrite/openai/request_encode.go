package openai

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/detour-proxy/detour/rewrite/ir"
)

// Limits of the Chat Completions API that the encoder enforces itself, so
// that a request translated from another vendor is not refused for them.
const (
	// maxStop is how many stop sequences OpenAI accepts.
	maxStop = 4
	// maxTemperature is the top of OpenAI's temperature range (0–2).
	maxTemperature = 2
)

// The reasoning_effort a thinking budget maps onto when the request has no
// effort of its own: the inverse of litellm's low 1024 / medium 2048 /
// high 4096 (docs/vendors.md#request-fields).
const (
	lowEffortMaxBudget    = 1024
	mediumEffortMaxBudget = 2048
)

// EncodeRequest encodes r as the body of a chat.completions request for an
// OpenAI-compatible upstream, with model o.Model (r.Model when o.Model is
// empty).
//
// System prompts become system messages at the start, in order. Tool
// results, whether in RoleTool messages or in a user turn (Anthropic,
// Gemini), become one role "tool" message each, ahead of the rest of that
// turn; tool-call arguments are sent as a string of JSON. Thinking is
// dropped: OpenAI takes no reasoning back. A ThinkingBudget becomes a
// reasoning_effort when the request has none. A stream always asks for
// stream_options.include_usage, since detour must count tokens (the app's
// own choice is the stream encoder's business).
//
// Nothing is sent as null or empty: OpenAI-compatible servers reject some of
// those. Lossy changes (a clamped temperature, stop sequences over OpenAI's
// four, top_k, a tool result's error flag) are reported to o.Notes. Content
// OpenAI cannot take (a gs:// image, a document by URL) is an
// *ir.UnsupportedError.
func EncodeRequest(r *ir.Request, o ir.EncodeOptions) ([]byte, error) {
	note := func(string) {}
	if o.Notes != nil {
		note = o.Notes
	}
	out := requestOut{
		Model:               o.Model,
		MaxCompletionTokens: max(r.MaxTokens, 0),
		TopP:                r.TopP,
		N:                   max(r.N, 0),
		Seed:                r.Seed,
		ReasoningEffort:     r.ReasoningEffort,
		Stream:              r.Stream,
		User:                r.User,
	}
	if out.Model == "" {
		out.Model = r.Model
	}
	if r.Stream {
		out.StreamOptions = &streamOptionsIO{IncludeUsage: true}
	}
	if t := r.Temperature; t != nil {
		v := min(max(*t, 0), maxTemperature)
		if v != *t {
			note(fmt.Sprintf("temperature %g clamped to %g", *t, v))
		}
		out.Temperature = &v
	}
	if r.TopK != nil {
		note("top_k dropped: OpenAI has none")
	}
	if out.ReasoningEffort == "" && r.ThinkingBudget > 0 {
		switch {
		case r.ThinkingBudget <= lowEffortMaxBudget:
			out.ReasoningEffort = "low"
		case r.ThinkingBudget <= mediumEffortMaxBudget:
			out.ReasoningEffort = "medium"
		default:
			out.ReasoningEffort = "high"
		}
	}
	for _, s := range r.Stop {
		if s == "" {
			note("empty stop sequence dropped")
			continue
		}
		if len(out.Stop) == maxStop {
			note(fmt.Sprintf("stop sequences beyond OpenAI's %d dropped", maxStop))
			break
		}
		out.Stop = append(out.Stop, s)
	}
	if f := r.ResponseFormat; f != nil {
		switch f.Type {
		case "json_object":
			out.ResponseFormat = &formatOut{Type: "json_object"}
		case "json_schema":
			name := f.Name
			if name == "" {
				name = "response" // OpenAI requires a name
			}
			out.ResponseFormat = &formatOut{Type: "json_schema", JSONSchema: &jsonSchemaOut{
				Name: name, Schema: f.Schema, Strict: f.Strict,
			}}
		default:
			return nil, &ir.UnsupportedError{What: fmt.Sprintf("response format %q", f.Type)}
		}
	}
	if len(r.Tools) > 0 {
		out.Tools = make([]toolOut, len(r.Tools))
		for i, t := range r.Tools {
			out.Tools[i] = toolOut{Type: "function", Function: toolFunctionOut{
				Name: t.Name, Description: t.Description, Parameters: t.Parameters, Strict: t.Strict,
			}}
		}
		out.ParallelToolCalls = r.ParallelToolCalls
		if c := r.ToolChoice; c != nil {
			switch c.Mode {
			case ir.ToolChoiceAuto, ir.ToolChoiceNone, ir.ToolChoiceRequired:
				out.ToolChoice = string(c.Mode)
			case ir.ToolChoiceTool:
				tc := toolChoiceOut{Type: "function"}
				tc.Function.Name = c.Name
				out.ToolChoice = tc
			default:
				return nil, fmt.Errorf("openai: unknown tool choice mode %q", c.Mode)
			}
		}
	} else if r.ToolChoice != nil || r.ParallelToolCalls != nil {
		// OpenAI refuses tool_choice and parallel_tool_calls without tools.
		note("tool_choice and parallel_tool_calls dropped: the request has no tools")
	}
	msgs, err := encodeMessages(r, note)
	if err != nil {
		return nil, err
	}
	out.Messages = msgs
	return marshalJSON(&out, 256+estimateSize(r))
}

// estimateSize guesses the encoded size of r's content, to size the output
// buffer once.
func estimateSize(r *ir.Request) int {
	n := 0
	for _, s := range r.System {
		n += len(s) + 32
	}
	for i := range r.Messages {
		for j := range r.Messages[i].Parts {
			p := &r.Messages[i].Parts[j]
			n += len(p.Text) + 32
			if p.Media != nil {
				n += len(p.Media.Data) + len(p.Media.URL) + 64
			}
			if p.ToolCall != nil {
				n += 2*len(p.ToolCall.Arguments) + 64
			}
			if p.ToolResult != nil {
				n += len(p.ToolResult.Content) + 64
			}
		}
	}
	for _, t := range r.Tools {
		n += len(t.Description) + len(t.Parameters) + 64
	}
	return n + n/8
}

// marshalJSON encodes v without HTML escaping (the reader is an API server,
// and text should read as the app wrote it) and without encoding/json's
// trailing newline.
func marshalJSON(v any, sizeHint int) ([]byte, error) {
	var buf bytes.Buffer
	buf.Grow(sizeHint)
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("openai: %w", err)
	}
	b := buf.Bytes()
	return b[:len(b)-1], nil
}

// encodeMessages renders the system prompts and messages of r.
func encodeMessages(r *ir.Request, note func(string)) ([]messageOut, error) {
	msgs := make([]messageOut, 0, len(r.System)+len(r.Messages)+1)
	for _, s := range r.System {
		// "system" rather than "developer": OpenAI maps it for reasoning
		// models, and OpenAI-compatible servers know only "system".
		msgs = append(msgs, messageOut{Role: "system", Content: s})
	}
	for i := range r.Messages {
		m := &r.Messages[i]
		var err error
		switch m.Role {
		case ir.RoleUser, ir.RoleTool:
			msgs, err = appendUserTurn(msgs, m, note)
		case ir.RoleAssistant:
			msgs, err = appendAssistantTurn(msgs, m, note)
		default:
			err = fmt.Errorf("openai: unknown role %q", m.Role)
		}
		if err != nil {
			return nil, fmt.Errorf("openai: messages[%d]: %w", i, err)
		}
	}
	return msgs, nil
}

// appendUserTurn renders a user or tool turn: its tool results first, one
// role "tool" message each (OpenAI wants them right after the assistant's
// tool calls), then whatever else the turn holds as one user message.
func appendUserTurn(msgs []messageOut, m *ir.Message, note func(string)) ([]messageOut, error) {
	var rest []ir.Part
	results := 0
	for i := range m.Parts {
		p := &m.Parts[i]
		switch p.Kind {
		case ir.PartToolResult:
			tr := p.ToolResult
			if tr == nil {
				return nil, errors.New("tool result part without a result")
			}
			if tr.IsError {
				note("tool result error flag dropped: OpenAI has none")
			}
			msgs = append(msgs, messageOut{Role: "tool", Content: tr.Content, ToolCallID: upstreamToolID(tr.CallID)})
			results++
		case ir.PartThinking:
			// Not something a user turn can carry to OpenAI.
		case ir.PartToolCall:
			return nil, errors.New("tool call in a user turn")
		default:
			rest = append(rest, *p)
		}
	}
	if len(rest) == 0 && (results > 0 || m.Role == ir.RoleTool) {
		return msgs, nil
	}
	content, err := userContent(rest)
	if err != nil {
		return nil, err
	}
	return append(msgs, messageOut{Role: "user", Content: content, Name: m.Name}), nil
}

// userContent renders a user message's parts: a plain string when the
// message is one text (which every OpenAI-compatible server accepts), else
// an array of parts.
func userContent(parts []ir.Part) (any, error) {
	switch {
	case len(parts) == 0:
		return "", nil
	case len(parts) == 1 && parts[0].Kind == ir.PartText:
		return parts[0].Text, nil
	}
	out := make([]partOut, 0, len(parts))
	for i := range parts {
		p := &parts[i]
		switch p.Kind {
		case ir.PartText:
			out = append(out, partOut{Type: "text", Text: &p.Text})
		case ir.PartImage:
			img, err := imageOut(p.Media)
			if err != nil {
				return nil, err
			}
			out = append(out, partOut{Type: "image_url", ImageURL: img})
		case ir.PartDocument:
			f, err := fileOut(p.Media)
			if err != nil {
				return nil, err
			}
			out = append(out, partOut{Type: "file", File: f})
		default:
			return nil, fmt.Errorf("unexpected %s part in a user turn", p.Kind)
		}
	}
	return out, nil
}

func imageOut(m *ir.Media) (*imageURLIO, error) {
	switch {
	case m == nil:
		return nil, errors.New("image part without media")
	case m.Data != "":
		return &imageURLIO{URL: dataURI(m.MediaType, m.Data), Detail: m.Detail}, nil
	case isHTTPURL(m.URL) || strings.HasPrefix(m.URL, "data:"):
		return &imageURLIO{URL: m.URL, Detail: m.Detail}, nil
	case m.URL != "":
		// gs:// and Gemini file URIs: OpenAI fetches only http(s).
		return nil, &ir.UnsupportedError{What: "image URL that is not http(s): " + urlScheme(m.URL)}
	}
	return nil, errors.New("image part without data or URL")
}

func fileOut(m *ir.Media) (*fileIO, error) {
	switch {
	case m == nil:
		return nil, errors.New("document part without media")
	case m.Data != "":
		name := m.Filename
		if name == "" {
			// OpenAI asks for a filename with file_data.
			name = "document"
			if m.MediaType == "application/pdf" || m.MediaType == "" {
				name = "document.pdf"
			}
		}
		mt := m.MediaType
		if mt == "" {
			mt = "application/pdf"
		}
		return &fileIO{FileData: dataURI(mt, m.Data), Filename: name}, nil
	case m.URL != "":
		return nil, &ir.UnsupportedError{What: "document by URL (Chat Completions takes files inline only)"}
	}
	return nil, errors.New("document part without data or URL")
}

// urlScheme names a URL's scheme for an error message without echoing the
// whole URL, which may carry a token.
func urlScheme(u string) string {
	if i := strings.IndexByte(u, ':'); i > 0 && i < 32 {
		return u[:i+1]
	}
	return "unknown scheme"
}

// appendAssistantTurn renders an assistant turn: its text concatenated, its
// tool calls with arguments as a string. Thinking is dropped. A turn left
// with neither text nor calls (only thinking) is dropped too: OpenAI
// rejects an assistant message with neither content nor tool calls.
func appendAssistantTurn(msgs []messageOut, m *ir.Message, note func(string)) ([]messageOut, error) {
	var (
		text    strings.Builder
		hasText bool
		calls   []toolCallOut
	)
	for i := range m.Parts {
		p := &m.Parts[i]
		switch p.Kind {
		case ir.PartText:
			text.WriteString(p.Text)
			hasText = hasText || p.Text != ""
		case ir.PartThinking:
		case ir.PartToolCall:
			tc := p.ToolCall
			if tc == nil {
				return nil, errors.New("tool call part without a call")
			}
			calls = append(calls, toolCallOut{ID: upstreamToolID(tc.ID), Type: "function", Function: functionIO{
				Name: tc.Name, Arguments: argumentsString(tc.Arguments),
			}})
		case ir.PartImage, ir.PartDocument:
			return nil, &ir.UnsupportedError{What: "media in an assistant turn"}
		default:
			return nil, fmt.Errorf("unexpected %s part in an assistant turn", p.Kind)
		}
	}
	out := messageOut{Role: "assistant", Name: m.Name, ToolCalls: calls}
	switch {
	case hasText:
		out.Content = text.String()
	case len(calls) == 0:
		note("assistant turn without text or tool calls dropped")
		return msgs, nil
	}
	return append(msgs, out), nil
}

// maxToolIDLen is the longest tool call id OpenAI accepts in a request
// ("Invalid 'messages[2].tool_calls[0].id': string too long. Expected a
// string with maximum length 40", code string_above_max_length; vercel/ai
// #5171, agno #5382). Ids made by other vendors or by detour for Gemini can
// be longer.
const maxToolIDLen = 40

// upstreamToolID returns id, or a stable 37-character stand-in when id is
// too long for OpenAI. The same id always maps to the same stand-in, so a
// call and the result that answers it still match, without any state.
func upstreamToolID(id string) string {
	if len(id) <= maxToolIDLen {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	return "call_" + hex.EncodeToString(sum[:16])
}

// argumentsString renders IR arguments (a JSON object) as OpenAI's string
// of JSON, compact; missing or invalid arguments become "{}".
func argumentsString(args json.RawMessage) string {
	if len(args) == 0 {
		return "{}"
	}
	var buf bytes.Buffer
	buf.Grow(len(args))
	if json.Compact(&buf, args) != nil || buf.Len() == 0 || buf.Bytes()[0] != '{' {
		return "{}"
	}
	return buf.String()
}
