package rewrite

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/detour-proxy/detour/rewrite/sse"
)

// The byte-exact vendor streams (docs/vendors.md#streams and its error sections) live
// with the SSE reader's tests.
const inspectStreamDir = "sse/testdata/"

func inspectReadStream(t testing.TB, name string) []sse.Event {
	t.Helper()
	in, err := os.ReadFile(inspectStreamDir + name)
	if err != nil {
		t.Fatal(err)
	}
	return inspectReadEvents(t, string(in))
}

func inspectReadEvents(t testing.TB, in string) []sse.Event {
	t.Helper()
	r := sse.NewReader(strings.NewReader(in))
	var evs []sse.Event
	for {
		ev, err := r.Next()
		if err == io.EOF {
			return evs
		}
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev.Clone())
	}
}

func TestInspectEventVendorStreams(t *testing.T) {
	const M, C, E, D = EventMeta, EventContent, EventError, EventDone
	tests := []struct {
		file  string
		shape Shape
		want  []EventKind
	}{
		// role chunk with content "" → meta; "Hi!" → content; finish_reason;
		// usage chunk; [DONE].
		{"openai_text.sse", OpenAI, []EventKind{M, C, C, C, D}},
		// role chunk with content null and the tool call's name → content.
		{"openai_tool.sse", OpenAI, []EventKind{C, C, C, C, D}},
		{"openai_error.sse", OpenAI, []EventKind{M, E}},
		// ": OPENROUTER PROCESSING", then error with finish_reason "error".
		{"openrouter_error.sse", OpenAI, []EventKind{M, E}},
		// message_start, empty text block, ping → meta; then content.
		{"anthropic_text.sse", Anthropic, []EventKind{M, M, M, C, C, C, D}},
		{"anthropic_tool.sse", Anthropic, []EventKind{M, C, C, C, C, C, D}},
		// overloaded right after the 200: the case the commit point exists for.
		{"anthropic_overloaded.sse", Anthropic, []EventKind{M, E}},
		{"gemini_text.sse", Gemini, []EventKind{C, C}},
		{"gemini_tool.sse", Gemini, []EventKind{C}},
		{"gemini_error.sse", Gemini, []EventKind{E}},
		{"gemini_bare_error.sse", Gemini, []EventKind{E}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			evs := inspectReadStream(t, tt.file)
			if len(evs) != len(tt.want) {
				t.Fatalf("%d events; want %d", len(evs), len(tt.want))
			}
			for i, ev := range evs {
				if got := InspectEvent(tt.shape, ev); got != tt.want[i] {
					t.Errorf("event %d %q: got %v; want %v", i, ev.Raw, got, tt.want[i])
				}
			}
		})
	}
}

