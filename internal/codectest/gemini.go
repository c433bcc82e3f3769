package codectest

import (
	"encoding/json"

	"github.com/detour-proxy/detour/rewrite/ir"
)

// GeminiSampleResponse is an answer as another vendor's decoder produces it.
func GeminiSampleResponse() *ir.Response {
	return &ir.Response{
		ID: "chatcmpl-9", Model: "gpt-4o", Created: 1735689600,
		Parts: []ir.Part{
			{Kind: ir.PartThinking, Text: "Plan: call the tool.", Signature: "anthropic-sig"},
			{Kind: ir.PartText, Text: "Let me check <that>."},
			{Kind: ir.PartText, Text: ""},
			{Kind: ir.PartToolCall, ToolCall: &ir.ToolCall{ID: "call_1", Name: "get_weather", Arguments: json.RawMessage(`{"city": "Paris"}`)}},
			{Kind: ir.PartToolCall, ToolCall: &ir.ToolCall{ID: "call_2", Name: "get_time", Arguments: json.RawMessage(`not json`), ThoughtSignature: "not base64!"}},
		},
		Finish: ir.FinishToolCalls,
		Usage:  ir.TokenUsage{Input: 120, CachedInput: 100, Output: 45, Reasoning: 15},
	}
}

// The streams of rewrite/gemini's stream tests, which internal/sdkcheck's
// go-genai tests encode too.
var (
	// GeminiTextEvents are what an Anthropic decoder produces for signed
	// thinking and text.
	GeminiTextEvents = []ir.StreamEvent{
		{Kind: ir.StreamStart, ID: "msg_01", Model: "claude-sonnet-4-5", Usage: ir.TokenUsage{Input: 9}},
		{Kind: ir.StreamThinking, Text: "Greet back."},
		{Kind: ir.StreamThinking, Signature: "EqQBCg=="},
		{Kind: ir.StreamText, Text: "Hi"},
		{Kind: ir.StreamText, Text: ""},
		{Kind: ir.StreamText, Text: "! \"quoted\"\nnew line <b>"},
		{Kind: ir.StreamFinish, Finish: ir.FinishStop},
		{Kind: ir.StreamUsage, Usage: ir.TokenUsage{Input: 9, Output: 6, Reasoning: 3}},
	}
	// GeminiToolEvents are what an OpenAI decoder produces for two parallel
	// calls whose arguments arrive in fragments, usage after the finish.
	GeminiToolEvents = []ir.StreamEvent{
		{Kind: ir.StreamStart, ID: "chatcmpl-2", Model: "gpt-4o"},
		{Kind: ir.StreamToolStart, Index: 0, ID: "call_1", Name: "get_weather"},
		{Kind: ir.StreamToolArgs, Index: 0, Text: `{"city":`},
		{Kind: ir.StreamToolArgs, Index: 0, Text: "\n  \"Paris\"}"},
		{Kind: ir.StreamToolStart, Index: 1, ID: "call_2", Name: "get_time", Signature: "c2lnbmF0dXJl"},
		{Kind: ir.StreamToolArgs, Index: 1, Text: `{"tz":`},
		{Kind: ir.StreamFinish, Finish: ir.FinishToolCalls},
		{Kind: ir.StreamUsage, Usage: ir.TokenUsage{Input: 20, Output: 15}},
	}
)
