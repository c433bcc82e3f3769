package anthropic

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/detour-proxy/detour/rewrite/ir"
)

// DecodeResponse reads a non-streamed Anthropic message (a 200 body of
// /v1/messages) into the vendor-neutral form: text, thinking (redacted
// thinking as a thinking part with its data in Signature) and tool calls in
// order, tool ids through ir.OriginalToolID, the stop reason mapped
// (docs/vendors.md#finish-reasons) and usage with cached tokens counted in Input. Blocks
// of Anthropic's server tools are left out: detour never asks for them. An
// error envelope is returned as an error.
func DecodeResponse(body []byte) (*ir.Response, error) {
	var in inResponse
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, fmt.Errorf("anthropic: decode response: %w", err)
	}
	if in.Type == "error" || in.Error != nil {
		msg := "no message"
		if in.Error != nil {
			msg = in.Error.Type + ": " + in.Error.Message
		}
		return nil, errors.New("anthropic: response is an error: " + msg)
	}
	r := &ir.Response{
		ID:    in.ID,
		Model: in.Model,
		Parts: make([]ir.Part, 0, len(in.Content)),
		Usage: in.Usage.ir(),
	}
	hasTool := false
	for i := range in.Content {
		b := &in.Content[i]
		switch b.Type {
		case "text":
			r.Parts = append(r.Parts, ir.Part{Kind: ir.PartText, Text: b.Text})
		case "thinking":
			r.Parts = append(r.Parts, ir.Part{Kind: ir.PartThinking, Text: b.Thinking, Signature: b.Signature})
		case "redacted_thinking":
			r.Parts = append(r.Parts, ir.Part{Kind: ir.PartThinking, Signature: b.Data})
		case "tool_use":
			hasTool = true
			r.Parts = append(r.Parts, ir.Part{Kind: ir.PartToolCall, ToolCall: &ir.ToolCall{
				ID:        ir.OriginalToolID(b.ID),
				Name:      b.Name,
				Arguments: objectOrEmpty(b.Input),
			}})
		}
	}
	r.Finish = finishReason(in.StopReason, hasTool)
	return r, nil
}

// ir converts Anthropic usage: input_tokens excludes the cached part, the
// IR's Input includes it (docs/vendors.md#usage).
func (u inUsage) ir() ir.TokenUsage {
	return ir.TokenUsage{
		Input:       u.InputTokens + u.CacheReadInputTokens + u.CacheCreationInputTokens,
		Output:      u.OutputTokens,
		CachedInput: u.CacheReadInputTokens,
	}
}

// finishReason maps a stop_reason (docs/vendors.md#finish-reasons). A turn that called
// tools finishes as tool_calls whatever it says (docs/vendors.md#finish-after-tool-calls), unless it was cut
// off or refused.
func finishReason(stop string, hasTool bool) ir.FinishReason {
	var f ir.FinishReason
	switch stop {
	case "max_tokens", "model_context_window_exceeded":
		f = ir.FinishLength
	case "tool_use":
		f = ir.FinishToolCalls
	case "refusal":
		f = ir.FinishContentFilter
	default: // end_turn, stop_sequence, pause_turn, and null on a cut stream
		f = ir.FinishStop
	}
	if hasTool && f == ir.FinishStop {
		f = ir.FinishToolCalls
	}
	return f
}

// stopReason maps a finish reason back. Only a turn that holds tool_use
// blocks says tool_use (an app loops on it to run tools); an answer that
// was cut off or refused keeps saying so even with tool calls in it.
func stopReason(f ir.FinishReason, hasTool bool) string {
	switch f {
	case ir.FinishLength:
		return "max_tokens"
	case ir.FinishContentFilter:
		return "refusal"
	}
	if hasTool {
		return "tool_use"
	}
	return "end_turn"
}

// EncodeResponse writes r as the complete Anthropic message the app's SDK
// would get from /v1/messages, for the model the app asked for (r.Model
// when model is ""): an id with the "msg_" prefix, text, thinking and
// tool_use blocks (ids through ir.SafeToolID, input always an object), the
// stop reason and usage with input_tokens excluding the cached part.
func EncodeResponse(r *ir.Response, model string) ([]byte, error) {
	if r == nil {
		return nil, errors.New("anthropic: encode response: nil response")
	}
	if model == "" {
		model = r.Model
	}
	out := outResponse{
		ID:      messageID(r.ID),
		Type:    "message",
		Role:    "assistant",
		Model:   model,
		Content: make([]outBlock, 0, len(r.Parts)),
		Usage:   outUsageOf(r.Usage),
	}
	hasTool := false
	for i := range r.Parts {
		p := &r.Parts[i]
		switch p.Kind {
		case ir.PartText:
			if p.Text != "" {
				out.Content = append(out.Content, outBlock{Type: "text", Text: p.Text})
			}
		case ir.PartThinking:
			switch {
			case p.Text != "":
				out.Content = append(out.Content, outBlock{Type: "thinking", Thinking: p.Text, Signature: p.Signature})
			case p.Signature != "":
				out.Content = append(out.Content, outBlock{Type: "redacted_thinking", Data: p.Signature})
			}
		case ir.PartToolCall:
			if tc := p.ToolCall; tc != nil {
				hasTool = true
				out.Content = append(out.Content, outBlock{
					Type:  "tool_use",
					ID:    ir.SafeToolID(tc.ID),
					Name:  tc.Name,
					Input: objectOrEmpty(tc.Arguments),
				})
			}
		}
	}
	out.StopReason = stopReason(r.Finish, hasTool)
	return marshal(&out, 512)
}

// outUsageOf converts IR usage into a message's usage.
func outUsageOf(u ir.TokenUsage) outUsage {
	return outUsage{
		InputTokens:          max(u.Input-u.CachedInput, 0),
		CacheReadInputTokens: u.CachedInput,
		OutputTokens:         u.Output,
	}
}

// messageID returns id with Anthropic's "msg_" prefix, or a new random id
// when there is none.
func messageID(id string) string {
	switch {
	case id == "":
		return "msg_" + rand.Text()
	case strings.HasPrefix(id, "msg_"):
		return id
	}
	return "msg_" + id
}
