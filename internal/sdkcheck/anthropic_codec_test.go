package sdkcheck

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"
	"github.com/anthropics/anthropic-sdk-go/packages/ssestream"

	"github.com/detour-proxy/detour/internal/codectest"
	"github.com/detour-proxy/detour/rewrite"
	codec "github.com/detour-proxy/detour/rewrite/anthropic"
	"github.com/detour-proxy/detour/rewrite/ir"
	"github.com/detour-proxy/detour/rewrite/sse"
)

// These tests hold rewrite/anthropic's encoders and decoders to the
// official anthropic-sdk-go: what detour writes for an Anthropic app is what
// the SDK reads from Anthropic (docs/vendors.md#anthropic-sdk-go), and what
// the SDK sends decodes. The streams, events and stream checks are
// rewrite/anthropic's tests' own, shared through internal/codectest; the goldens and framing tests stay
// there (TestStreamEncoderGolden holds the encoder's output for the streams
// read here byte for byte).

// TestAnthropicCodecStreamEncoderSDK feeds the encoder's output through anthropic-sdk-go's
// stream decoder and Message.Accumulate and checks what the app ends with.
func TestAnthropicCodecStreamEncoderSDK(t *testing.T) {
	opts := ir.StreamOptions{Model: "claude-sonnet-4-5"}
	t.Run("text", func(t *testing.T) {
		stream := anthropicEncodeStream(opts, codectest.AnthropicTextEvents...)
		codectest.CheckAnthropicStreamFraming(t, stream)
		msg, _, err := anthropicSDKAccumulate(stream)
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
		stream := anthropicEncodeStream(opts, codectest.AnthropicToolEvents...)
		codectest.CheckAnthropicStreamFraming(t, stream)
		msg, _, err := anthropicSDKAccumulate(stream)
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
		stream := anthropicEncodeStream(opts, codectest.AnthropicParameterlessEvents...)
		codectest.CheckAnthropicStreamFraming(t, stream)
		msg, _, err := anthropicSDKAccumulate(stream)
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
		stream := anthropicEncodeStream(opts,
			ir.StreamEvent{Kind: ir.StreamThinking, Text: "Let me think."},
			ir.StreamEvent{Kind: ir.StreamThinking, Signature: "c2ln"},
			ir.StreamEvent{Kind: ir.StreamText, Text: "42"},
			ir.StreamEvent{Kind: ir.StreamFinish, Finish: ir.FinishLength},
		)
		codectest.CheckAnthropicStreamFraming(t, stream)
		msg, _, err := anthropicSDKAccumulate(stream)
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

// TestAnthropicCodecStreamThroughSDKClient serves the encoder's output to a real
// anthropic-sdk-go client, as detour serves an app: NewStreaming for the
// stream, New for the complete message.
func TestAnthropicCodecStreamThroughSDKClient(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Stream bool `json:"stream"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		if !req.Stream {
			body, err := codec.EncodeResponse(codectest.AnthropicToolResponse(), "claude-sonnet-4-5")
			if err != nil {
				t.Error(err)
			}
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(body)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		enc := codec.NewStreamEncoder(ir.StreamOptions{Model: "claude-sonnet-4-5"})
		var buf []byte
		for _, ev := range codectest.AnthropicToolEvents {
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
	checkAnthropicToolMessage(t, *msg)

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
	r, err := codec.DecodeRequest(body)
	if err != nil {
		t.Fatal(err)
	}
	if id := r.Messages[0].Parts[1].ToolCall.ID; id != "call:w/1" {
		t.Errorf("replayed id %q", id)
	}
}

func TestAnthropicCodecStreamEncoderEdges(t *testing.T) {
	opts := ir.StreamOptions{Model: "claude-sonnet-4-5"}
	t.Run("early end closes once", func(t *testing.T) {
		e := codec.NewStreamEncoder(opts)
		out := e.Encode(nil, ir.StreamEvent{Kind: ir.StreamToolStart, Index: 0, ID: "a", Name: "f"})
		out = e.Encode(out, ir.StreamEvent{Kind: ir.StreamToolArgs, Index: 0, Text: `{"x":1}`})
		out = e.Close(out)
		n := len(out)
		out = e.Close(out)
		out = e.Encode(out, ir.StreamEvent{Kind: ir.StreamText, Text: "late"})
		if len(out) != n {
			t.Errorf("output after Close: %s", out[n:])
		}
		codectest.CheckAnthropicStreamFraming(t, out)
		msg, _, err := anthropicSDKAccumulate(out)
		if err != nil || msg.StopReason != "tool_use" || string(msg.Content[0].Input) != `{"x":1}` {
			t.Errorf("msg %s err %v", msg.RawJSON(), err)
		}
	})
	t.Run("empty stream", func(t *testing.T) {
		out := codec.NewStreamEncoder(opts).Close(nil)
		codectest.CheckAnthropicStreamFraming(t, out)
		msg, _, err := anthropicSDKAccumulate(out)
		if err != nil || len(msg.Content) != 0 || msg.StopReason != "end_turn" {
			t.Errorf("msg %s err %v", msg.RawJSON(), err)
		}
	})
	t.Run("error mid-stream ends it", func(t *testing.T) {
		e := codec.NewStreamEncoder(opts)
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
		_, _, err := anthropicSDKAccumulate(out)
		if err == nil {
			t.Error("SDK saw no error")
		}
	})
	t.Run("arguments for a stopped or unknown call are dropped", func(t *testing.T) {
		out := anthropicEncodeStream(opts,
			ir.StreamEvent{Kind: ir.StreamToolStart, Index: 0, ID: "a", Name: "f"},
			ir.StreamEvent{Kind: ir.StreamToolArgs, Index: 0, Text: `{"x":1}`},
			ir.StreamEvent{Kind: ir.StreamToolStart, Index: 1, ID: "b", Name: "g"},
			ir.StreamEvent{Kind: ir.StreamToolArgs, Index: 0, Text: `{"late":1}`},
			ir.StreamEvent{Kind: ir.StreamToolArgs, Index: 1, Text: ` {"y":2}`},
			ir.StreamEvent{Kind: ir.StreamToolArgs, Index: 7, Text: `{"lost":true}`},
		)
		codectest.CheckAnthropicStreamFraming(t, out)
		msg, _, err := anthropicSDKAccumulate(out)
		if err != nil || string(msg.Content[0].Input) != `{"x":1}` || string(msg.Content[1].Input) != `{"y":2}` {
			t.Errorf("msg %s err %v", msg.RawJSON(), err)
		}
		if strings.Contains(string(out), "late") || strings.Contains(string(out), "lost") {
			t.Errorf("stray fragments sent: %s", out)
		}
	})
	t.Run("tool_calls finish without calls is end_turn", func(t *testing.T) {
		out := anthropicEncodeStream(opts, ir.StreamEvent{Kind: ir.StreamText, Text: `{"a":1}`}, ir.StreamEvent{Kind: ir.StreamFinish, Finish: ir.FinishToolCalls})
		msg, _, err := anthropicSDKAccumulate(out)
		if err != nil || msg.StopReason != "end_turn" {
			t.Errorf("stop %q err %v", msg.StopReason, err)
		}
	})
	t.Run("model falls back to the upstream's", func(t *testing.T) {
		out := anthropicEncodeStream(ir.StreamOptions{}, ir.StreamEvent{Kind: ir.StreamStart, ID: "msg_x", Model: "up", Usage: ir.TokenUsage{Input: 5, CachedInput: 2}})
		msg, _, err := anthropicSDKAccumulate(out)
		if err != nil || msg.Model != "up" || msg.ID != "msg_x" || msg.Usage.InputTokens != 3 || msg.Usage.CacheReadInputTokens != 2 {
			t.Errorf("msg %s err %v", msg.RawJSON(), err)
		}
		if strings.Count(string(out), `"input_tokens"`) != 1 {
			t.Errorf("input restated though unchanged: %s", out)
		}
	})
}

// TestAnthropicCodecStreamAnthropicRoundTrip: an Anthropic stream decoded and encoded
// again gives the app the same message as the original.
func TestAnthropicCodecStreamAnthropicRoundTrip(t *testing.T) {
	for _, stream := range []string{codectest.AnthropicTextStream, codectest.AnthropicToolStream} {
		want, _, err := anthropicSDKAccumulate([]byte(stream))
		if err != nil {
			t.Fatal(err)
		}
		out := anthropicEncodeStream(ir.StreamOptions{Model: "claude-sonnet-4-5"}, codectest.DecodeStream(t, codec.NewStreamDecoder(), stream)...)
		codectest.CheckAnthropicStreamFraming(t, out)
		got, _, err := anthropicSDKAccumulate(out)
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

// TestAnthropicCodecStreamEncoderAnySequence: whatever order of events a decoder of
// another vendor produces, the SDK accumulates the output without error,
// every tool input ends as JSON, and the stop reason says tool_use exactly
// when tool calls were sent (unless the answer was cut off or refused).
func TestAnthropicCodecStreamEncoderAnySequence(t *testing.T) {
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
		out := anthropicEncodeStream(ir.StreamOptions{Model: "m"}, evs...)
		codectest.CheckAnthropicStreamFraming(t, out)
		msg, _, err := anthropicSDKAccumulate(out)
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

// TestAnthropicCodecEncodeResponseSDK decodes EncodeResponse's output into the SDK's
// Message, as client.Messages.New does.
func TestAnthropicCodecEncodeResponseSDK(t *testing.T) {
	body, err := codec.EncodeResponse(codectest.AnthropicToolResponse(), "claude-sonnet-4-5")
	if err != nil {
		t.Fatal(err)
	}
	var msg anthropic.Message
	if err := json.Unmarshal(body, &msg); err != nil {
		t.Fatal(err)
	}
	checkAnthropicToolMessage(t, msg)
}

// checkAnthropicToolMessage asserts what the app's SDK sees of anthropicToolResponse.
func checkAnthropicToolMessage(t *testing.T, msg anthropic.Message) {
	t.Helper()
	if msg.ID != "msg_chatcmpl-123" || msg.Model != "claude-sonnet-4-5" || msg.Role != "assistant" || msg.Type != "message" {
		t.Errorf("envelope: id %q model %q role %q type %q", msg.ID, msg.Model, msg.Role, msg.Type)
	}
	if msg.StopReason != anthropic.StopReasonToolUse {
		t.Errorf("stop_reason %q, want tool_use", msg.StopReason)
	}
	if u := msg.Usage; u.InputTokens != 200 || u.CacheReadInputTokens != 1000 || u.OutputTokens != 40 {
		t.Errorf("usage %+v", u)
	}
	if len(msg.Content) != 4 {
		t.Fatalf("content: %s", msg.RawJSON())
	}
	if th := msg.Content[0].AsThinking(); th.Thinking != "The user wants weather." {
		t.Errorf("thinking %+v", th)
	}
	if txt := msg.Content[1].AsText(); txt.Text != "Let me check <both> & more." {
		t.Errorf("text %q", txt.Text)
	}
	calls := []anthropic.ToolUseBlock{msg.Content[2].AsToolUse(), msg.Content[3].AsToolUse()}
	var args map[string]any
	if err := json.Unmarshal(calls[0].Input, &args); err != nil || args["city"] != "Paris" || calls[0].Name != "get_weather" {
		t.Errorf("call 0: %+v %v", calls[0], err)
	}
	if ir.OriginalToolID(calls[0].ID) != "call:a/1" || !codectest.AnthropicID(calls[0].ID) {
		t.Errorf("call 0 id %q", calls[0].ID)
	}
	if string(calls[1].Input) != "{}" || calls[1].Name != "get_time" || calls[1].ID != "call_b" {
		t.Errorf("call 1: %+v", calls[1])
	}
}

func TestAnthropicCodecEncodeResponseIDs(t *testing.T) {
	for in, want := range map[string]string{"msg_x": "msg_x", "chatcmpl-9": "msg_chatcmpl-9"} {
		body, _ := codec.EncodeResponse(&ir.Response{ID: in}, "m")
		var m anthropic.Message
		if err := json.Unmarshal(body, &m); err != nil || m.ID != want {
			t.Errorf("id %q: got %q (%v)", in, m.ID, err)
		}
	}
	a, _ := codec.EncodeResponse(&ir.Response{}, "m")
	b, _ := codec.EncodeResponse(&ir.Response{}, "m")
	var ma, mb anthropic.Message
	_ = json.Unmarshal(a, &ma)
	_ = json.Unmarshal(b, &mb)
	if !strings.HasPrefix(ma.ID, "msg_") || len(ma.ID) < 10 || ma.ID == mb.ID {
		t.Errorf("generated ids %q, %q", ma.ID, mb.ID)
	}
	if ma.StopReason != "end_turn" || ma.Content == nil {
		t.Errorf("empty response: %s", a)
	}
}

// jsonOf renders v for failure messages.
func jsonOf(v any) string {
	b, _ := json.MarshalIndent(v, "", "  ")
	return string(b)
}

// TestAnthropicCodecDecodeRequestFromSDK decodes what anthropic-sdk-go sends for a request
// built with its own types: the bytes an Anthropic app puts on the wire.
func TestAnthropicCodecDecodeRequestFromSDK(t *testing.T) {
	params := anthropic.MessageNewParams{
		Model:         "claude-sonnet-4-5",
		MaxTokens:     512,
		System:        []anthropic.TextBlockParam{{Text: "Be terse."}, {Text: "Use metric."}},
		Temperature:   anthropic.Float(0.3),
		StopSequences: []string{"END"},
		Metadata:      anthropic.MetadataParam{UserID: anthropic.String("u-9")},
		Tools: []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{
			Name:        "get_weather",
			Description: anthropic.String("Weather"),
			InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"city": map[string]any{"type": "string"}}, Required: []string{"city"}},
		}}},
		ToolChoice: anthropic.ToolChoiceUnionParam{OfAny: &anthropic.ToolChoiceAnyParam{DisableParallelToolUse: anthropic.Bool(true)}},
		Messages: []anthropic.MessageParam{
			anthropic.NewUserMessage(anthropic.NewTextBlock("Weather in Paris?"), anthropic.NewImageBlockBase64("image/png", "iVBO")),
			anthropic.NewAssistantMessage(anthropic.NewToolUseBlock("toolu_01", map[string]any{"city": "Paris"}, "get_weather")),
			anthropic.NewUserMessage(anthropic.NewToolResultBlock("toolu_01", "18C", false)),
		},
	}
	body, err := json.Marshal(params)
	if err != nil {
		t.Fatal(err)
	}
	r, err := codec.DecodeRequest(body)
	if err != nil {
		t.Fatalf("%v\n%s", err, body)
	}
	if !slices.Equal(r.System, []string{"Be terse.", "Use metric."}) || r.MaxTokens != 512 || *r.Temperature != 0.3 || r.User != "u-9" {
		t.Errorf("fields: %s", jsonOf(r))
	}
	if r.ToolChoice.Mode != ir.ToolChoiceRequired || r.ParallelToolCalls == nil || *r.ParallelToolCalls {
		t.Errorf("tool choice %+v parallel %v", r.ToolChoice, r.ParallelToolCalls)
	}
	if len(r.Tools) != 1 || !strings.Contains(string(r.Tools[0].Parameters), `"city"`) {
		t.Errorf("tools %s", jsonOf(r.Tools))
	}
	if len(r.Messages) != 3 {
		t.Fatalf("messages %s", jsonOf(r.Messages))
	}
	img := r.Messages[0].Parts[1]
	call := r.Messages[1].Parts[0].ToolCall
	res := r.Messages[2].Parts[0].ToolResult
	if img.Media.MediaType != "image/png" || call.ID != "toolu_01" || string(call.Arguments) != `{"city":"Paris"}` || res.CallID != "toolu_01" || res.Content != "18C" {
		t.Errorf("parts %s", jsonOf(r.Messages))
	}
}

// FuzzAnthropicCodecDecodeResponse: DecodeResponse never panics; what it accepts,
// EncodeResponse writes as a message anthropic-sdk-go decodes, with every
// tool input an object.
func FuzzAnthropicCodecDecodeResponse(f *testing.F) {
	for _, s := range []string{
		`{"id":"msg_01","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"Hi!"}],"stop_reason":"end_turn","usage":{"input_tokens":9,"output_tokens":2}}`,
		`{"id":"x","content":[{"type":"thinking","thinking":"t","signature":"s"},{"type":"redacted_thinking","data":"d"},{"type":"tool_use","id":"dtr_YQ","name":"f","input":[1]}],"stop_reason":"refusal","usage":{"input_tokens":1,"cache_read_input_tokens":5}}`,
		`{"type":"error","error":{"type":"api_error","message":"boom"}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := codec.DecodeResponse(body)
		if err != nil {
			return
		}
		out, err := codec.EncodeResponse(r, "claude-x")
		if err != nil {
			t.Fatalf("EncodeResponse: %v", err)
		}
		var msg anthropic.Message
		if err := json.Unmarshal(out, &msg); err != nil {
			t.Fatalf("SDK cannot decode %s: %v", out, err)
		}
		for _, b := range msg.Content {
			if b.Type == "tool_use" && !isJSONObject(b.Input) {
				t.Fatalf("tool input %s", b.Input)
			}
		}
		if _, err := codec.DecodeResponse(out); err != nil {
			t.Fatalf("own output not decodable: %v", err)
		}
	})
}

// FuzzAnthropicCodecStreamDecoder: the decoder never panics on any byte stream, and
// whatever events it produces, re-encoded, are a stream anthropic-sdk-go
// accumulates without error.
func FuzzAnthropicCodecStreamDecoder(f *testing.F) {
	f.Add([]byte(codectest.AnthropicTextStream))
	f.Add([]byte(codectest.AnthropicToolStream))
	f.Add([]byte("event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n"))
	f.Add([]byte("data: {\"type\":\"content_block_start\",\"index\":3,\"content_block\":{\"type\":\"tool_use\",\"id\":\"a\",\"name\":\"f\"}}\n\ndata: {\"type\":\"content_block_delta\",\"index\":3,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\" \"}}\n\n"))
	f.Fuzz(func(t *testing.T, stream []byte) {
		r := sse.NewReader(bytes.NewReader(stream))
		d := codec.NewStreamDecoder()
		e := codec.NewStreamEncoder(ir.StreamOptions{Model: "m"})
		var out []byte
		failed := false
		for {
			ev, err := r.Next()
			if err != nil {
				if !errors.Is(err, io.EOF) && !errors.Is(err, sse.ErrEventTooLarge) {
					t.Fatalf("sse: %v", err)
				}
				break
			}
			evs, err := d.Decode(ev)
			if err != nil {
				continue // the translator ends the stream; here, go on
			}
			for _, x := range evs {
				failed = failed || x.Kind == ir.StreamError
				out = e.Encode(out, x)
			}
		}
		out = e.Close(out)
		if _, _, err := anthropicSDKAccumulate(out); err != nil && !failed {
			t.Fatalf("SDK rejects the re-encoded stream: %v\n%s", err, out)
		}
	})
}

// anthropicEncodeStream runs events through a StreamEncoder and closes it.
func anthropicEncodeStream(o ir.StreamOptions, events ...ir.StreamEvent) []byte {
	e := codec.NewStreamEncoder(o)
	var out []byte
	for _, ev := range events {
		out = e.Encode(out, ev)
	}
	return e.Close(out)
}

// anthropicSDKAccumulate reads stream as anthropic-sdk-go reads a response body —
// its SSE decoder dispatching on `event:` names, each data line
// json.Unmarshal'ed into a MessageStreamEventUnion — and accumulates the
// events with Message.Accumulate, as an app does.
func anthropicSDKAccumulate(stream []byte) (anthropic.Message, int, error) {
	res := &http.Response{
		StatusCode: http.StatusOK,
		Header:     http.Header{"Content-Type": {"text/event-stream"}},
		Body:       io.NopCloser(bytes.NewReader(stream)),
	}
	s := ssestream.NewStream[anthropic.MessageStreamEventUnion](ssestream.NewDecoder(res), nil)
	defer s.Close()
	var msg anthropic.Message
	n := 0
	for s.Next() {
		n++
		if err := msg.Accumulate(s.Current()); err != nil {
			return msg, n, err
		}
	}
	return msg, n, s.Err()
}

// isJSONObject reports whether v is a JSON object.
func isJSONObject(v json.RawMessage) bool {
	t := bytes.TrimSpace(v)
	return len(t) >= 2 && t[0] == '{' && json.Valid(t)
}
