package anthropic

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/detour-proxy/detour/internal/codectest"
	"github.com/detour-proxy/detour/rewrite/ir"
	"github.com/detour-proxy/detour/rewrite/sse"
)

// chat10KB is a tool round trip padded with conversation to about 10 KB of
// JSON, the request size issue 3 measures.
func chat10KB() *ir.Request {
	r := richRequest()
	r.Messages = r.Messages[:len(r.Messages):len(r.Messages)]
	para := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 20) // ~900 B
	history := make([]ir.Message, 0, 10)
	for i := range 5 {
		history = append(history,
			ir.Message{Role: ir.RoleUser, Parts: []ir.Part{{Kind: ir.PartText, Text: para}}},
			ir.Message{Role: ir.RoleAssistant, Parts: []ir.Part{{Kind: ir.PartText, Text: para[:800+i]}}})
	}
	r.Messages = append(history, r.Messages...)
	return r
}

func BenchmarkEncodeRequest10KB(b *testing.B) {
	r := chat10KB()
	opts := ir.EncodeOptions{Model: "claude-sonnet-4-5", Notes: func(string) {}}
	body, err := EncodeRequest(r, opts)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := EncodeRequest(r, opts); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeRequest10KB(b *testing.B) {
	body, err := EncodeRequest(chat10KB(), ir.EncodeOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeRequest(body); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodeResponse(b *testing.B) {
	r := codectest.AnthropicToolResponse()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := EncodeResponse(r, "claude-sonnet-4-5"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStreamEncodeText measures one text delta event: the steady state
// of a translated stream, writing into a reused buffer.
func BenchmarkStreamEncodeText(b *testing.B) {
	e := NewStreamEncoder(ir.StreamOptions{Model: "claude-sonnet-4-5"})
	ev := ir.StreamEvent{Kind: ir.StreamText, Text: "Hello, world, this is a token."}
	buf := e.Encode(make([]byte, 0, 512), ev)
	b.ReportAllocs()
	for b.Loop() {
		buf = e.Encode(buf[:0], ev)
	}
}

// BenchmarkStreamDecodeText measures decoding one Anthropic text delta.
func BenchmarkStreamDecodeText(b *testing.B) {
	d := NewStreamDecoder()
	ev := sse.Event{Name: "content_block_delta", Data: []byte(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello, world, this is a token."}}`)}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := d.Decode(ev); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStream200Events encodes a whole 200-event stream (text, then a
// tool call in 20 fragments) per iteration, with a fresh encoder, and
// reports the cost per event.
func BenchmarkStream200Events(b *testing.B) {
	evs := []ir.StreamEvent{{Kind: ir.StreamStart, ID: "chatcmpl-1", Model: "gpt-4o"}}
	for range 175 {
		evs = append(evs, ir.StreamEvent{Kind: ir.StreamText, Text: "token "})
	}
	evs = append(evs, ir.StreamEvent{Kind: ir.StreamToolStart, ID: "call_1", Name: "f"})
	args, _ := json.Marshal(map[string]string{"query": strings.Repeat("x", 100)})
	for i := 0; i < 20; i++ {
		evs = append(evs, ir.StreamEvent{Kind: ir.StreamToolArgs, Text: string(args[i*len(args)/20 : (i+1)*len(args)/20])})
	}
	evs = append(evs, ir.StreamEvent{Kind: ir.StreamFinish, Finish: ir.FinishToolCalls}, ir.StreamEvent{Kind: ir.StreamUsage, Usage: ir.TokenUsage{Input: 10, Output: 200}})
	buf := make([]byte, 0, 1024)
	b.ReportAllocs()
	for b.Loop() {
		e := NewStreamEncoder(ir.StreamOptions{Model: "claude-sonnet-4-5"})
		for _, ev := range evs {
			buf = e.Encode(buf[:0], ev)
		}
		buf = e.Close(buf[:0])
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(evs)), "ns/event")
}
