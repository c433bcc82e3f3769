package anthropic

import (
	"bytes"
	"context"
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"

	"github.com/detour-proxy/detour/rewrite"
	"github.com/detour-proxy/detour/rewrite/ir"
	"github.com/detour-proxy/detour/rewrite/sse"
)

// The example streams of docs/vendors.md#anthropic-stream.
const (
	textStream = `event: message_start
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
	toolStream = `event: message_start
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

func TestStreamDecoder(t *testing.T) {
	for _, tc := range []struct {
		name   string
		stream string
		want   []ir.StreamEvent
	}{
		{
			name:   "text",
			stream: textStream,
			want: []ir.StreamEvent{
				{Kind: ir.StreamStart, ID: "msg_01", Model: "claude-sonnet-4-5", Usage: ir.TokenUsage{Input: 9}},
				{Kind: ir.StreamText, Text: "Hi!"},
				{Kind: ir.StreamFinish, Finish: ir.FinishStop},
				{Kind: ir.StreamUsage, Usage: ir.TokenUsage{Input: 9, Output: 2}},
			},
		},
		{
			name:   "thinking and tools, parameterless tool gets {}",
			stream: toolStream,
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
			got := decodeStream(t, tc.stream)
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
			got := decodeStream(t, tc.event)
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

// textEvents, toolEvents and parameterlessEvents are what a decoder of
// another vendor produces; the three streams of the Anthropic app's tests.
var (
	textEvents = []ir.StreamEvent{
		{Kind: ir.StreamStart, ID: "chatcmpl-1", Model: "gpt-4o"},
		{Kind: ir.StreamText, Text: ""},
		{Kind: ir.StreamText, Text: "Hello"},
		{Kind: ir.StreamText, Text: ", \"world\" <&>\n"},
		{Kind: ir.StreamFinish, Finish: ir.FinishStop},
		{Kind: ir.StreamUsage, Usage: ir.TokenUsage{Input: 1209, CachedInput: 1000, Output: 3}},
	}
	toolEvents = []ir.StreamEvent{
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
	parameterlessEvents = []ir.StreamEvent{
		{Kind: ir.StreamStart, ID: "chatcmpl-3", Model: "gpt-4o"},
		{Kind: ir.StreamToolStart, Index: 0, ID: "call_now", Name: "get_time"},
		{Kind: ir.StreamToolArgs, Index: 0, Text: ""},
		{Kind: ir.StreamFinish, Finish: ir.FinishToolCalls},
		{Kind: ir.StreamUsage, Usage: ir.TokenUsage{Input: 12, Output: 5}},
	}
)

// TestStreamEncoderSDK feeds the encoder's output through anthropic-sdk-go's
// stream decoder and Message.Accumulate and checks what the app ends with.
func TestStreamEncoderSDK(t *testing.T) {
	opts := ir.StreamOptions{Model: "claude-sonnet-4-5"}
	t.Run("text", func(t *testing.T) {
		stream := encodeStream(opts, textEvents...)
		golden(t, "stream_text.sse", stream)
		checkStreamFraming(t, stream)
		msg, _, err := sdkAccumulate(stream)
		if err != nil {
			t.Fatal(err)
		}
		if len(msg.Content) != 1 || msg.Content[0].Text != "Hello, \"world\" <&>\n" {
			t.Errorf("content %s", msg.RawJSON())
		}
		if msg.StopReason != "end_turn" || msg.Model != "claude-sonnet-4-5" || msg.ID != "msg_chatcmpl-1" {
			t.Errorf("stop %q model %q id %q", msg.StopReason, msg.Model, msg.ID)
		}
		// Input known only at the end (OpenAI reports usage last).
		if u := msg.Usage; u.InputTokens != 209 || u.CacheReadInputTokens != 1000 || u.OutputTokens != 3 {
			t.Errorf("usage %+v", u)
		}
	})
	t.Run("text then two tool calls", func(t *testing.T) {
		stream := encodeStream(opts, toolEvents...)
		golden(t, "stream_tools.sse", stream)
		checkStreamFraming(t, stream)
		msg, _, err := sdkAccumulate(stream)
		if err != nil {
			t.Fatal(err)
		}
		if len(msg.Content) != 3 || msg.Content[0].Text != "Checking both." {
			t.Fatalf("content %s", msg.RawJSON())
		}
		w, tm := msg.Content[1].AsToolUse(), msg.Content[2].AsToolUse()
		if w.Name != "get_weather" || string(w.Input) != `{"city":"Paris"}` || ir.OriginalToolID(w.ID) != "call:w/1" {
			t.Errorf("first call %+v input %s", w, w.Input)
		}
		if tm.Name != "get_time" || string(tm.Input) != `{"tz":"Europe/Paris"}` || tm.ID != "call_t" {
			t.Errorf("second call %+v input %s", tm, tm.Input)
		}
		if msg.StopReason != "tool_use" {
			t.Errorf("stop_reason %q", msg.StopReason)
		}
		if u := msg.Usage; u.InputTokens != 20 || u.OutputTokens != 25 {
			t.Errorf("usage %+v", u)
		}
	})
	t.Run("parameterless tool", func(t *testing.T) {
		stream := encodeStream(opts, parameterlessEvents...)
		golden(t, "stream_parameterless.sse", stream)
		checkStreamFraming(t, stream)
		msg, _, err := sdkAccumulate(stream)
		if err != nil {
			t.Fatal(err)
		}
		if len(msg.Content) != 1 {
			t.Fatalf("content %s", msg.RawJSON())
		}
		call := msg.Content[0].AsToolUse()
		var args map[string]any
		if err := json.Unmarshal(call.Input, &args); err != nil || len(args) != 0 || call.Name != "get_time" {
			t.Errorf("call %+v input %q: %v", call, call.Input, err)
		}
		if msg.StopReason != "tool_use" || msg.Usage.InputTokens != 12 || msg.Usage.OutputTokens != 5 {
			t.Errorf("stop %q usage %+v", msg.StopReason, msg.Usage)
		}
		// A client that concatenates partial_json itself (pitfall 9) must
		// get an object too.
		if !strings.Contains(string(stream), `"partial_json":"{}"`) {
			t.Error(`no partial_json "{}" for the parameterless call`)
		}
	})
	t.Run("thinking then text", func(t *testing.T) {
		stream := encodeStream(opts,
			ir.StreamEvent{Kind: ir.StreamThinking, Text: "Let me think."},
			ir.StreamEvent{Kind: ir.StreamThinking, Signature: "c2ln"},
			ir.StreamEvent{Kind: ir.StreamText, Text: "42"},
			ir.StreamEvent{Kind: ir.StreamFinish, Finish: ir.FinishLength},
		)
		checkStreamFraming(t, stream)
		msg, _, err := sdkAccumulate(stream)
		if err != nil {
			t.Fatal(err)
		}
		if len(msg.Content) != 2 || msg.Content[0].Thinking != "Let me think." || msg.Content[0].Signature != "c2ln" || msg.Content[1].Text != "42" {
			t.Errorf("content %s", msg.RawJSON())
		}
		if msg.StopReason != "max_tokens" || !strings.HasPrefix(msg.ID, "msg_") {
			t.Errorf("stop %q id %q", msg.StopReason, msg.ID)
		}
	})
}

// TestStreamThroughSDKClient serves the encoder's output to a real
// anthropic-sdk-go client, as detour serves an app: NewStreaming for the
// stream, New for the complete message.
func TestStreamThroughSDKClient(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Stream bool `json:"stream"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		if !req.Stream {
			body, err := EncodeResponse(toolResponse(), "claude-sonnet-4-5")
			if err != nil {
				t.Error(err)
			}
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(body)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		enc := NewStreamEncoder(ir.StreamOptions{Model: "claude-sonnet-4-5"})
		var buf []byte
		for _, ev := range toolEvents {
			buf = enc.Encode(buf[:0], ev)
			_, _ = w.Write(buf)
			w.(http.Flusher).Flush()
		}
		_, _ = w.Write(enc.Close(buf[:0]))
	}))
	defer srv.Close()
	client := anthropic.NewClient(option.WithBaseURL(srv.URL), option.WithAPIKey("test"), option.WithMaxRetries(0))
	params := anthropic.MessageNewParams{
		Model:     "claude-sonnet-4-5",
		MaxTokens: 100,
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Weather and time in Paris?"))},
	}

	msg, err := client.Messages.New(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	checkToolMessage(t, *msg)

	stream := client.Messages.NewStreaming(context.Background(), params)
	var acc anthropic.Message
	for stream.Next() {
		if err := acc.Accumulate(stream.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if len(acc.Content) != 3 || acc.StopReason != "tool_use" || string(acc.Content[1].Input) != `{"city":"Paris"}` || acc.Usage.OutputTokens != 25 {
		t.Errorf("accumulated %s", acc.RawJSON())
	}
	// The replayed turn comes back through DecodeRequest with the
	// original ids.
	next := anthropic.MessageNewParams{Model: "m", MaxTokens: 1, Messages: []anthropic.MessageParam{acc.ToParam()}}
	body, _ := json.Marshal(next)
	r, err := DecodeRequest(body)
	if err != nil {
		t.Fatal(err)
	}
	if id := r.Messages[0].Parts[1].ToolCall.ID; id != "call:w/1" {
		t.Errorf("replayed id %q", id)
	}
}

func TestStreamEncoderEdges(t *testing.T) {
	opts := ir.StreamOptions{Model: "claude-sonnet-4-5"}
	t.Run("early end closes once", func(t *testing.T) {
		e := NewStreamEncoder(opts)
		out := e.Encode(nil, ir.StreamEvent{Kind: ir.StreamToolStart, Index: 0, ID: "a", Name: "f"})
		out = e.Encode(out, ir.StreamEvent{Kind: ir.StreamToolArgs, Index: 0, Text: `{"x":1}`})
		out = e.Close(out)
		n := len(out)
		out = e.Close(out)
		out = e.Encode(out, ir.StreamEvent{Kind: ir.StreamText, Text: "late"})
		if len(out) != n {
			t.Errorf("output after Close: %s", out[n:])
		}
		checkStreamFraming(t, out)
		msg, _, err := sdkAccumulate(out)
		if err != nil || msg.StopReason != "tool_use" || string(msg.Content[0].Input) != `{"x":1}` {
			t.Errorf("msg %s err %v", msg.RawJSON(), err)
		}
	})
	t.Run("empty stream", func(t *testing.T) {
		out := NewStreamEncoder(opts).Close(nil)
		checkStreamFraming(t, out)
		msg, _, err := sdkAccumulate(out)
		if err != nil || len(msg.Content) != 0 || msg.StopReason != "end_turn" {
			t.Errorf("msg %s err %v", msg.RawJSON(), err)
		}
	})
	t.Run("error mid-stream ends it", func(t *testing.T) {
		e := NewStreamEncoder(opts)
		out := e.Encode(nil, ir.StreamEvent{Kind: ir.StreamText, Text: "partial"})
		out = e.Encode(out, ir.StreamEvent{Kind: ir.StreamError, Err: nil})
		n := len(out)
		out = e.Close(out)
		out = e.Encode(out, ir.StreamEvent{Kind: ir.StreamError})
		if len(out) != n {
			t.Errorf("output after the error: %s", out[n:])
		}
		if !bytes.HasSuffix(out, []byte("event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"api_error\",\"message\":\"The upstream server had an error while processing your request.\"}}\n\n")) {
			t.Errorf("stream: %s", out)
		}
		_, _, err := sdkAccumulate(out)
		if err == nil {
			t.Error("SDK saw no error")
		}
	})
	t.Run("error carries the upstream's class", func(t *testing.T) {
		d := NewStreamDecoder()
		evs, _ := d.Decode(sse.Event{Name: "error", Data: []byte(`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)})
		out := NewStreamEncoder(opts).Encode(nil, evs[0])
		if want := "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n"; string(out) != want {
			t.Errorf("got %q want %q", out, want)
		}
	})
	t.Run("arguments for a stopped or unknown call are dropped", func(t *testing.T) {
		out := encodeStream(opts,
			ir.StreamEvent{Kind: ir.StreamToolStart, Index: 0, ID: "a", Name: "f"},
			ir.StreamEvent{Kind: ir.StreamToolArgs, Index: 0, Text: `{"x":1}`},
			ir.StreamEvent{Kind: ir.StreamToolStart, Index: 1, ID: "b", Name: "g"},
			ir.StreamEvent{Kind: ir.StreamToolArgs, Index: 0, Text: `{"late":1}`},
			ir.StreamEvent{Kind: ir.StreamToolArgs, Index: 1, Text: ` {"y":2}`},
			ir.StreamEvent{Kind: ir.StreamToolArgs, Index: 7, Text: `{"lost":true}`},
		)
		checkStreamFraming(t, out)
		msg, _, err := sdkAccumulate(out)
		if err != nil || string(msg.Content[0].Input) != `{"x":1}` || string(msg.Content[1].Input) != `{"y":2}` {
			t.Errorf("msg %s err %v", msg.RawJSON(), err)
		}
		if strings.Contains(string(out), "late") || strings.Contains(string(out), "lost") {
			t.Errorf("stray fragments sent: %s", out)
		}
	})
	t.Run("tool_calls finish without calls is end_turn", func(t *testing.T) {
		out := encodeStream(opts, ir.StreamEvent{Kind: ir.StreamText, Text: `{"a":1}`}, ir.StreamEvent{Kind: ir.StreamFinish, Finish: ir.FinishToolCalls})
		msg, _, err := sdkAccumulate(out)
		if err != nil || msg.StopReason != "end_turn" {
			t.Errorf("stop %q err %v", msg.StopReason, err)
		}
	})
	t.Run("model falls back to the upstream's", func(t *testing.T) {
		out := encodeStream(ir.StreamOptions{}, ir.StreamEvent{Kind: ir.StreamStart, ID: "msg_x", Model: "up", Usage: ir.TokenUsage{Input: 5, CachedInput: 2}})
		msg, _, err := sdkAccumulate(out)
		if err != nil || msg.Model != "up" || msg.ID != "msg_x" || msg.Usage.InputTokens != 3 || msg.Usage.CacheReadInputTokens != 2 {
			t.Errorf("msg %s err %v", msg.RawJSON(), err)
		}
		if strings.Count(string(out), `"input_tokens"`) != 1 {
			t.Errorf("input restated though unchanged: %s", out)
		}
	})
}

