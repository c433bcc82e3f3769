package codectest

import (
	"bytes"
	"encoding/json"
	"io"
	"testing"

	"github.com/detour-proxy/detour/rewrite/ir"
	"github.com/detour-proxy/detour/rewrite/sse"
)

// CheckAnthropicStreamFraming asserts what the SDK relies on but does not check
// itself: every event has an `event:` line equal to its JSON type, and the
// stream ends with exactly one message_delta and one message_stop (or an
// error).
func CheckAnthropicStreamFraming(t *testing.T, stream []byte) {
	t.Helper()
	r := sse.NewReader(bytes.NewReader(stream))
	var types []string
	for {
		ev, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		var v struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(ev.Data, &v); err != nil {
			t.Fatalf("event %q: data is not JSON: %v: %s", ev.Name, err, ev.Data)
		}
		if ev.Name != v.Type {
			t.Errorf("event: line %q but JSON type %q", ev.Name, v.Type)
		}
		types = append(types, v.Type)
	}
	count := map[string]int{}
	for _, typ := range types {
		count[typ]++
	}
	if count["error"] > 0 {
		if types[len(types)-1] != "error" || count["error"] != 1 {
			t.Errorf("error event not last and alone: %v", types)
		}
		return
	}
	if len(types) < 3 || types[0] != "message_start" || types[len(types)-2] != "message_delta" || types[len(types)-1] != "message_stop" ||
		count["message_start"] != 1 || count["message_delta"] != 1 || count["message_stop"] != 1 {
		t.Errorf("stream is not message_start … message_delta message_stop, once each: %v", types)
	}
}

// The example streams of docs/vendors.md#anthropic-stream.
const (
	AnthropicTextStream = `event: message_start
data: {"type":"message_start","message":{"id":"msg_01","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":9,"output_tokens":1}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}

event: ping
data: {"type":"ping"}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi!"}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":2}}

event: message_stop
data: {"type":"message_stop"}

`
	AnthropicToolStream = `event: message_start
data: {"type":"message_start","message":{"id":"msg_02","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":20,"cache_read_input_tokens":100,"output_tokens":1}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Weather, then time."}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"c2ln"}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: content_block_start
data: {"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"dtr_Y2FsbDox","name":"get_weather","input":{}}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"city\":"}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"\"Paris\"}"}}

event: content_block_stop
data: {"type":"content_block_stop","index":1}

event: content_block_start
data: {"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_02","name":"get_time","input":{}}}

event: content_block_delta
data: {"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":""}}

event: content_block_stop
data: {"type":"content_block_stop","index":2}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":15}}

event: message_stop
data: {"type":"message_stop"}

`
)

// AnthropicTextEvents, AnthropicToolEvents and AnthropicParameterlessEvents are what a decoder of
// another vendor produces; the three streams of the Anthropic app's tests.
var (
	AnthropicTextEvents = []ir.StreamEvent{
		{Kind: ir.StreamStart, ID: "chatcmpl-1", Model: "gpt-4o"},
		{Kind: ir.StreamText, Text: ""},
		{Kind: ir.StreamText, Text: "Hello"},
		{Kind: ir.StreamText, Text: ", \"world\" <&>\n"},
		{Kind: ir.StreamFinish, Finish: ir.FinishStop},
		{Kind: ir.StreamUsage, Usage: ir.TokenUsage{Input: 1209, CachedInput: 1000, Output: 3}},
	}
	AnthropicToolEvents = []ir.StreamEvent{
		{Kind: ir.StreamStart, ID: "r2", Model: "gemini-2.5-flash", Usage: ir.TokenUsage{Input: 20}},
		{Kind: ir.StreamText, Text: "Checking both."},
		{Kind: ir.StreamToolStart, Index: 0, ID: "call:w/1", Name: "get_weather"},
		{Kind: ir.StreamToolArgs, Index: 0, Text: ""},
		{Kind: ir.StreamToolArgs, Index: 0, Text: `{"city":`},
		{Kind: ir.StreamToolArgs, Index: 0, Text: `"Paris"}`},
		{Kind: ir.StreamToolStart, Index: 1, ID: "call_t", Name: "get_time"},
		{Kind: ir.StreamToolArgs, Index: 1, Text: `{"tz":"Europe/Paris"}`},
		{Kind: ir.StreamFinish, Finish: ir.FinishStop}, // Gemini says STOP even with calls
		{Kind: ir.StreamUsage, Usage: ir.TokenUsage{Input: 20, Output: 25}},
	}
	AnthropicParameterlessEvents = []ir.StreamEvent{
		{Kind: ir.StreamStart, ID: "chatcmpl-3", Model: "gpt-4o"},
		{Kind: ir.StreamToolStart, Index: 0, ID: "call_now", Name: "get_time"},
		{Kind: ir.StreamToolArgs, Index: 0, Text: ""},
		{Kind: ir.StreamFinish, Finish: ir.FinishToolCalls},
		{Kind: ir.StreamUsage, Usage: ir.TokenUsage{Input: 12, Output: 5}},
	}
)

// AnthropicToolResponse is an OpenAI-decoded answer: text, then two calls,
// one with an id Anthropic refuses and one with non-object arguments;
// finish "stop" though it called tools.
func AnthropicToolResponse() *ir.Response {
	return &ir.Response{
		ID:    "chatcmpl-123",
		Model: "gpt-4o-2024-08-06",
		Parts: []ir.Part{
			{Kind: ir.PartThinking, Text: "The user wants weather."},
			{Kind: ir.PartText, Text: "Let me check <both> & more."},
			{Kind: ir.PartToolCall, ToolCall: &ir.ToolCall{ID: "call:a/1", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Paris"}`)}},
			{Kind: ir.PartToolCall, ToolCall: &ir.ToolCall{ID: "call_b", Name: "get_time", Arguments: json.RawMessage(`[1]`)}},
		},
		Finish: ir.FinishStop,
		Usage:  ir.TokenUsage{Input: 1200, CachedInput: 1000, Output: 40},
	}
}

// AnthropicID reports whether id is a tool-use id Anthropic accepts:
// letters, digits, '_' and '-', not empty.
func AnthropicID(id string) bool {
	if id == "" {
		return false
	}
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
