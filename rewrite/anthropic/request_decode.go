package anthropic

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/detour-proxy/detour/rewrite/ir"
)

// DecodeRequest reads an Anthropic Messages request body (what an app's SDK
// sends to /v1/messages) into the vendor-neutral form.
//
// Content the other vendors cannot take — server tools (web search, code
// execution…), Files API references, search results, images or documents
// inside a tool result — is refused with an *ir.UnsupportedError rather
// than dropped, so the chain skips translated upstreams for this request.
// Hints with no equivalent elsewhere (cache_control, citations) are
// ignored. Malformed JSON or an unknown role is an ordinary error.
func DecodeRequest(body []byte) (*ir.Request, error) { return decodeRequest(body, true) }

// decodeRequest is DecodeRequest; onePass false forces the flexible path
// (for the test that both paths agree).
func decodeRequest(body []byte, onePass bool) (*ir.Request, error) {
	// One pass when every message's content is a block array (what the
	// SDKs send); string content and odd blocks take the flexible path,
	// which reads content as raw JSON first.
	var in inRequest
	var blocks [][]inBlock
	var fast inRequestBlocks
	if onePass && json.Unmarshal(body, &fast) == nil {
		in = fast.inRequest
		in.Messages = make([]inMessage, len(fast.Messages))
		blocks = make([][]inBlock, len(fast.Messages))
		for i, m := range fast.Messages {
			in.Messages[i].Role = m.Role
			blocks[i] = m.Content
		}
	} else if err := json.Unmarshal(body, &in); err != nil {
		return nil, fmt.Errorf("anthropic: decode request: %w", err)
	}
	r := &ir.Request{
		Model:       in.Model,
		MaxTokens:   in.MaxTokens,
		Temperature: in.Temperature,
		TopP:        in.TopP,
		TopK:        in.TopK,
		Stop:        in.StopSequences,
		Stream:      in.Stream,
	}
	var err error
	if r.System, err = decodeSystem(in.System); err != nil {
		return nil, err
	}
	r.Messages = make([]ir.Message, 0, len(in.Messages))
	for i, m := range in.Messages {
		var msg ir.Message
		var err error
		if blocks != nil && blocks[i] != nil {
			msg, err = decodeBlocks(m.Role, blocks[i])
		} else {
			msg, err = decodeMessage(m)
		}
		if err != nil {
			return nil, fmt.Errorf("anthropic: messages[%d]: %w", i, err)
		}
		r.Messages = append(r.Messages, msg)
	}
	if len(in.Tools) > 0 {
		r.Tools = make([]ir.Tool, 0, len(in.Tools))
		for _, t := range in.Tools {
			if t.Type != "" && t.Type != "custom" {
				// Server tools run on Anthropic's side; nobody else has them.
				return nil, &ir.UnsupportedError{What: "Anthropic server tool " + t.Type}
			}
			r.Tools = append(r.Tools, ir.Tool{Name: t.Name, Description: t.Description, Parameters: t.InputSchema})
		}
	}
	if tc := in.ToolChoice; tc != nil {
		switch tc.Type {
		case "auto":
			r.ToolChoice = &ir.ToolChoice{Mode: ir.ToolChoiceAuto}
		case "any":
			r.ToolChoice = &ir.ToolChoice{Mode: ir.ToolChoiceRequired}
		case "tool":
			if tc.Name == "" {
				// A forced call of no tool: no upstream accepts it.
				return nil, errors.New("anthropic: tool_choice: tool without a name")
			}
			r.ToolChoice = &ir.ToolChoice{Mode: ir.ToolChoiceTool, Name: tc.Name}
		case "none":
			r.ToolChoice = &ir.ToolChoice{Mode: ir.ToolChoiceNone}
		default:
			return nil, fmt.Errorf("anthropic: unknown tool_choice type %q", tc.Type)
		}
		if tc.DisableParallelToolUse {
			r.ParallelToolCalls = new(false)
		}
	}
	if in.Metadata != nil {
		r.User = in.Metadata.UserID
	}
	var effort string
	if oc := in.OutputConfig; oc != nil {
		effort = normalEffort(oc.Effort)
		if f := oc.Format; f != nil && f.Type == "json_schema" {
			// Structured outputs: strict by definition. OpenAI wants a
			// name for a json_schema, Anthropic has none.
			r.ResponseFormat = &ir.ResponseFormat{Type: "json_schema", Name: "response", Schema: f.Schema, Strict: true}
		}
	}
	if th := in.Thinking; th != nil {
		switch th.Type {
		case "enabled":
			r.ThinkingBudget = th.BudgetTokens
		case "adaptive":
			// The model picks its budget; output_config.effort steers it.
			if effort == "" {
				effort = "medium"
			}
		}
	}
	if r.ThinkingBudget == 0 {
		r.ReasoningEffort = effort
	}
	return r, nil
}

