package gemini

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/detour-proxy/detour/rewrite/ir"
	"github.com/detour-proxy/detour/rewrite/sse"
)

// chatRequest10KB is a tool-using conversation of about 10 KB, the size
// the issue measures translation cost at.
func chatRequest10KB() *ir.Request {
	r := &ir.Request{
		Model:  "gpt-4o",
		System: []string{"You are a helpful assistant. Answer concisely and cite your sources."},
		Tools: []ir.Tool{{
			Name: "search", Description: "Search the web",
			Parameters: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string","description":"query"},"n":{"type":["integer","null"],"minimum":1}},"required":["q"],"additionalProperties":false}`),
		}},
		MaxTokens: 1024, Temperature: ptr(0.7),
	}
	para := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 10)
	for i := 0; len(r.Messages) < 22; i++ {
		r.Messages = append(r.Messages,
			ir.Message{Role: ir.RoleUser, Parts: []ir.Part{{Kind: ir.PartText, Text: para}}},
			ir.Message{Role: ir.RoleAssistant, Parts: []ir.Part{
				{Kind: ir.PartText, Text: para[:200]},
				{Kind: ir.PartToolCall, ToolCall: &ir.ToolCall{ID: fmt.Sprintf("call_%d", i), Name: "search", Arguments: json.RawMessage(`{"q":"fox"}`)}},
			}},
			ir.Message{Role: ir.RoleTool, Parts: []ir.Part{{Kind: ir.PartToolResult, ToolResult: &ir.ToolResult{CallID: fmt.Sprintf("call_%d", i), Content: para[:150]}}}},
		)
	}
	return r
}

func BenchmarkEncodeRequest10KB(b *testing.B) {
	r := chatRequest10KB()
	body, _ := EncodeRequest(r, ir.EncodeOptions{})
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := EncodeRequest(r, ir.EncodeOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeRequest10KB(b *testing.B) {
	body, _ := EncodeRequest(chatRequest10KB(), ir.EncodeOptions{})
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeRequest(body, "gemini-2.5-flash", false); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStreamEncodeText is the cost per text event of the Gemini
// stream encoder, writing into a reused buffer as the translator does.
func BenchmarkStreamEncodeText(b *testing.B) {
	e := NewStreamEncoder(ir.StreamOptions{Model: "gemini-2.5-flash"})
	buf := e.Encode(nil, ir.StreamEvent{Kind: ir.StreamStart, ID: "chatcmpl-123"})
	ev := ir.StreamEvent{Kind: ir.StreamText, Text: "Hello, this is a token or two. "}
	b.ReportAllocs()
	for b.Loop() {
		buf = e.Encode(buf[:0], ev)
	}
}

// BenchmarkStreamDecodeText is the cost per event of decoding a typical
// Gemini text chunk.
func BenchmarkStreamDecodeText(b *testing.B) {
	ev := sse.Event{Data: []byte(`{"candidates":[{"content":{"role":"model","parts":[{"text":"Hello, this is a token or two. "}]},"index":0}],"usageMetadata":{"promptTokenCount":9,"totalTokenCount":9},"modelVersion":"gemini-2.5-flash","responseId":"r1"}`)}
	d := NewStreamDecoder()
	_, _ = d.Decode(ev)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := d.Decode(ev); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStreamGeminiToGemini200 decodes and re-encodes a 200-event
// Gemini stream, reporting the cost per event.
func BenchmarkStreamGeminiToGemini200(b *testing.B) {
	var stream strings.Builder
	for i := range 200 {
		finish := ""
		if i == 199 {
			finish = `,"finishReason":"STOP"`
		}
		fmt.Fprintf(&stream, `data: {"candidates":[{"content":{"role":"model","parts":[{"text":"tok%d "}]}%s,"index":0}],"usageMetadata":{"promptTokenCount":9,"totalTokenCount":9},"modelVersion":"gemini-2.5-flash","responseId":"r1"}`+"\n\n", i, finish)
	}
	src := stream.String()
	rd := sse.NewReader(nil)
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		rd.Reset(strings.NewReader(src))
		d, e := NewStreamDecoder(), NewStreamEncoder(ir.StreamOptions{Model: "gemini-2.5-flash"})
		for {
			ev, err := rd.Next()
			if err != nil {
				break
			}
			evs, _ := d.Decode(ev)
			for _, se := range evs {
				buf = e.Encode(buf[:0], se)
			}
		}
		buf = e.Close(buf[:0])
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/200, "ns/event")
}
