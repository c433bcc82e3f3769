package codectest

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/detour-proxy/detour/rewrite/ir"
)

// SynthCreated is the creation time of the answers translate.Synthesize's
// tests synthesize.
const SynthCreated = 1735689600

// The answers the Synthesize tests (rewrite/translate's and
// internal/sdkcheck's) synthesize: what a cache would hold.
var (
	// SynthText is a plain text answer with characters JSON escapes.
	SynthText = &ir.Response{
		ID: "r1", Model: "upstream-model", Created: SynthCreated,
		Parts:  []ir.Part{{Kind: ir.PartText, Text: "Hello, \"world\" <3 & é 😀\nline\u2028two"}},
		Finish: ir.FinishStop,
		Usage:  ir.TokenUsage{Input: 12, Output: 5},
	}
	// SynthTool is signed thinking, text and two tool calls.
	SynthTool = &ir.Response{
		ID: "r2", Model: "upstream-model", Created: SynthCreated,
		Parts: []ir.Part{
			{Kind: ir.PartThinking, Text: "The user wants weather.", Signature: "c2lnbmF0dXJl"},
			{Kind: ir.PartText, Text: "Let me check."},
			{Kind: ir.PartToolCall, ToolCall: &ir.ToolCall{ID: "call_w1", Name: "get_weather",
				Arguments: json.RawMessage(`{"city": "Paris", "days": 2}`), ThoughtSignature: "dGhvdWdodA=="}},
			{Kind: ir.PartToolCall, ToolCall: &ir.ToolCall{ID: "call_t2", Name: "get_time", Arguments: json.RawMessage(`{}`)}},
		},
		Finish: ir.FinishToolCalls,
		Usage:  ir.TokenUsage{Input: 120, Output: 30, CachedInput: 100},
	}
)

// AnswerView is what an app gets out of an answer, as comparable values.
type AnswerView struct {
	ID, Model string
	Created   int64
	Text      string
	Thinking  string
	Signature string // Anthropic's thinking signature
	Calls     []CallView
	Finish    ir.FinishReason
	Usage     ir.TokenUsage
}

// CallView is one tool call of an AnswerView, its arguments compacted.
type CallView struct{ ID, Name, Args, ThoughtSignature string }

// ViewOf is what an app gets out of r.
func ViewOf(t testing.TB, r *ir.Response) AnswerView {
	t.Helper()
	v := AnswerView{ID: r.ID, Model: r.Model, Created: r.Created, Finish: r.Finish, Usage: r.Usage}
	for _, p := range r.Parts {
		switch p.Kind {
		case ir.PartText:
			v.Text += p.Text
		case ir.PartThinking:
			v.Thinking += p.Text
			v.Signature += p.Signature
		case ir.PartToolCall:
			var buf bytes.Buffer
			if err := json.Compact(&buf, p.ToolCall.Arguments); err != nil {
				t.Errorf("call %s: arguments %q are not JSON", p.ToolCall.Name, p.ToolCall.Arguments)
			}
			v.Calls = append(v.Calls, CallView{p.ToolCall.ID, p.ToolCall.Name, buf.String(), p.ToolCall.ThoughtSignature})
		}
	}
	return v
}
