package openai

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/detour-proxy/detour/rewrite/ir"
)

// Streams and helpers the round trip and stream tests share. The tests that
// read the encoders' output with openai-go are internal/sdkcheck's
// TestOpenAICodec* (docs/vendors.md#openai-go).

// dataLines returns the data of every event of an encoded stream.
func dataLines(t *testing.T, stream []byte) [][]byte {
	t.Helper()
	if !bytes.HasSuffix(stream, []byte("\n\n")) {
		t.Fatalf("stream does not end with a blank line: %q", stream)
	}
	var out [][]byte
	for _, ev := range bytes.Split(bytes.TrimSuffix(stream, []byte("\n\n")), []byte("\n\n")) {
		line, ok := bytes.CutPrefix(ev, []byte("data: "))
		if !ok || bytes.ContainsAny(line, "\r\n") {
			t.Fatalf("event is not one data line: %q", ev)
		}
		out = append(out, line)
	}
	return out
}

// textStream is a text answer the way an Anthropic decoder delivers it:
// input usage at the start, output usage before the finish.
var textStream = []ir.StreamEvent{
	{Kind: ir.StreamStart, ID: "msg_01", Model: "claude-sonnet-4-5", Usage: ir.TokenUsage{Input: 9, Output: 1}},
	{Kind: ir.StreamThinking, Text: "Greet back."},
	{Kind: ir.StreamText, Text: "Hi"},
	{Kind: ir.StreamText, Text: " there, "},
	{Kind: ir.StreamText, Text: "\"friend\" <3\n"},
	{Kind: ir.StreamUsage, Usage: ir.TokenUsage{Output: 6}},
	{Kind: ir.StreamFinish, Finish: ir.FinishStop},
}

// parallelToolStream is two parallel tool calls whose argument fragments
// interleave, finished with "stop" as Gemini and Anthropic decoders may say.
var parallelToolStream = []ir.StreamEvent{
	{Kind: ir.StreamStart, ID: "r1", Model: "gemini-2.5-flash"},
	{Kind: ir.StreamToolStart, Index: 0, ID: "call_a", Name: "get_weather"},
	{Kind: ir.StreamToolArgs, Index: 0, Text: `{"city":`},
	{Kind: ir.StreamToolStart, Index: 1, ID: "call_b", Name: "get_time"},
	{Kind: ir.StreamToolArgs, Index: 1, Text: `{"tz":"Europe/Rome"}`},
	{Kind: ir.StreamToolArgs, Index: 0, Text: `"Paris"}`},
	{Kind: ir.StreamUsage, Usage: ir.TokenUsage{Input: 20, Output: 12}},
	{Kind: ir.StreamFinish, Finish: ir.FinishStop},
}

func ptr[T any](v T) *T { return &v }

// normalizeRequest round-trips r through JSON so that equal requests
// compare equal whatever the spacing of their raw JSON fields.
func normalizeRequest(t *testing.T, r *ir.Request) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(marshalIndent(t, r), &v); err != nil {
		t.Fatal(err)
	}
	return v
}