// TestStreamAnthropicRoundTrip: an Anthropic stream decoded and encoded
// again gives the app the same message as the original.
func TestStreamAnthropicRoundTrip(t *testing.T) {
	for _, stream := range []string{textStream, toolStream} {
		want, _, err := sdkAccumulate([]byte(stream))
		if err != nil {
			t.Fatal(err)
		}
		out := encodeStream(ir.StreamOptions{Model: "claude-sonnet-4-5"}, decodeStream(t, stream)...)
		checkStreamFraming(t, out)
		got, _, err := sdkAccumulate(out)
		if err != nil {
			t.Fatal(err)
		}
		if got.ID != want.ID || got.StopReason != want.StopReason || got.Usage.InputTokens != want.Usage.InputTokens ||
			got.Usage.OutputTokens != want.Usage.OutputTokens || got.Usage.CacheReadInputTokens != want.Usage.CacheReadInputTokens || len(got.Content) != len(want.Content) {
			t.Fatalf("got %s\nwant %s", got.RawJSON(), want.RawJSON())
		}
		for i := range want.Content {
			g, w := got.Content[i], want.Content[i]
			if g.Type != w.Type || g.Text != w.Text || g.Thinking != w.Thinking || g.Signature != w.Signature || g.ID != w.ID || g.Name != w.Name || string(g.Input) != string(w.Input) {
				t.Errorf("block %d: got %s want %s", i, g.RawJSON(), w.RawJSON())
			}
		}
	}
}