func TestInspectEventRules(t *testing.T) {
	const M, C, E, D = EventMeta, EventContent, EventError, EventDone
	tests := []struct {
		desc  string
		shape Shape
		in    string // one SSE event
		want  EventKind
	}{
		{"comment", OpenAI, ": keep-alive\n\n", M},
		{"stray blank line", OpenAI, "\n", M},
		{"empty data", OpenAI, "data:\n\n", M},
		{"done with spaces", OpenAI, "data:  [DONE] \n\n", D},
		{"role only, content null", OpenAI, `data: {"choices":[{"index":0,"delta":{"role":"assistant","content":null},"finish_reason":null}]}` + "\n\n", M},
		{"role only, no content", OpenAI, `data: {"choices":[{"index":0,"delta":{"role":"assistant"},"finish_reason":null}],"usage":null}` + "\n\n", M},
		{"empty choices, usage null", OpenAI, `data: {"choices":[],"usage":null}` + "\n\n", M},
		{"empty tool_calls", OpenAI, `data: {"choices":[{"delta":{"role":"assistant","tool_calls":[]}}]}` + "\n\n", M},
		{"content", OpenAI, `data: {"choices":[{"delta":{"content":"x"}}]}` + "\n\n", C},
		{"content with spaces", OpenAI, `data: { "choices" : [ { "delta" : { "content" : " " } } ] }` + "\n\n", C},
		{"refusal", OpenAI, `data: {"choices":[{"delta":{"content":null,"refusal":"I can't"}}]}` + "\n\n", C},
		{"reasoning_content", OpenAI, `data: {"choices":[{"delta":{"content":"","reasoning_content":"Hmm"}}]}` + "\n\n", C},
		{"reasoning (OpenRouter)", OpenAI, `data: {"choices":[{"delta":{"content":"","reasoning":"Hmm"}}]}` + "\n\n", C},
		{"tool_calls", OpenAI, `data: {"choices":[{"delta":{"tool_calls":[{"index":0,"id":"call_1"}]}}]}` + "\n\n", C},
		{"finish_reason on second choice", OpenAI, `data: {"choices":[{"index":0,"delta":{}},{"index":1,"delta":{},"finish_reason":"length"}]}` + "\n\n", C},
		{"usage", OpenAI, `data: {"choices":[],"usage":{"prompt_tokens":1}}` + "\n\n", C},
		{"top-level error", OpenAI, `data: {"error":{"message":"boom","type":"server_error"}}` + "\n\n", E},
		{"error with event name", OpenAI, "event: error\n" + `data: {"error":{"message":"boom"}}` + "\n\n", E},
		{"error null is no error", OpenAI, `data: {"error":null,"choices":[{"delta":{"content":"x"}}]}` + "\n\n", C},
		{"the word error in content", OpenAI, `data: {"choices":[{"delta":{"content":"\"error\": none"}}]}` + "\n\n", C},
		{"error despite odd choices", OpenAI, `data: {"choices":"x","error":{"message":"boom"}}` + "\n\n", E},
		{"garbage", OpenAI, "data: <html>502 Bad Gateway</html>\n\n", C},
		{"no choices: not a chunk", OpenAI, `data: {"id":"chatcmpl-1","object":"chat.completion.chunk"}` + "\n\n", C},
		{"Responses API event", OpenAI, "event: response.created\n" + `data: {"type":"response.created","response":{"id":"resp_1"}}` + "\n\n", C},
		{"choices not an array", OpenAI, `data: {"choices":{}}` + "\n\n", C},
		{"escaped keys", OpenAI, `data: {"ch\u006fices":[{"delta":{"r\u006fle":"assistant","c\u006fntent":""}}]}` + "\n\n", M},
		{"truncated JSON", OpenAI, `data: {"choices":[{"delta":` + "\n\n", C},
		{"not an object", OpenAI, "data: 42\n\n", C},

		{"message_start", Anthropic, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{}}\n\n", M},
		{"ping", Anthropic, "event: ping\ndata: {\"type\": \"ping\"}\n\n", M},
		{"ping without data", Anthropic, "event: ping\n\n", M},
		{"empty text block", Anthropic, "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n", M},
		{"text block with text", Anthropic, "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"Hi\"}}\n\n", C},
		{"thinking block", Anthropic, "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"thinking\",\"thinking\":\"\"}}\n\n", C},
		{"server tool block", Anthropic, "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"server_tool_use\",\"id\":\"srvtoolu_1\",\"name\":\"web_search\",\"input\":{}}}\n\n", C},
		{"content_block_stop", Anthropic, "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n", C},
		{"message_delta", Anthropic, "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":0}}\n\n", C},
		{"message_stop", Anthropic, "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n", D},
		{"error", Anthropic, "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n", E},
		{"CRLF error", Anthropic, "event: error\r\ndata: {\"type\":\"error\",\"error\":{\"type\":\"api_error\",\"message\":\"Internal\"}}\r\n\r\n", E},
		{"nameless message_start", Anthropic, "data: {\"type\":\"message_start\",\"message\":{}}\n\n", M},
		{"nameless empty text block", Anthropic, "data: {\"type\":\"content_block_start\",\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n", M},
		{"nameless delta", Anthropic, "data: {\"type\":\"content_block_delta\",\"delta\":{\"type\":\"text_delta\",\"text\":\"x\"}}\n\n", C},
		{"nameless error", Anthropic, "data: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\"}}\n\n", E},
		{"nameless OpenAI-style error", Anthropic, "data: {\"error\":{\"message\":\"boom\"}}\n\n", E},
		{"nameless escaped type", Anthropic, "data: {\"type\":\"message\\u005fstart\",\"message\":{}}\n\n", M},
		{"nameless message_stop", Anthropic, "data: {\"type\":\"message_stop\"}\n\n", D},
		{"unknown name", Anthropic, "event: message_progress\ndata: {\"type\":\"message_progress\"}\n\n", C},
		{"unknown name, error type", Anthropic, "event: oops\ndata: {\"type\":\"error\",\"error\":{}}\n\n", E},
		{"garbage", Anthropic, "event: content_block_start\ndata: nope\n\n", C},
		{"comment", Anthropic, ": hi\n\n", M},

		{"usage only", Gemini, `data: {"usageMetadata":{"promptTokenCount":9},"modelVersion":"gemini-2.5-flash"}` + "\n\n", M},
		{"empty candidate", Gemini, `data: {"candidates":[{"content":{"role":"model"},"index":0}]}` + "\n\n", M},
		{"empty parts", Gemini, `data: {"candidates":[{"content":{"role":"model","parts":[]}}]}` + "\n\n", M},
		{"finish only", Gemini, `data: {"candidates":[{"content":{"role":"model"},"finishReason":"MAX_TOKENS"}]}` + "\n\n", C},
		{"blocked prompt", Gemini, `data: {"promptFeedback":{"blockReason":"SAFETY"},"usageMetadata":{"promptTokenCount":9}}` + "\n\n", C},
		{"thought part", Gemini, `data: {"candidates":[{"content":{"role":"model","parts":[{"text":"**Plan**","thought":true}]}}]}` + "\n\n", C},
		{"error chunk", Gemini, `data: {"error":{"code":429,"message":"Resource exhausted","status":"RESOURCE_EXHAUSTED"}}` + "\n\n", E},
		{"bare error line", Gemini, `{"error":{"code":500,"message":"Internal","status":"INTERNAL"}}` + "\n\n", E},
		{"array-wrapped error", Gemini, `data: [{"error":{"code":503,"status":"UNAVAILABLE"}}]` + "\n\n", E},
		{"bare array-wrapped error", Gemini, `[{"error":{"code":503,"status":"UNAVAILABLE"}}]` + "\n", E},
		{"array without error", Gemini, `data: [{"candidates":[]}]` + "\n\n", C},
		{"garbage", Gemini, "data: [DONE]\n\n", C},
		{"unknown object", Gemini, `data: {"foo":1}` + "\n\n", C},
		{"empty object", Gemini, "data: {}\n\n", C},

		{"unknown shape", Shape("cohere"), "data: {}\n\n", C},
	}
	for _, tt := range tests {
		t.Run(string(tt.shape)+"/"+tt.desc, func(t *testing.T) {
			evs := inspectReadEvents(t, tt.in)
			if len(evs) != 1 {
				t.Fatalf("test input has %d events", len(evs))
			}
			if got := InspectEvent(tt.shape, evs[0]); got != tt.want {
				t.Errorf("InspectEvent(%s, %q) = %v; want %v", tt.shape, tt.in, got, tt.want)
			}
		})
	}
}