// normalEffort maps output_config.effort onto the IR's low|medium|high.
func normalEffort(e string) string {
	switch e {
	case "low", "medium", "high":
		return e
	case "xhigh", "max":
		return "high"
	}
	return ""
}

// decodeSystem reads the top-level system: a string or text blocks, each
// block one entry, in order.
func decodeSystem(raw json.RawMessage) ([]string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, fmt.Errorf("anthropic: system: %w", err)
		}
		if s == "" {
			return nil, nil
		}
		return []string{s}, nil
	}
	var blocks []inBlock
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return nil, fmt.Errorf("anthropic: system: %w", err)
	}
	out := make([]string, 0, len(blocks))
	for _, b := range blocks {
		if b.Type != "text" {
			return nil, fmt.Errorf("anthropic: system block of type %q", b.Type)
		}
		out = append(out, b.Text)
	}
	return out, nil
}

// inRequestBlocks is inRequest with every message's content a block array.
type inRequestBlocks struct {
	inRequest
	Messages []struct {
		Role    string    `json:"role"`
		Content []inBlock `json:"content"`
	} `json:"messages"`
}

// role maps an Anthropic role.
func role(r string) (ir.Role, error) {
	switch r {
	case "user":
		return ir.RoleUser, nil
	case "assistant":
		return ir.RoleAssistant, nil
	}
	return "", fmt.Errorf("role %q (Anthropic has user and assistant only)", r)
}

// decodeMessage reads one turn. Tool results stay parts of their user
// turn (ir.RoleTool doc).
func decodeMessage(m inMessage) (ir.Message, error) {
	var msg ir.Message
	var err error
	if msg.Role, err = role(m.Role); err != nil {
		return msg, err
	}
	content := bytes.TrimSpace(m.Content)
	if len(content) == 0 || string(content) == "null" {
		return msg, errors.New("no content")
	}
	if content[0] == '"' {
		var s string
		if err := json.Unmarshal(content, &s); err != nil {
			return msg, err
		}
		msg.Parts = []ir.Part{{Kind: ir.PartText, Text: s}}
		return msg, nil
	}
	blocks, err := unmarshalBlocks(content)
	if err != nil {
		return msg, err
	}
	return decodeBlocks(m.Role, blocks)
}

// decodeBlocks reads one turn whose content is blocks.
func decodeBlocks(r string, blocks []inBlock) (ir.Message, error) {
	var msg ir.Message
	var err error
	if msg.Role, err = role(r); err != nil {
		return msg, err
	}
	msg.Parts = make([]ir.Part, 0, len(blocks))
	for j := range blocks {
		p, err := decodeBlock(&blocks[j])
		if err != nil {
			return msg, fmt.Errorf("content[%d]: %w", j, err)
		}
		msg.Parts = append(msg.Parts, p)
	}
	return msg, nil
}

// knownBlocks are the block types decodeBlock reads.
var knownBlocks = map[string]bool{
	"text": true, "image": true, "document": true, "tool_use": true,
	"tool_result": true, "thinking": true, "redacted_thinking": true,
}

// unmarshalBlocks decodes an array of content blocks. Block types detour
// does not read may give their fields other JSON types (search_result's
// source is a string): when decoding fails, such a block is reported as
// unsupported rather than as malformed JSON.
func unmarshalBlocks(raw json.RawMessage) ([]inBlock, error) {
	var blocks []inBlock
	err := json.Unmarshal(raw, &blocks)
	if err == nil {
		return blocks, nil
	}
	var types []struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(raw, &types) == nil {
		for _, b := range types {
			if !knownBlocks[b.Type] {
				return nil, &ir.UnsupportedError{What: "Anthropic content block " + quote(b.Type)}
			}
		}
	}
	return nil, err
}

