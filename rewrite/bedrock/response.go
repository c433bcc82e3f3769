package bedrock

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/detour-proxy/detour/rewrite/ir"
)

// DecodeResponse decodes a Converse answer. Converse sends no id and no
// model: the app's encoder fills those in from the request.
func DecodeResponse(body []byte) (*ir.Response, error) {
	var in inResponse
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, fmt.Errorf("bedrock: response: %w", err)
	}
	if in.Output.Message == nil {
		return nil, errors.New("bedrock: response: no output.message")
	}
	r := &ir.Response{Usage: in.Usage.ir()}
	hasTool := false
	for i, b := range in.Output.Message.Content {
		switch {
		case b.Text != nil:
			r.Parts = append(r.Parts, ir.Part{Kind: ir.PartText, Text: *b.Text})
		case b.ToolUse != nil:
			hasTool = true
			args := bytes.TrimSpace(b.ToolUse.Input)
			if len(args) == 0 || string(args) == "null" {
				args = []byte("{}")
			}
			id := b.ToolUse.ToolUseID
			if id == "" {
				id = ir.GeneratedToolID("bedrock", i)
			}
			r.Parts = append(r.Parts, ir.Part{Kind: ir.PartToolCall, ToolCall: &ir.ToolCall{ID: ir.OriginalToolID(id), Name: b.ToolUse.Name, Arguments: args}})
		case b.ReasoningContent != nil:
			rc := b.ReasoningContent
			if rc.ReasoningText != nil {
				r.Parts = append(r.Parts, ir.Part{Kind: ir.PartThinking, Text: rc.ReasoningText.Text, Signature: rc.ReasoningText.Signature})
			} else if rc.RedactedContent != "" {
				r.Parts = append(r.Parts, ir.Part{Kind: ir.PartThinking, Signature: rc.RedactedContent})
			}
		}
	}
	r.Finish = finishReason(in.StopReason, hasTool)
	return r, nil
}

func (u inUsage) ir() ir.TokenUsage {
	// inputTokens excludes the cache reads and writes, as Anthropic's
	// input_tokens does; IR's Input includes them.
	return ir.TokenUsage{
		Input:       u.InputTokens + u.CacheReadInputTokens + u.CacheWriteInputTokens,
		Output:      u.OutputTokens,
		CachedInput: u.CacheReadInputTokens,
	}
}

// finishReason maps a stopReason (API_runtime_Converse). A turn that called
// tools finishes as tool_calls unless it was cut off or refused.
func finishReason(stop string, hasTool bool) ir.FinishReason {
	switch stop {
	case "max_tokens", "model_context_window_exceeded":
		return ir.FinishLength
	case "guardrail_intervened", "content_filtered":
		return ir.FinishContentFilter
	case "tool_use":
		return ir.FinishToolCalls
	}
	if hasTool {
		return ir.FinishToolCalls
	}
	return ir.FinishStop
}
