package anthropic

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/detour-proxy/detour/internal/codectest"
	"github.com/detour-proxy/detour/rewrite/ir"
)

func TestDecodeResponse(t *testing.T) {
	for _, tc := range []struct {
		name string
		body string
		want ir.Response
	}{
		{
			name: "text with cache usage",
			body: `{"id":"msg_01","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"Hi!","citations":null}],"stop_reason":"end_turn","stop_sequence":null,
				"usage":{"input_tokens":9,"cache_creation_input_tokens":100,"cache_read_input_tokens":1000,"output_tokens":2}}`,
			want: ir.Response{ID: "msg_01", Model: "claude-sonnet-4-5", Parts: []ir.Part{{Kind: ir.PartText, Text: "Hi!"}},
				Finish: ir.FinishStop, Usage: ir.TokenUsage{Input: 1109, Output: 2, CachedInput: 1000}},
		},
		{
			name: "thinking and tool calls",
			body: `{"id":"msg_02","type":"message","role":"assistant","model":"m","content":[
				{"type":"thinking","thinking":"Need weather.","signature":"sig"},
				{"type":"redacted_thinking","data":"opaque"},
				{"type":"text","text":"Checking."},
				{"type":"tool_use","id":"` + ir.SafeToolID("call:1") + `","name":"get_weather","input":{"city":"Paris"}},
				{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{}}],
				"stop_reason":"tool_use","usage":{"input_tokens":20,"output_tokens":15}}`,
			want: ir.Response{ID: "msg_02", Model: "m", Parts: []ir.Part{
				{Kind: ir.PartThinking, Text: "Need weather.", Signature: "sig"},
				{Kind: ir.PartThinking, Signature: "opaque"},
				{Kind: ir.PartText, Text: "Checking."},
				{Kind: ir.PartToolCall, ToolCall: &ir.ToolCall{ID: "call:1", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Paris"}`)}},
			}, Finish: ir.FinishToolCalls, Usage: ir.TokenUsage{Input: 20, Output: 15}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := DecodeResponse([]byte(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(*got, tc.want) {
				t.Errorf("got %s\nwant %s", jsonOf(got), jsonOf(tc.want))
			}
		})
	}
	if _, err := DecodeResponse([]byte(`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)); err == nil || !strings.Contains(err.Error(), "overloaded_error: Overloaded") {
		t.Errorf("error envelope: %v", err)
	}
	if _, err := DecodeResponse([]byte(`[`)); err == nil {
		t.Error("broken JSON decoded")
	}
}

func TestStopReasons(t *testing.T) {
	for _, tc := range []struct {
		stop    string
		hasTool bool
		want    ir.FinishReason
		back    string
	}{
		{"end_turn", false, ir.FinishStop, "end_turn"},
		{"stop_sequence", false, ir.FinishStop, "end_turn"},
		{"pause_turn", false, ir.FinishStop, "end_turn"},
		{"", false, ir.FinishStop, "end_turn"},
		{"max_tokens", false, ir.FinishLength, "max_tokens"},
		{"model_context_window_exceeded", false, ir.FinishLength, "max_tokens"},
		{"tool_use", true, ir.FinishToolCalls, "tool_use"},
		{"end_turn", true, ir.FinishToolCalls, "tool_use"}, // docs/vendors.md#finish-after-tool-calls
		{"refusal", false, ir.FinishContentFilter, "refusal"},
		{"max_tokens", true, ir.FinishLength, "max_tokens"}, // a cut-off call is not one to run
	} {
		if got := finishReason(tc.stop, tc.hasTool); got != tc.want {
			t.Errorf("finishReason(%q, %v) = %q; want %q", tc.stop, tc.hasTool, got, tc.want)
		}
		if got := stopReason(tc.want, tc.hasTool); got != tc.back {
			t.Errorf("stopReason(%q, %v) = %q; want %q", tc.want, tc.hasTool, got, tc.back)
		}
	}
	// A tool_calls finish with no call in it (the translator unwrapped the
	// JSON-mode tool) is an ordinary end of turn.
	if got := stopReason(ir.FinishToolCalls, false); got != "end_turn" {
		t.Errorf("tool_calls without calls: %q", got)
	}
}

func TestEncodeResponseGolden(t *testing.T) {
	got, err := EncodeResponse(codectest.AnthropicToolResponse(), "claude-sonnet-4-5")
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "response_tool_calls.json", got)
	got, err = EncodeResponse(&ir.Response{Model: "gemini-2.5-flash", ID: "r1", Parts: []ir.Part{{Kind: ir.PartText, Text: "Hi!"}}, Finish: ir.FinishLength, Usage: ir.TokenUsage{Input: 9, Output: 2}}, "")
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "response_text.json", got)
}

// TestResponseRoundTrip: DecodeResponse(EncodeResponse(r)) keeps what the
// Anthropic shape carries.
func TestResponseRoundTrip(t *testing.T) {
	r := &ir.Response{
		ID:    "msg_1",
		Model: "claude-sonnet-4-5",
		Parts: []ir.Part{
			{Kind: ir.PartThinking, Text: "t", Signature: "s"},
			{Kind: ir.PartThinking, Signature: "redacted"},
			{Kind: ir.PartText, Text: "a"},
			{Kind: ir.PartToolCall, ToolCall: &ir.ToolCall{ID: "x y", Name: "f", Arguments: json.RawMessage(`{"k":[1,2]}`)}},
		},
		Finish: ir.FinishToolCalls,
		Usage:  ir.TokenUsage{Input: 50, CachedInput: 20, Output: 7},
	}
	body, err := EncodeResponse(r, "")
	if err != nil {
		t.Fatal(err)
	}
	back, err := DecodeResponse(body)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, r) {
		t.Errorf("got %s\nwant %s", jsonOf(back), jsonOf(r))
	}
}
