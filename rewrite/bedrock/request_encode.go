package bedrock

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/detour-proxy/detour/rewrite/ir"
)

// Path returns the Converse (or ConverseStream) path for a model id, as a
// decoded path. The id may hold ':' and '/' (a model version, an inference
// profile or provisioned model ARN): internal/cloud sends it escaped as
// one path segment, as the AWS SDK does (EscapedModelPath).
func Path(model string, stream bool) string {
	op := "/converse"
	if stream {
		op = "/converse-stream"
	}
	return "/model/" + model + op
}

// EscapedModelPath returns the escaped form of a path Path made: the model
// id escaped whole (everything but RFC 3986's unreserved characters), so
// that '/' in an ARN stays inside its segment. ok is false for a path that
// is not a Converse path.
func EscapedModelPath(p string) (escaped string, ok bool) {
	rest, ok := strings.CutPrefix(p, "/model/")
	i := strings.LastIndexByte(rest, '/')
	if !ok || i <= 0 {
		return "", false
	}
	model, op := rest[:i], rest[i+1:]
	if op != "converse" && op != "converse-stream" {
		return "", false
	}
	var b strings.Builder
	b.WriteString("/model/")
	for i := 0; i < len(model); i++ {
		c := model[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~' {
			b.WriteByte(c)
		} else {
			b.WriteString(fmt.Sprintf("%%%02X", c))
		}
	}
	b.WriteString("/" + op)
	return b.String(), true
}

// EncodeRequest encodes r as a Converse request body (the model goes in the
// path: Path). What Converse cannot express is an *ir.UnsupportedError.
func EncodeRequest(r *ir.Request, o ir.EncodeOptions) ([]byte, error) {
	if r == nil {
		return nil, errors.New("bedrock: encode request: nil request")
	}
	if r.N > 1 {
		return nil, &ir.UnsupportedError{What: "n > 1"}
	}
	if r.ResponseFormat != nil && r.ResponseFormat.Type != "" && r.ResponseFormat.Type != "text" {
		return nil, &ir.UnsupportedError{What: "response_format " + r.ResponseFormat.Type}
	}
	e := encoder{notes: o.Notes}
	var out outRequest
	for _, s := range r.System {
		if strings.TrimSpace(s) != "" { // Converse refuses a blank text block
			out.System = append(out.System, systemBlock{Text: s})
		}
	}
	msgs, hasToolBlocks, err := e.messages(r.Messages)
	if err != nil {
		return nil, err
	}
	if len(msgs) == 0 {
		return nil, &ir.UnsupportedError{What: "a request without messages"}
	}
	out.Messages = msgs

	ic := inferenceConfig{MaxTokens: r.MaxTokens, Temperature: r.Temperature, TopP: r.TopP}
	if ic.MaxTokens <= 0 {
		ic.MaxTokens = o.DefaultMaxTokens
	}
	for _, s := range r.Stop {
		if strings.TrimSpace(s) != "" {
			ic.StopSequences = append(ic.StopSequences, s)
		}
	}
	if ic.MaxTokens > 0 || ic.Temperature != nil || ic.TopP != nil || len(ic.StopSequences) > 0 {
		out.InferenceConfig = &ic
	}
	if r.TopK != nil {
		// Not in inferenceConfig: the Anthropic models take it as a
		// model field (Bedrock's Claude parameters page).
		out.AdditionalModelRequestFields = map[string]any{"top_k": *r.TopK}
	}
	tc, err := e.tools(r, hasToolBlocks)
	if err != nil {
		return nil, err
	}
	out.ToolConfig = tc
	if r.Seed != nil {
		e.note("seed dropped: Converse has none")
	}
	if r.ReasoningEffort != "" || r.ThinkingBudget > 0 {
		e.note("reasoning settings dropped: Converse takes them only as model-specific fields")
	}
	return json.Marshal(&out)
}

type encoder struct{ notes func(string) }

