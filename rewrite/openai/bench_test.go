package openai

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/detour-proxy/detour/rewrite/ir"
	"github.com/detour-proxy/detour/rewrite/sse"
)

// chatBody10KB is a realistic chat.completions request of about 10 KB: a
// long system prompt, a developer prompt, three tools with schemas, ten
// turns, and a tool call with its result.
func chatBody10KB(tb testing.TB) []byte {
	tb.Helper()
	para := "The quick brown fox jumps over the lazy dog while the assistant explains, in plain words, what the user asked about. "
	msgs := []map[string]any{
		{"role": "system", "content": strings.Repeat(para, 28)},
		{"role": "developer", "content": "Answer briefly; use the tools when the question needs live data."},
	}
	for i := range 10 {
		msgs = append(msgs,
			map[string]any{"role": "user", "content": fmt.Sprintf("Question %d: %s", i, strings.Repeat(para, 2))},
			map[string]any{"role": "assistant", "content": fmt.Sprintf("Answer %d: %s", i, strings.Repeat(para, 2))},
		)
	}
	msgs = append(msgs,
		map[string]any{"role": "user", "content": "And the weather in Paris?"},
		map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{
			"id": "call_1", "type": "function",
			"function": map[string]any{"name": "get_weather", "arguments": `{"city":"Paris","units":"celsius"}`},
		}}},
		map[string]any{"role": "tool", "tool_call_id": "call_1", "content": `{"temp":18,"sky":"clear"}`},
	)
	schema := map[string]any{"type": "object", "properties": map[string]any{
		"city": map[string]any{"type": "string", "description": "City name"}, "units": map[string]any{"type": "string", "enum": []string{"celsius", "fahrenheit"}},
	}, "required": []string{"city"}}
	var tools []any
	for _, name := range []string{"get_weather", "get_time", "search"} {
		tools = append(tools, map[string]any{"type": "function", "function": map[string]any{
			"name": name, "description": "Looks up " + name, "parameters": schema,
		}})
	}
	body, err := json.Marshal(map[string]any{
		"model": "gpt-4o", "messages": msgs, "tools": tools, "tool_choice": "auto",
		"temperature": 0.3, "max_completion_tokens": 800, "stream": true,
		"stream_options": map[string]any{"include_usage": true},
	})
	if err != nil {
		tb.Fatal(err)
	}
	if len(body) < 9500 || len(body) > 11000 {
		tb.Fatalf("body is %d bytes; want about 10 KB", len(body))
	}
	return body
}

func BenchmarkDecodeRequest10KB(b *testing.B) {
	body := chatBody10KB(b)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeRequest(body); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodeRequest10KB(b *testing.B) {
	body := chatBody10KB(b)
	r, err := DecodeRequest(body)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := EncodeRequest(r, ir.EncodeOptions{Model: "gpt-4o-mini"}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStreamEncodeText measures one text event of a long stream: the
// app's chunk appended to a reused buffer.
func BenchmarkStreamEncodeText(b *testing.B) {
	e := NewStreamEncoder(ir.StreamOptions{Model: "gpt-4o", IncludeUsage: true, Created: testCreated})
	dst := e.Encode(nil, ir.StreamEvent{Kind: ir.StreamStart, ID: "msg_01AbCdEfGhIjKlMnOpQrStUv"})
	ev := ir.StreamEvent{Kind: ir.StreamText, Text: " token"}
	b.ReportAllocs()
	for b.Loop() {
		dst = e.Encode(dst[:0], ev)
	}
}

// BenchmarkStreamDecodeText measures one upstream text chunk decoded into
// IR events.
func BenchmarkStreamDecodeText(b *testing.B) {
	d := NewStreamDecoder()
	if _, err := d.Decode(sse.Event{Data: []byte(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1735689600,"model":"gpt-4o","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}],"usage":null}`)}); err != nil {
		b.Fatal(err)
	}
	ev := sse.Event{Data: []byte(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1735689600,"model":"gpt-4o","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"content":" token"},"logprobs":null,"finish_reason":null}],"usage":null}`)}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := d.Decode(ev); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStreamTranslateText is the OpenAI→OpenAI event path of a
// translator: decode one upstream chunk and encode it for the app.
func BenchmarkStreamTranslateText(b *testing.B) {
	d := NewStreamDecoder()
	e := NewStreamEncoder(ir.StreamOptions{Model: "gpt-4o", IncludeUsage: true, Created: testCreated})
	first := sse.Event{Data: []byte(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1735689600,"model":"gpt-4o","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}],"usage":null}`)}
	var dst []byte
	evs, _ := d.Decode(first)
	for _, x := range evs {
		dst = e.Encode(dst, x)
	}
	ev := sse.Event{Data: []byte(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1735689600,"model":"gpt-4o","choices":[{"index":0,"delta":{"content":" token"},"finish_reason":null}],"usage":null}`)}
	b.ReportAllocs()
	for b.Loop() {
		evs, err := d.Decode(ev)
		if err != nil {
			b.Fatal(err)
		}
		dst = dst[:0]
		for _, x := range evs {
			dst = e.Encode(dst, x)
		}
	}
}

func BenchmarkDecodeResponse(b *testing.B) {
	body := []byte(`{"id":"chatcmpl-abc","object":"chat.completion","created":1735689600,"model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"` +
		strings.Repeat("Hello there. ", 80) + `","refusal":null},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":19,"completion_tokens":10,"total_tokens":29}}`)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeResponse(body); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodeResponse(b *testing.B) {
	r := &ir.Response{ID: "msg_01", Created: testCreated, Finish: ir.FinishStop,
		Parts: []ir.Part{{Kind: ir.PartText, Text: strings.Repeat("Hello there. ", 80)}},
		Usage: ir.TokenUsage{Input: 19, Output: 10}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := EncodeResponse(r, "gpt-4o"); err != nil {
			b.Fatal(err)
		}
	}
}