// decodeBlock reads one content block of a request message.
func decodeBlock(b *inBlock) (ir.Part, error) {
	switch b.Type {
	case "text":
		return ir.Part{Kind: ir.PartText, Text: b.Text}, nil
	case "image":
		m, err := decodeSource(b.Source, "image")
		if err != nil {
			return ir.Part{}, err
		}
		return ir.Part{Kind: ir.PartImage, Media: m}, nil
	case "document":
		m, err := decodeSource(b.Source, "document")
		if err != nil {
			return ir.Part{}, err
		}
		m.Filename = b.Title
		return ir.Part{Kind: ir.PartDocument, Media: m}, nil
	case "tool_use":
		return ir.Part{Kind: ir.PartToolCall, ToolCall: &ir.ToolCall{
			ID:        ir.OriginalToolID(b.ID),
			Name:      b.Name,
			Arguments: objectOrEmpty(b.Input),
		}}, nil
	case "tool_result":
		content, err := toolResultText(b.Content)
		if err != nil {
			return ir.Part{}, err
		}
		return ir.Part{Kind: ir.PartToolResult, ToolResult: &ir.ToolResult{
			CallID:  ir.OriginalToolID(b.ToolUseID),
			Content: content,
			IsError: b.IsError,
		}}, nil
	case "thinking":
		return ir.Part{Kind: ir.PartThinking, Text: b.Thinking, Signature: b.Signature}, nil
	case "redacted_thinking":
		// Encrypted reasoning: no text, only the data Anthropic needs back.
		// It travels as a thinking part with the data in Signature, which
		// EncodeRequest turns back into redacted_thinking.
		return ir.Part{Kind: ir.PartThinking, Signature: b.Data}, nil
	}
	return ir.Part{}, &ir.UnsupportedError{What: "Anthropic content block " + quote(b.Type)}
}

// decodeSource reads the source of an image or document block.
func decodeSource(s *inSource, what string) (*ir.Media, error) {
	if s == nil {
		return nil, fmt.Errorf("%s without source", what)
	}
	switch s.Type {
	case "base64":
		return &ir.Media{MediaType: s.MediaType, Data: s.Data}, nil
	case "url":
		return &ir.Media{URL: s.URL}, nil
	case "text":
		// A plain-text document: Media.Data is base64 by contract.
		return &ir.Media{MediaType: "text/plain", Data: base64.StdEncoding.EncodeToString([]byte(s.Data))}, nil
	}
	// "file" (Files API ids) and "content" (inline blocks) exist only at
	// Anthropic.
	return nil, &ir.UnsupportedError{What: what + " source " + quote(s.Type)}
}

// toolResultText reads a tool_result's content: absent, a string, or
// blocks of which only text can cross vendors (ir.ToolResult holds text).
// Several text blocks are joined with newlines.
func toolResultText(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	if raw[0] == '"' {
		var s string
		err := json.Unmarshal(raw, &s)
		return s, err
	}
	blocks, err := unmarshalBlocks(raw)
	if err != nil {
		return "", fmt.Errorf("tool_result content: %w", err)
	}
	var sb strings.Builder
	for i, b := range blocks {
		if b.Type != "text" {
			return "", &ir.UnsupportedError{What: quote(b.Type) + " block in a tool_result"}
		}
		if i > 0 {
			sb.WriteByte('\n')
		}
		sb.WriteString(b.Text)
	}
	return sb.String(), nil
}

// emptyObject returns the arguments of a call that has none, a new slice
// each time since IR values belong to their caller.
func emptyObject() json.RawMessage { return json.RawMessage{'{', '}'} }

// objectOrEmpty returns v when it is a JSON object and {} otherwise: tool
// arguments are always an object (ir.ToolCall, docs/vendors.md#tool-arguments-are-always-an-object).
func objectOrEmpty(v json.RawMessage) json.RawMessage {
	if t := bytes.TrimSpace(v); isObject(t) {
		return t
	}
	return emptyObject()
}

// quote is strconv.Quote for messages, bounded so that a hostile type
// string cannot bloat a log line.
func quote(s string) string {
	const limit = 64
	if len(s) > limit {
		s = s[:limit] + "…"
	}
	return fmt.Sprintf("%q", s)
}
