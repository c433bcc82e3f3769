package openai

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/detour-proxy/detour/rewrite"
	"github.com/detour-proxy/detour/rewrite/internal/jsonscan"
	"github.com/detour-proxy/detour/rewrite/ir"
)

// idPrefix starts every chat completion id; apps and SDKs display it, and
// some log pipelines match on it.
const idPrefix = "chatcmpl-"

// DecodeResponse decodes an upstream's chat.completion into the IR. Only
// choices[0] is read (detour asks for one). The message's reasoning text
// (reasoning_content, or OpenRouter's reasoning) becomes a thinking part,
// its content and refusal text parts, its tool calls tool-call parts with
// the argument string parsed into an object ({} when it is not one).
//
// A body that carries an "error" instead of choices (OpenRouter answers
// some failures with a 200) is an error, as are invalid JSON and fields of
// the wrong type.
func DecodeResponse(body []byte) (*ir.Response, error) {
	if err := expectObject(body); err != nil {
		return nil, fmt.Errorf("openai: response: %w", err)
	}
	var in completionIn
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, fmt.Errorf("openai: response: %w", err)
	}
	if !jsonscan.IsNull(in.Error) && len(in.Choices) == 0 {
		msg := rewrite.ParseError(body).Message
		if msg == "" {
			msg = "error without a message"
		}
		return nil, fmt.Errorf("openai: response is an error: %s", msg)
	}
	if len(in.Choices) == 0 {
		return nil, errors.New("openai: response has no choices")
	}
	r := &ir.Response{ID: in.ID, Model: in.Model, Created: in.Created}
	c := &in.Choices[0]
	for i := range in.Choices {
		if in.Choices[i].Index == 0 {
			c = &in.Choices[i]
			break
		}
	}
	m := &c.Message
	if t := string(m.ReasoningContent) + string(m.Reasoning); t != "" {
		r.Parts = append(r.Parts, ir.Part{Kind: ir.PartThinking, Text: t})
	}
	content, err := parseFlexText(m.Content)
	if err != nil {
		return nil, fmt.Errorf("openai: response: message content: %w", err)
	}
	if content != "" {
		r.Parts = append(r.Parts, ir.Part{Kind: ir.PartText, Text: content})
	}
	if m.Refusal != "" {
		// The IR has no refusal: the app sees the model's words as text.
		r.Parts = append(r.Parts, ir.Part{Kind: ir.PartText, Text: m.Refusal})
	}
	for i := range m.ToolCalls {
		tc := &m.ToolCalls[i]
		r.Parts = append(r.Parts, toolCallPart(tc.ID, tc.Function))
	}
	if fc := m.FunctionCall; fc != nil && len(m.ToolCalls) == 0 {
		r.Parts = append(r.Parts, toolCallPart(ir.GeneratedToolID(in.ID, 0), *fc))
	}
	r.Finish = decodeFinish(c.FinishReason, len(m.ToolCalls) > 0 || m.FunctionCall != nil)
	if u := in.Usage; u != nil {
		r.Usage = decodeUsage(u)
	}
	return r, nil
}

// decodeFinish maps an OpenAI finish_reason onto the IR. Some compatible
// servers say "stop" after tool calls; the IR says tool_calls whenever
// there were calls (docs/vendors.md#finish-after-tool-calls). Unknown or missing reasons are
// stop: losing the finish would be worse (bifrost #1821).
func decodeFinish(reason string, hadToolCalls bool) ir.FinishReason {
	switch reason {
	case "length":
		return ir.FinishLength
	case "content_filter":
		return ir.FinishContentFilter
	case "tool_calls", "function_call":
		return ir.FinishToolCalls
	}
	if hadToolCalls {
		return ir.FinishToolCalls
	}
	return ir.FinishStop
}

// decodeUsage maps OpenAI usage onto the IR: prompt_tokens already includes
// the cached tokens, completion_tokens the reasoning tokens.
func decodeUsage(u *usageIO) ir.TokenUsage {
	t := ir.TokenUsage{Input: u.PromptTokens, Output: u.CompletionTokens}
	if d := u.PromptTokensDetails; d != nil {
		t.CachedInput = d.CachedTokens
	}
	if d := u.CompletionTokensDetails; d != nil {
		t.Reasoning = d.ReasoningTokens
	}
	return t
}

// encodeUsage is the inverse of decodeUsage, with total_tokens computed.
func encodeUsage(u ir.TokenUsage) usageIO {
	return usageIO{
		PromptTokens:            u.Input,
		CompletionTokens:        u.Output,
		TotalTokens:             u.Input + u.Output,
		PromptTokensDetails:     &promptDetailsIO{CachedTokens: u.CachedInput},
		CompletionTokensDetails: &completionDetailsIO{ReasoningTokens: u.Reasoning},
	}
}

// chunkID is the id the app sees: the IR id with OpenAI's prefix, which
// ids from other vendors (msg_…, Gemini response ids) lack.
func chunkID(id string) string {
	if strings.HasPrefix(id, idPrefix) {
		return id
	}
	return idPrefix + id
}

// finishOut renders an IR finish reason as OpenAI's, saying tool_calls
// whenever the answer made tool calls (docs/vendors.md#finish-after-tool-calls: Anthropic and
// Gemini end such turns with end_turn / STOP).
func finishOut(f ir.FinishReason, hadToolCalls bool) string {
	switch f {
	case ir.FinishLength:
		return "length"
	case ir.FinishContentFilter:
		return "content_filter"
	case ir.FinishToolCalls:
		return "tool_calls"
	}
	if hadToolCalls {
		return "tool_calls"
	}
	return "stop"
}

// EncodeResponse encodes r as the chat.completion the app's SDK expects:
// one choice, with the text parts concatenated into content (null when the
// answer is only tool calls), tool calls with their arguments as a string
// of JSON, thinking as reasoning_content (which openai-go keeps as an extra
// field), refusal and logprobs null, and usage with total_tokens computed.
// model is the model the app asked for (r.Model when empty); created is
// r.Created, or now.
func EncodeResponse(r *ir.Response, model string) ([]byte, error) {
	if model == "" {
		model = r.Model
	}
	created := r.Created
	if created == 0 {
		created = time.Now().Unix()
	}
	var (
		text     strings.Builder
		thinking strings.Builder
		calls    []toolCallOut
	)
	for i := range r.Parts {
		p := &r.Parts[i]
		switch p.Kind {
		case ir.PartText:
			text.WriteString(p.Text)
		case ir.PartThinking:
			thinking.WriteString(p.Text)
		case ir.PartToolCall:
			if tc := p.ToolCall; tc != nil {
				calls = append(calls, toolCallOut{ID: tc.ID, Type: "function", Function: functionIO{
					Name: tc.Name, Arguments: argumentsString(tc.Arguments),
				}})
			}
		}
	}
	msg := responseMessage{Role: "assistant", ReasoningContent: thinking.String(), ToolCalls: calls}
	if text.Len() > 0 || len(calls) == 0 {
		s := text.String()
		msg.Content = &s
	}
	id := r.ID
	if id == "" {
		id = newID()
	}
	out := completionOut{
		ID:      chunkID(id),
		Object:  "chat.completion",
		Created: created,
		Model:   model,
		Choices: []choiceOut{{
			Message:      msg,
			FinishReason: finishOut(r.Finish, len(calls) > 0),
		}},
		Usage: encodeUsage(r.Usage),
	}
	return marshalJSON(&out, 512+text.Len()+thinking.Len())
}