func (e *encoder) note(s string) {
	if e.notes != nil {
		e.notes(s)
	}
}

// messages maps the turns: Converse has only user and assistant, which must
// alternate, with tool results in user turns.
func (e *encoder) messages(in []ir.Message) (out []message, toolBlocks bool, err error) {
	out = make([]message, 0, len(in))
	for i := range in {
		m := &in[i]
		var role string
		switch m.Role {
		case ir.RoleUser, ir.RoleTool:
			role = "user"
		case ir.RoleAssistant:
			role = "assistant"
		default:
			return nil, false, fmt.Errorf("bedrock: messages[%d]: unknown role %q", i, m.Role)
		}
		blocks := make([]block, 0, len(m.Parts))
		for j := range m.Parts {
			b, ok, err := e.block(role, &m.Parts[j])
			if err != nil {
				return nil, false, fmt.Errorf("bedrock: messages[%d].parts[%d]: %w", i, j, err)
			}
			if ok {
				toolBlocks = toolBlocks || b.ToolUse != nil || b.ToolResult != nil
				blocks = append(blocks, b)
			}
		}
		if len(blocks) == 0 {
			continue
		}
		if n := len(out); n > 0 && out[n-1].Role == role {
			out[n-1].Content = append(out[n-1].Content, blocks...)
			continue
		}
		out = append(out, message{Role: role, Content: blocks})
	}
	return out, toolBlocks, nil
}

func (e *encoder) block(role string, p *ir.Part) (block, bool, error) {
	switch p.Kind {
	case ir.PartText:
		if strings.TrimSpace(p.Text) == "" {
			return block{}, false, nil
		}
		t := p.Text
		return block{Text: &t}, true, nil
	case ir.PartImage, ir.PartDocument:
		if role != "user" {
			return block{}, false, &ir.UnsupportedError{What: string(p.Kind) + " in an assistant turn"}
		}
		return media(p)
	case ir.PartToolCall:
		tc := p.ToolCall
		if tc == nil {
			return block{}, false, errors.New("tool_call part without a tool call")
		}
		args := bytes.TrimSpace(tc.Arguments)
		if len(args) == 0 || args[0] != '{' || !json.Valid(args) {
			e.note("tool call " + tc.Name + " arguments are not a JSON object: sent as {}")
			args = []byte("{}")
		}
		return block{ToolUse: &toolUse{ToolUseID: ir.SafeToolID(tc.ID), Name: tc.Name, Input: args}}, true, nil
	case ir.PartToolResult:
		tr := p.ToolResult
		if tr == nil {
			return block{}, false, errors.New("tool_result part without a tool result")
		}
		res := &toolResult{ToolUseID: ir.SafeToolID(tr.CallID)}
		c := bytes.TrimSpace([]byte(tr.Content))
		if tr.IsJSON && len(c) > 0 && c[0] == '{' && json.Valid(c) {
			res.Content = []toolResultContent{{JSON: c}}
		} else {
			text := tr.Content
			if text == "" {
				text = " " // Converse refuses an empty text block
			}
			res.Content = []toolResultContent{{Text: &text}}
		}
		if tr.IsError {
			res.Status = "error"
		}
		return block{ToolResult: res}, true, nil
	case ir.PartThinking:
		if role != "assistant" || p.Signature == "" {
			e.note("thinking without a signature dropped")
			return block{}, false, nil
		}
		if p.Text == "" {
			return block{ReasoningContent: &reasoningContent{RedactedContent: p.Signature}}, true, nil
		}
		return block{ReasoningContent: &reasoningContent{ReasoningText: &reasoningText{Text: p.Text, Signature: p.Signature}}}, true, nil
	}
	return block{}, false, fmt.Errorf("unknown part kind %q", p.Kind)
}