func TestEventKindString(t *testing.T) {
	const M, C, E, D = EventMeta, EventContent, EventError, EventDone
	for k, want := range map[EventKind]string{M: "meta", C: "content", E: "error", D: "done", 9: "EventKind(?)"} {
		if got := k.String(); got != want {
			t.Errorf("%d.String() = %q; want %q", int(k), got, want)
		}
	}
}

func TestExtractUsage(t *testing.T) {
	tests := []struct {
		desc   string
		shape  Shape
		data   string
		want   Usage
		wantOK bool
	}{
		{"openai usage chunk", OpenAI, `{"id":"chatcmpl-1","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":2,"total_tokens":11}}`, Usage{9, 2}, true},
		{"openai usage null", OpenAI, `{"choices":[{"delta":{"content":"x"}}],"usage":null}`, Usage{}, false},
		{"openai usage null with spaces", OpenAI, `{"usage": null}`, Usage{}, false},
		{"openai no usage", OpenAI, `{"choices":[{"delta":{"content":"usage"}}]}`, Usage{}, false},
		{"openai non-stream body", OpenAI, `{"id":"chatcmpl-1","object":"chat.completion","choices":[{"message":{"role":"assistant","content":"Hi"}}],"usage":{"prompt_tokens":12,"completion_tokens":3,"total_tokens":15,"prompt_tokens_details":{"cached_tokens":4}}}`, Usage{12, 3}, true},
		{"openai usage after a null one", OpenAI, `{"a":{"usage":null},"usage":{"prompt_tokens":1,"completion_tokens":1}}`, Usage{1, 1}, true},
		{"openai usage spaced", OpenAI, `{"usage" : {"prompt_tokens":1,"completion_tokens":2}}`, Usage{1, 2}, true},
		{"openai done", OpenAI, `[DONE]`, Usage{}, false},
		{"openai garbage", OpenAI, `"usage":{`, Usage{}, false},

		{"anthropic message_start", Anthropic, `{"type":"message_start","message":{"id":"msg_01","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":9,"cache_creation_input_tokens":100,"cache_read_input_tokens":1000,"output_tokens":1}}}`, Usage{1109, 1}, true},
		{"anthropic message_delta", Anthropic, `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":15}}`, Usage{0, 15}, true},
		{"anthropic content delta", Anthropic, `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"usage"}}`, Usage{}, false},
		{"anthropic non-stream message", Anthropic, `{"id":"msg_01","type":"message","role":"assistant","content":[{"type":"tool_use","id":"t","name":"n","input":{"usage":{"input_tokens":999}}}],"stop_reason":"tool_use","usage":{"input_tokens":20,"cache_read_input_tokens":5,"output_tokens":7}}`, Usage{25, 7}, true},

		{"gemini chunk", Gemini, `{"candidates":[{"content":{"role":"model","parts":[{"text":"!"}]},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":9,"candidatesTokenCount":2,"totalTokenCount":11},"modelVersion":"gemini-2.5-flash","responseId":"r1"}`, Usage{9, 2}, true},
		{"gemini thoughts", Gemini, `{"usageMetadata":{"promptTokenCount":9,"candidatesTokenCount":2,"thoughtsTokenCount":30,"totalTokenCount":41}}`, Usage{9, 32}, true},
		{"gemini no usage", Gemini, `{"candidates":[]}`, Usage{}, false},

		{"unknown shape", Shape("x"), `{"usage":{}}`, Usage{}, false},
	}
	for _, tt := range tests {
		t.Run(string(tt.shape)+"/"+tt.desc, func(t *testing.T) {
			got, ok := ExtractUsage(tt.shape, []byte(tt.data))
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("ExtractUsage = %+v, %v; want %+v, %v", got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

// TestUsageMergedOverStreams runs the merge a proxy does, event by event,
// over the vendor streams.
func TestUsageMergedOverStreams(t *testing.T) {
	tests := []struct {
		file  string
		shape Shape
		want  Usage
	}{
		{"openai_text.sse", OpenAI, Usage{9, 2}},
		{"openai_tool.sse", OpenAI, Usage{}},
		{"anthropic_text.sse", Anthropic, Usage{9, 2}},
		{"anthropic_tool.sse", Anthropic, Usage{9, 15}},
		{"gemini_text.sse", Gemini, Usage{9, 2}},
		{"gemini_tool.sse", Gemini, Usage{20, 5}},
	}
	for _, tt := range tests {
		var u Usage
		for _, ev := range inspectReadStream(t, tt.file) {
			if got, ok := ExtractUsage(tt.shape, ev.Data); ok {
				u = u.Merge(got)
			}
		}
		if u != tt.want {
			t.Errorf("%s: merged usage %+v; want %+v", tt.file, u, tt.want)
		}
	}
}

func TestExtractUsageSkipsDecodingMostEvents(t *testing.T) {
	// The byte pre-check, not a decode, must reject the events that make up
	// nearly all of a stream: no allocation proves no decode happened.
	for _, tt := range []struct {
		shape Shape
		data  string
	}{
		{OpenAI, `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1735689600,"model":"gpt-4o","choices":[{"index":0,"delta":{"content":"Hi!"},"finish_reason":null}],"usage":null}`},
		{Anthropic, `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi!"}}`},
	} {
		data := []byte(tt.data)
		if n := testing.AllocsPerRun(100, func() { ExtractUsage(tt.shape, data) }); n != 0 {
			t.Errorf("%s: %v allocations", tt.shape, n)
		}
	}
}

func BenchmarkInspectEvent(b *testing.B) {
	for _, bb := range []struct {
		name  string
		shape Shape
		file  string
		event int
	}{
		{"OpenAI/role", OpenAI, "openai_text.sse", 0},
		{"OpenAI/content", OpenAI, "openai_text.sse", 1},
		{"OpenAI/error", OpenAI, "openai_error.sse", 1},
		{"Anthropic/message_start", Anthropic, "anthropic_text.sse", 0},
		{"Anthropic/content_block_start", Anthropic, "anthropic_text.sse", 1},
		{"Anthropic/content_block_delta", Anthropic, "anthropic_text.sse", 3},
		{"Anthropic/error", Anthropic, "anthropic_overloaded.sse", 1},
		{"Gemini/content", Gemini, "gemini_text.sse", 0},
		{"Gemini/error", Gemini, "gemini_error.sse", 0},
	} {
		ev := inspectReadStream(b, bb.file)[bb.event]
		b.Run(bb.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				InspectEvent(bb.shape, ev)
			}
		})
	}
}

func BenchmarkExtractUsage(b *testing.B) {
	for _, bb := range []struct {
		name  string
		shape Shape
		file  string
		event int
	}{
		{"OpenAI/usage-null", OpenAI, "openai_text.sse", 1},
		{"OpenAI/usage", OpenAI, "openai_text.sse", 3},
		{"Anthropic/delta", Anthropic, "anthropic_text.sse", 3},
		{"Anthropic/message_start", Anthropic, "anthropic_text.sse", 0},
		{"Gemini/chunk", Gemini, "gemini_text.sse", 1},
	} {
		data := bytes.Clone(inspectReadStream(b, bb.file)[bb.event].Data)
		b.Run(bb.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				ExtractUsage(bb.shape, data)
			}
		})
	}
}

func FuzzInspectEvent(f *testing.F) {
	for _, name := range []string{"openai_text.sse", "openai_error.sse", "openrouter_error.sse", "anthropic_text.sse", "anthropic_overloaded.sse", "gemini_text.sse", "gemini_bare_error.sse"} {
		for _, ev := range inspectReadStream(f, name) {
			f.Add(ev.Name, ev.Data)
		}
	}
	f.Add("", []byte(`{"usage":null,"usage":{"prompt_tokens":1}}`))
	f.Add("", []byte(`[{"error":{}}]`))
	f.Fuzz(func(t *testing.T, name string, data []byte) {
		trimmed := bytes.TrimSpace(data)
		for _, shape := range Shapes {
			kind := InspectEvent(shape, sse.Event{Name: name, Data: data})
			if kind < EventMeta || kind > EventDone {
				t.Fatalf("InspectEvent(%s, %q, %q) = %d", shape, name, data, kind)
			}
			// What detour cannot read must never be held (see InspectEvent),
			// unless an Anthropic event name decides without the data.
			_, _, named := anthropicEventKind(name)
			if kind == EventMeta && len(trimmed) > 0 && !json.Valid(trimmed) && !(shape == Anthropic && named) {
				t.Fatalf("InspectEvent(%s, %q, %q) holds unreadable data", shape, name, data)
			}
			// The byte pre-check must not hide any usage the walk finds.
			u1, ok1 := ExtractUsage(shape, data)
			u2, ok2 := extractUsage(shape, data)
			if u1 != u2 || ok1 != ok2 {
				t.Fatalf("ExtractUsage(%s, %q) = %+v, %v; without pre-check %+v, %v", shape, data, u1, ok1, u2, ok2)
			}
			if ok2 && !json.Valid(data) {
				t.Fatalf("ExtractUsage(%s, %q) read invalid JSON", shape, data)
			}
		}
	})
}
