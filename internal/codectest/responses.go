package codectest

import "github.com/detour-proxy/detour/rewrite/ir"

// ResponsesTextAndTool is a chat vendor's stream of text with hidden
// thinking in it, then one tool call whose arguments arrive in fragments:
// rewrite/responses' stream tests encode it, and internal/sdkcheck's
// openai-go Responses tests read what the encoder writes.
var ResponsesTextAndTool = []ir.StreamEvent{
	{Kind: ir.StreamStart, ID: "msg_01abc", Model: "claude"},
	{Kind: ir.StreamText, Text: "Let me "},
	{Kind: ir.StreamThinking, Text: "hidden"},
	{Kind: ir.StreamText, Text: "look."},
	{Kind: ir.StreamToolStart, Index: 0, ID: "toolu_1", Name: "get_weather"},
	{Kind: ir.StreamToolArgs, Index: 0, Text: `{"city":`},
	{Kind: ir.StreamToolArgs, Index: 0, Text: `"Paris"}`},
	{Kind: ir.StreamFinish, Finish: ir.FinishToolCalls},
	{Kind: ir.StreamUsage, Usage: ir.TokenUsage{Input: 20, Output: 9, CachedInput: 4}},
}
