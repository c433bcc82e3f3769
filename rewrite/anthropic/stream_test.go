package anthropic

import (
	"reflect"
	"testing"

	"github.com/detour-proxy/detour/internal/codectest"
	"github.com/detour-proxy/detour/rewrite/ir"
	"github.com/detour-proxy/detour/rewrite/sse"
)

func TestStreamDecoder(t *testing.T) {
	for _, tc := range []struct {
		name   string
		stream string
		want   []ir.StreamEvent
	}{
		{
			name:   "text",
			stream: codectest.AnthropicTextStream,
			want: []ir.StreamEvent{
				{Kind: ir.StreamStart, ID: "msg_01", Model: "claude-sonnet-4-5", Usage: ir.TokenUsage{Input: 9}},
				{Kind: ir.StreamText, Text: "Hi!"},
				{Kind: ir.StreamFinish, Finish: ir.FinishStop},
				{Kind: ir.StreamUsage, Usage: ir.TokenUsage{Input: 9, Output: 2}},
			},
		},
		{
			name:   "thinking and tools, parameterless tool gets {}",
			stream: codectest.AnthropicToolStream,
			want: []ir.StreamEvent{
				{Kind: ir.StreamStart, ID: "msg_02", Model: "claude-sonnet-4-5", Usage: ir.TokenUsage{Input: 120, CachedInput: 100}},
				{Kind: ir.StreamThinking, Text: "Weather, then time."},
				{Kind: ir.StreamThinking, Signature: "c2ln"},
				{Kind: ir.StreamToolStart, Index: 0, ID: "call:1", Name: "get_weather"},
				{Kind: ir.StreamToolArgs, Index: 0, Text: `{"city":`},
				{Kind: ir.StreamToolArgs, Index: 0, Text: `"Paris"}`},
				{Kind: ir.StreamToolStart, Index: 1, ID: "toolu_02", Name: "get_time"},
				{Kind: ir.StreamToolArgs, Index: 1, Text: `{}`},
				{Kind: ir.StreamFinish, Finish: ir.FinishToolCalls},
				{Kind: ir.StreamUsage, Usage: ir.TokenUsage{Input: 120, CachedInput: 100, Output: 15}},
			},
		},
		{
			name: "no event names: the JSON type decides; input restated in message_delta",
			stream: `data: {"type":"message_start","message":{"id":"msg_3","model":"m","usage":{"input_tokens":0}}}

data: {"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t","name":"f","input":{}}}

data: {"type":"message_delta","delta":{"stop_reason":"max_tokens"},"usage":{"input_tokens":30,"output_tokens":4}}

data: {"type":"message_stop"}

`,
			want: []ir.StreamEvent{
				{Kind: ir.StreamStart, ID: "msg_3", Model: "m"},
				{Kind: ir.StreamToolStart, Index: 0, ID: "t", Name: "f"},
				{Kind: ir.StreamToolArgs, Index: 0, Text: "{}"}, // never stopped: closed by message_delta
				{Kind: ir.StreamFinish, Finish: ir.FinishLength},
				{Kind: ir.StreamUsage, Usage: ir.TokenUsage{Input: 30, Output: 4}},
			},
		},
		{
			name: "comments, pings and unknown events say nothing",
			stream: `: keep-alive

event: ping
data: {"type":"ping"}

event: future_event
data: {"type":"future_event","x":1}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"citations_delta","citation":{}}}

`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := codectest.DecodeStream(t, NewStreamDecoder(), tc.stream)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %s\nwant %s", jsonOf(got), jsonOf(tc.want))
			}
		})
	}
}

func TestStreamDecoderErrors(t *testing.T) {
	for _, tc := range []struct {
		name, event string
		wantClass   string
		wantStatus  int
		wantMsg     string
	}{
		{"overloaded", "event: error\ndata: {\"type\": \"error\", \"error\": {\"type\": \"overloaded_error\", \"message\": \"Overloaded\"}}\n\n", "overloaded", 529, "Overloaded"},
		{"permission", "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"permission_error\",\"message\":\"no\"}}\n\n", "auth", 403, "no"},
		{"no name", "data: {\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\",\"message\":\"slow\"}}\n\n", "rate_limited", 429, "slow"},
		{"broken", "event: error\ndata: {\"type\":\"err\n\n", "server_error", 500, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := codectest.DecodeStream(t, NewStreamDecoder(), tc.event)
			if len(got) != 1 || got[0].Kind != ir.StreamError || got[0].Err == nil {
				t.Fatalf("got %s", jsonOf(got))
			}
			if e := got[0].Err; e.Class != tc.wantClass || e.Status != tc.wantStatus || e.Message != tc.wantMsg {
				t.Errorf("got %+v", *e)
			}
		})
	}

	d := NewStreamDecoder()
	if _, err := d.Decode(sse.Event{Name: "content_block_delta", Data: []byte(`{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{"}}`)}); err == nil {
		t.Error("input_json_delta for a block that never started: no error")
	}
	if _, err := d.Decode(sse.Event{Name: "content_block_start", Data: []byte(`{"index":99999999,"content_block":{"type":"text"}}`)}); err == nil {
		t.Error("huge block index: no error")
	}
	if _, err := d.Decode(sse.Event{Name: "message_delta", Data: []byte(`not json`)}); err == nil {
		t.Error("non-JSON data: no error")
	}
}

// TestStreamEncoderGolden holds the encoder's output for the Anthropic app's
// three streams byte for byte, and to the framing the SDK relies on.
// internal/sdkcheck's TestAnthropicCodecStreamEncoderSDK reads the same
// streams with anthropic-sdk-go and checks what the app ends with.
func TestStreamEncoderGolden(t *testing.T) {
	opts := ir.StreamOptions{Model: "claude-sonnet-4-5"}
	for _, tc := range []struct {
		name, file string
		events     []ir.StreamEvent
	}{
		{"text", "stream_text.sse", codectest.AnthropicTextEvents},
		{"text then two tool calls", "stream_tools.sse", codectest.AnthropicToolEvents},
		{"parameterless tool", "stream_parameterless.sse", codectest.AnthropicParameterlessEvents},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stream := encodeStream(opts, tc.events...)
			golden(t, tc.file, stream)
			codectest.CheckAnthropicStreamFraming(t, stream)
		})
	}
}

// TestStreamEncoderEdges: the encoder's edge cases that need no SDK; those
// the SDK reads are internal/sdkcheck's TestAnthropicCodecStreamEncoderEdges.
func TestStreamEncoderEdges(t *testing.T) {
	opts := ir.StreamOptions{Model: "claude-sonnet-4-5"}
	t.Run("error carries the upstream's class", func(t *testing.T) {
		d := NewStreamDecoder()
		evs, _ := d.Decode(sse.Event{Name: "error", Data: []byte(`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)})
		out := NewStreamEncoder(opts).Encode(nil, evs[0])
		if want := "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n"; string(out) != want {
			t.Errorf("got %q want %q", out, want)
		}
	})
}