// media maps an inline image or document; Converse takes bytes or an S3
// location, never an http(s) URL.
func media(p *ir.Part) (block, bool, error) {
	m := p.Media
	if m == nil {
		return block{}, false, errors.New(string(p.Kind) + " part without media")
	}
	mt, data := strings.ToLower(m.MediaType), m.Data
	if data == "" {
		rest, ok := strings.CutPrefix(m.URL, "data:")
		meta, d, ok2 := strings.Cut(rest, ",")
		mtype, ok3 := strings.CutSuffix(meta, ";base64")
		if !ok || !ok2 || !ok3 {
			return block{}, false, &ir.UnsupportedError{What: string(p.Kind) + " by URL"}
		}
		mt, data = strings.ToLower(mtype), d
	}
	if _, err := base64.StdEncoding.DecodeString(data); err != nil {
		return block{}, false, fmt.Errorf("%s: %w", p.Kind, err)
	}
	format, kind, ok := strings.Cut(mt, "/")
	if !ok {
		return block{}, false, &ir.UnsupportedError{What: string(p.Kind) + " type " + mt}
	}
	if p.Kind == ir.PartImage {
		switch kind {
		case "png", "jpeg", "gif", "webp":
		default:
			return block{}, false, &ir.UnsupportedError{What: "image type " + mt}
		}
		return block{Image: &imageBlock{Format: kind, Source: source{Bytes: data}}}, true, nil
	}
	docFormat := map[string]string{"application/pdf": "pdf", "text/plain": "txt", "text/csv": "csv", "text/html": "html", "text/markdown": "md"}[format+"/"+kind]
	if docFormat == "" {
		return block{}, false, &ir.UnsupportedError{What: "document type " + mt}
	}
	name := documentName(m.Filename)
	return block{Document: &documentBlock{Format: docFormat, Name: name, Source: source{Bytes: data}}}, true, nil
}

// documentName makes a name Converse accepts (letters, digits, single
// spaces, hyphens, parentheses, brackets), from the file's name when there
// is one.
func documentName(f string) string {
	var b strings.Builder
	for _, r := range f {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '(', r == ')', r == '[', r == ']':
			b.WriteRune(r)
		case r == ' ' || r == '.' || r == '_':
			if s := b.String(); s != "" && !strings.HasSuffix(s, " ") {
				b.WriteByte(' ')
			}
		}
	}
	if s := strings.TrimSpace(b.String()); s != "" {
		return s
	}
	return "document"
}

func (e *encoder) tools(r *ir.Request, toolBlocks bool) (*toolConfig, error) {
	mode := ir.ToolChoiceAuto
	if r.ToolChoice != nil {
		mode = r.ToolChoice.Mode
	}
	if len(r.Tools) == 0 {
		if toolBlocks {
			// Converse refuses tool blocks without a toolConfig.
			return nil, &ir.UnsupportedError{What: "tool calls in the conversation without tools declared"}
		}
		return nil, nil
	}
	if mode == ir.ToolChoiceNone {
		if toolBlocks {
			return nil, &ir.UnsupportedError{What: "tool_choice none with tool turns (Converse has no none)"}
		}
		e.note("tools dropped: tool_choice none")
		return nil, nil
	}
	tc := &toolConfig{}
	for _, t := range r.Tools {
		schema := bytes.TrimSpace(t.Parameters)
		if len(schema) == 0 || string(schema) == "null" {
			schema = []byte(`{"type":"object","properties":{}}`)
		}
		tc.Tools = append(tc.Tools, tool{ToolSpec: toolSpec{Name: t.Name, Description: t.Description, InputSchema: inputSchema{JSON: schema}}})
	}
	switch mode {
	case ir.ToolChoiceRequired:
		tc.ToolChoice = &toolChoice{Any: &struct{}{}}
	case ir.ToolChoiceTool:
		tc.ToolChoice = &toolChoice{Tool: &toolChoiceTool{Name: r.ToolChoice.Name}}
	}
	return tc, nil
}
