package bedrock

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/detour-proxy/detour/rewrite/ir"
	"github.com/detour-proxy/detour/rewrite/sse"
)

func TestEncodeRequestMapsTurnsToolsAndConfig(t *testing.T) {
	t.Parallel()
	temp, k := 0.5, 40
	r := &ir.Request{
		System: []string{"Be brief.", "  "},
		Messages: []ir.Message{
			{Role: ir.RoleUser, Parts: []ir.Part{{Kind: ir.PartText, Text: "Weather in Paris?"}}},
			{Role: ir.RoleAssistant, Parts: []ir.Part{{Kind: ir.PartToolCall, ToolCall: &ir.ToolCall{ID: "call_1", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Paris"}`)}}}},
			{Role: ir.RoleTool, Parts: []ir.Part{{Kind: ir.PartToolResult, ToolResult: &ir.ToolResult{CallID: "call_1", Content: "sunny"}}}},
			{Role: ir.RoleUser, Parts: []ir.Part{{Kind: ir.PartText, Text: "Thanks"}}},
		},
		Tools:       []ir.Tool{{Name: "get_weather", Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}}}`)}},
		ToolChoice:  &ir.ToolChoice{Mode: ir.ToolChoiceRequired},
		MaxTokens:   100,
		Temperature: &temp,
		TopK:        &k,
		Stop:        []string{"END"},
	}
	b, err := EncodeRequest(r, ir.EncodeOptions{Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"messages":[{"role":"user","content":[{"text":"Weather in Paris?"}]},{"role":"assistant","content":[{"toolUse":{"toolUseId":"call_1","name":"get_weather","input":{"city":"Paris"}}}]},{"role":"user","content":[{"toolResult":{"toolUseId":"call_1","content":[{"text":"sunny"}]}},{"text":"Thanks"}]}],"system":[{"text":"Be brief."}],"inferenceConfig":{"maxTokens":100,"temperature":0.5,"stopSequences":["END"]},"toolConfig":{"tools":[{"toolSpec":{"name":"get_weather","inputSchema":{"json":{"type":"object","properties":{"city":{"type":"string"}}}}}}],"toolChoice":{"any":{}}},"additionalModelRequestFields":{"top_k":40}}`
	if string(b) != want {
		t.Errorf("got  %s\nwant %s", b, want)
	}
}

func TestEncodeRequestRefusesWhatConverseCannotTake(t *testing.T) {
	t.Parallel()
	user := []ir.Message{{Role: ir.RoleUser, Parts: []ir.Part{{Kind: ir.PartText, Text: "hi"}}}}
	for name, r := range map[string]*ir.Request{
		"n":         {Messages: user, N: 2},
		"json mode": {Messages: user, ResponseFormat: &ir.ResponseFormat{Type: "json_schema"}},
		"image url": {Messages: []ir.Message{{Role: ir.RoleUser, Parts: []ir.Part{{Kind: ir.PartImage, Media: &ir.Media{URL: "https://x/y.png"}}}}}},
		"empty":     {},
	} {
		var un *ir.UnsupportedError
		if _, err := EncodeRequest(r, ir.EncodeOptions{}); !errors.As(err, &un) {
			t.Errorf("%s: err = %v; want *ir.UnsupportedError", name, err)
		}
	}
}

func TestEscapedModelPath(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		Path("anthropic.claude-3-5-haiku-20241022-v1:0", false):                                           "/model/anthropic.claude-3-5-haiku-20241022-v1%3A0/converse",
		Path("arn:aws:bedrock:us-east-1:123:inference-profile/us.anthropic.claude-3-7-sonnet-v1:0", true): "/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A123%3Ainference-profile%2Fus.anthropic.claude-3-7-sonnet-v1%3A0/converse-stream",
	} {
		if got, ok := EscapedModelPath(in); !ok || got != want {
			t.Errorf("EscapedModelPath(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
}

func TestDecodeResponse(t *testing.T) {
	t.Parallel()
	r, err := DecodeResponse([]byte(`{"output":{"message":{"role":"assistant","content":[{"reasoningContent":{"reasoningText":{"text":"hm","signature":"sig"}}},{"text":"Hi"},{"toolUse":{"toolUseId":"tooluse_1","name":"f","input":{"a":1}}}]}},"stopReason":"tool_use","usage":{"inputTokens":10,"outputTokens":3,"cacheReadInputTokens":5}}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Parts) != 3 || r.Parts[0].Kind != ir.PartThinking || r.Parts[1].Text != "Hi" || r.Parts[2].ToolCall.Name != "f" ||
		r.Finish != ir.FinishToolCalls || r.Usage != (ir.TokenUsage{Input: 15, Output: 3, CachedInput: 5}) {
		t.Errorf("got %+v", r)
	}
}

// converseStream is a ConverseStream with text, a tool call and usage, in
// the SSE form internal/cloud gives the decoder.
const converseStream = "event: messageStart\ndata: {\"p\":\"abc\",\"role\":\"assistant\"}\n\n" +
	"event: contentBlockDelta\ndata: {\"contentBlockIndex\":0,\"delta\":{\"text\":\"Hel\"},\"p\":\"ab\"}\n\n" +
	"event: contentBlockDelta\ndata: {\"delta\":{\"text\":\"lo\"},\"contentBlockIndex\":0}\n\n" +
	"event: contentBlockStop\ndata: {\"contentBlockIndex\":0}\n\n" +
	"event: contentBlockStart\ndata: {\"contentBlockIndex\":1,\"start\":{\"toolUse\":{\"toolUseId\":\"tooluse_1\",\"name\":\"f\"}}}\n\n" +
	"event: contentBlockDelta\ndata: {\"contentBlockIndex\":1,\"delta\":{\"toolUse\":{\"input\":\"{\\\"a\\\":\"}}}\n\n" +
	"event: contentBlockDelta\ndata: {\"contentBlockIndex\":1,\"delta\":{\"toolUse\":{\"input\":\"1}\"}}}\n\n" +
	"event: contentBlockStop\ndata: {\"contentBlockIndex\":1}\n\n" +
	"event: messageStop\ndata: {\"stopReason\":\"tool_use\"}\n\n" +
	"event: metadata\ndata: {\"usage\":{\"inputTokens\":7,\"outputTokens\":4,\"totalTokens\":11},\"metrics\":{\"latencyMs\":1}}\n\n" +
	"event: throttlingException\ndata: {\"__type\":\"throttlingException\",\"message\":\"Too many tokens\"}\n\n"

func decodeAll(t testing.TB, stream string) []ir.StreamEvent {
	d := NewStreamDecoder()
	rd := sse.NewReader(strings.NewReader(stream))
	var out []ir.StreamEvent
	for {
		ev, err := rd.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		evs, err := d.Decode(ev)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, evs...)
	}
}

func TestStreamDecoder(t *testing.T) {
	t.Parallel()
	evs := decodeAll(t, converseStream)
	var kinds []ir.StreamEventKind
	text, args := "", ""
	for _, e := range evs {
		kinds = append(kinds, e.Kind)
		switch e.Kind {
		case ir.StreamText:
			text += e.Text
		case ir.StreamToolArgs:
			args += e.Text
		}
	}
	want := []ir.StreamEventKind{ir.StreamStart, ir.StreamText, ir.StreamText, ir.StreamToolStart, ir.StreamToolArgs, ir.StreamToolArgs, ir.StreamFinish, ir.StreamUsage, ir.StreamError}
	if !slicesEqual(kinds, want) || text != "Hello" || args != `{"a":1}` {
		t.Fatalf("kinds %v text %q args %q", kinds, text, args)
	}
	if e := evs[len(evs)-1].Err; e.Class != "rate_limited" || e.Status != 429 || e.Message != "Too many tokens" {
		t.Errorf("exception = %+v", e)
	}
	if evs[6].Finish != ir.FinishToolCalls || evs[7].Usage.Input != 7 {
		t.Errorf("finish %v usage %+v", evs[6].Finish, evs[7].Usage)
	}
}

func slicesEqual[T comparable](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// FuzzStreamDecoder: any SSE input decodes without panicking, and the text
// fast path agrees with the full decode.
func FuzzStreamDecoder(f *testing.F) {
	f.Add([]byte(converseStream))
	f.Add([]byte("event: contentBlockDelta\ndata: {\"contentBlockIndex\":99999,\"delta\":{\"toolUse\":{\"input\":\"x\"}}}\n\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		d := NewStreamDecoder()
		rd := sse.NewReader(bytes.NewReader(b))
		for range 1000 {
			ev, err := rd.Next()
			if err != nil {
				return
			}
			_, _ = d.Decode(ev)
			if text, ok := fastTextDelta(bytes.TrimSpace(ev.Data)); ok {
				var w streamWire
				if json.Unmarshal(bytes.TrimSpace(ev.Data), &w) == nil && (w.Delta.Text == nil || *w.Delta.Text != text) {
					t.Fatalf("fast path read %q from %s; encoding/json %v", text, ev.Data, w.Delta.Text)
				}
			}
		}
	})
}

// FuzzDecodeResponse: any body decodes or fails without panicking.
func FuzzDecodeResponse(f *testing.F) {
	f.Add([]byte(`{"output":{"message":{"role":"assistant","content":[{"text":"Hi"},{"toolUse":{"toolUseId":"t","name":"f","input":null}}]}},"stopReason":"end_turn","usage":{"inputTokens":1}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = DecodeResponse(b)
	})
}