// TestStreamEncoderAnySequence: whatever order of events a decoder of
// another vendor produces, the SDK accumulates the output without error,
// every tool input ends as JSON, and the stop reason says tool_use exactly
// when tool calls were sent (unless the answer was cut off or refused).
func TestStreamEncoderAnySequence(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	frags := []string{"", " ", `{"a":`, `1}`, "text", "\"q\"", "\n", "é\u2028"}
	for range 3000 {
		var evs []ir.StreamEvent
		tools, failed := 0, false
		var finish ir.FinishReason
		for range rng.IntN(12) {
			ev := ir.StreamEvent{Kind: ir.StreamEventKind(1 + rng.IntN(8)), Text: frags[rng.IntN(len(frags))]}
			switch ev.Kind {
			case ir.StreamToolStart:
				ev.Index, ev.ID, ev.Name = tools, "id "+string(rune('a'+tools)), "f"
				tools++
			case ir.StreamToolArgs:
				ev.Index = rng.IntN(tools + 1)
			case ir.StreamThinking:
				if rng.IntN(2) == 0 {
					ev.Signature = "sig"
				}
			case ir.StreamFinish:
				ev.Finish = []ir.FinishReason{ir.FinishStop, ir.FinishLength, ir.FinishToolCalls, ir.FinishContentFilter}[rng.IntN(4)]
				finish = ev.Finish
			case ir.StreamUsage:
				ev.Usage = ir.TokenUsage{Input: rng.Int64N(100), Output: rng.Int64N(100)}
			case ir.StreamError:
				if rng.IntN(3) != 0 {
					continue // keep most sequences error-free
				}
				ev.Err = &rewrite.AppError{Class: "overloaded"}
				failed = true
			}
			evs = append(evs, ev)
			if failed {
				break
			}
		}
		out := encodeStream(ir.StreamOptions{Model: "m"}, evs...)
		checkStreamFraming(t, out)
		msg, _, err := sdkAccumulate(out)
		if failed {
			if err == nil {
				t.Fatalf("error event not seen by the SDK: %s", out)
			}
			continue
		}
		if err != nil {
			t.Fatalf("events %s\nstream %s\nerr %v", jsonOf(evs), out, err)
		}
		sentTool := false
		for _, b := range msg.Content {
			if b.Type == "tool_use" {
				sentTool = true
				if !json.Valid(b.Input) {
					t.Errorf("tool input %q is not JSON", b.Input)
				}
			}
		}
		want := anthropic.StopReasonEndTurn
		switch {
		case finish == ir.FinishLength:
			want = anthropic.StopReasonMaxTokens
		case finish == ir.FinishContentFilter:
			want = anthropic.StopReasonRefusal
		case sentTool:
			want = anthropic.StopReasonToolUse
		}
		if msg.StopReason != want {
			t.Errorf("stop_reason %q, want %q", msg.StopReason, want)
		}
		if t.Failed() {
			t.Fatalf("events %s\nstream %s", jsonOf(evs), out)
		}
	}
}
