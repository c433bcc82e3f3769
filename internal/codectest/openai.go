package codectest

import (
	"bytes"
	"testing"

	"github.com/detour-proxy/detour/rewrite/ir"
)

// OpenAIDataLines returns the data of every event of a stream OpenAI's
// encoder wrote, failing the test unless each event is one `data:` line
// and the stream ends with a blank line.
func OpenAIDataLines(t *testing.T, stream []byte) [][]byte {
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

// OpenAITextStream is a text answer the way an Anthropic decoder delivers
// it: input usage at the start, output usage before the finish.
var OpenAITextStream = []ir.StreamEvent{
	{Kind: ir.StreamStart, ID: "msg_01", Model: "claude-sonnet-4-5", Usage: ir.TokenUsage{Input: 9, Output: 1}},
	{Kind: ir.StreamThinking, Text: "Greet back."},
	{Kind: ir.StreamText, Text: "Hi"},
	{Kind: ir.StreamText, Text: " there, "},
	{Kind: ir.StreamText, Text: "\"friend\" <3\n"},
	{Kind: ir.StreamUsage, Usage: ir.TokenUsage{Output: 6}},
	{Kind: ir.StreamFinish, Finish: ir.FinishStop},
}

// OpenAIParallelToolStream is two parallel tool calls whose argument
// fragments interleave, finished with "stop" as Gemini and Anthropic
// decoders may say.
var OpenAIParallelToolStream = []ir.StreamEvent{
	{Kind: ir.StreamStart, ID: "r1", Model: "gemini-2.5-flash"},
	{Kind: ir.StreamToolStart, Index: 0, ID: "call_a", Name: "get_weather"},
	{Kind: ir.StreamToolArgs, Index: 0, Text: `{"city":`},
	{Kind: ir.StreamToolStart, Index: 1, ID: "call_b", Name: "get_time"},
	{Kind: ir.StreamToolArgs, Index: 1, Text: `{"tz":"Europe/Rome"}`},
	{Kind: ir.StreamToolArgs, Index: 0, Text: `"Paris"}`},
	{Kind: ir.StreamUsage, Usage: ir.TokenUsage{Input: 20, Output: 12}},
	{Kind: ir.StreamFinish, Finish: ir.FinishStop},
}
