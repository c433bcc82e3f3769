package responses

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/detour-proxy/detour/internal/codectest"
	"github.com/detour-proxy/detour/rewrite"
	"github.com/detour-proxy/detour/rewrite/ir"
	"github.com/detour-proxy/detour/rewrite/sse"
)

// decodeFile runs a stream file through a StreamDecoder.
func decodeFile(t *testing.T, name string) []ir.StreamEvent {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return decodeStream(t, b)
}

func decodeStream(t *testing.T, b []byte) []ir.StreamEvent {
	t.Helper()
	d := NewStreamDecoder()
	rd := sse.NewReader(bytes.NewReader(b))
	var out []ir.StreamEvent
	for {
		ev, err := rd.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		evs, err := d.Decode(ev)
		if err != nil {
			t.Fatalf("decode %q: %v", ev.Data, err)
		}
		out = append(out, evs...)
	}
}

func TestStreamDecoderReadsOpenAIStreams(t *testing.T) {
	t.Parallel()
	got := decodeFile(t, "testdata/text_stream.sse")
	want := []ir.StreamEvent{
		{Kind: ir.StreamStart, ID: "resp_67c9fdcecf488190bdd9a0409de3a1ec07b8b0ad4e5eb654", Model: "gpt-4.1-2025-04-14"},
		{Kind: ir.StreamText, Text: "Hi"},
		{Kind: ir.StreamText, Text: " there!"},
		{Kind: ir.StreamFinish, Finish: ir.FinishStop},
		{Kind: ir.StreamUsage, Usage: ir.TokenUsage{Input: 37, Output: 11}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("text stream:\n got %+v\nwant %+v", got, want)
	}
	got = decodeFile(t, "testdata/tool_stream.sse")
	want = []ir.StreamEvent{
		{Kind: ir.StreamStart, ID: "resp_tool1", Model: "gpt-4.1"},
		{Kind: ir.StreamToolStart, ID: "call_12345xyz", Name: "get_weather"},
		{Kind: ir.StreamToolArgs, Text: `{"location":`},
		{Kind: ir.StreamToolArgs, Text: `"Paris"}`},
		{Kind: ir.StreamFinish, Finish: ir.FinishToolCalls},
		{Kind: ir.StreamUsage, Usage: ir.TokenUsage{Input: 50, Output: 17, CachedInput: 10}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("tool stream:\n got %+v\nwant %+v", got, want)
	}
}

func TestStreamDecoderReadsErrors(t *testing.T) {
	t.Parallel()
	for _, data := range []string{
		"event: error\ndata: {\"type\":\"error\",\"sequence_number\":3,\"code\":\"rate_limit_exceeded\",\"message\":\"Slow down\",\"param\":null}\n\n",
		"event: response.failed\ndata: {\"type\":\"response.failed\",\"sequence_number\":3,\"response\":{\"id\":\"resp_1\",\"status\":\"failed\",\"error\":{\"code\":\"rate_limit_exceeded\",\"message\":\"Slow down\"}}}\n\n",
	} {
		evs := decodeStream(t, []byte(data))
		last := evs[len(evs)-1]
		if last.Kind != ir.StreamError || last.Err.Message != "Slow down" || last.Err.Class != "rate_limited" {
			t.Errorf("%s: events %+v; want a rate_limited StreamError", data, evs)
		}
	}
}

// sseEvent is one event as the app reads it.
type sseEvent struct {
	name string
	data map[string]any
}

func readEvents(t *testing.T, b []byte) []sseEvent {
	t.Helper()
	rd := sse.NewReader(bytes.NewReader(b))
	var out []sseEvent
	for {
		ev, err := rd.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(ev.Data, &m); err != nil {
			t.Fatalf("event %s: %v: %s", ev.Name, err, ev.Data)
		}
		out = append(out, sseEvent{ev.Name, m})
	}
}

// encodeAll runs events through a StreamEncoder and closes it.
func encodeAll(evs ...ir.StreamEvent) []byte {
	e := NewStreamEncoder(ir.StreamOptions{Model: "gpt-app", Created: 1700000000})
	var out []byte
	for _, ev := range evs {
		out = e.Encode(out, ev)
	}
	return e.Close(out)
}

// textAndTool is internal/codectest's, which internal/sdkcheck's openai-go
// tests read too.
var textAndTool = codectest.ResponsesTextAndTool

func TestStreamEncoderEventOrder(t *testing.T) {
	t.Parallel()
	evs := readEvents(t, encodeAll(textAndTool...))
	var names []string
	for i, ev := range evs {
		names = append(names, ev.name)
		if ev.data["type"] != ev.name {
			t.Errorf("event %d: name %q, type %v", i, ev.name, ev.data["type"])
		}
		if ev.data["sequence_number"] != float64(i) {
			t.Errorf("event %d: sequence_number %v", i, ev.data["sequence_number"])
		}
	}
	want := []string{
		"response.created", "response.in_progress",
		"response.output_item.added", "response.content_part.added",
		"response.output_text.delta", "response.output_text.delta",
		"response.output_text.done", "response.content_part.done", "response.output_item.done",
		"response.output_item.added", "response.function_call_arguments.delta", "response.function_call_arguments.delta",
		"response.function_call_arguments.done", "response.output_item.done",
		"response.completed",
	}
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Fatalf("events\n got %v\nwant %v", names, want)
	}
	if got := evs[6].data["text"]; got != "Let me look." {
		t.Errorf("output_text.done text %v", got)
	}
	if got := evs[12].data["arguments"]; got != `{"city":"Paris"}` {
		t.Errorf("function_call_arguments.done arguments %v", got)
	}
	resp := evs[14].data["response"].(map[string]any)
	usage := resp["usage"].(map[string]any)
	if usage["input_tokens"] != 20.0 || usage["output_tokens"] != 9.0 || usage["total_tokens"] != 29.0 || resp["model"] != "gpt-app" || len(resp["output"].([]any)) != 2 {
		t.Errorf("response.completed %v", resp)
	}
}

func TestStreamEncoderLengthIsIncomplete(t *testing.T) {
	t.Parallel()
	evs := readEvents(t, encodeAll(ir.StreamEvent{Kind: ir.StreamText, Text: "cut"}, ir.StreamEvent{Kind: ir.StreamFinish, Finish: ir.FinishLength}))
	last := evs[len(evs)-1]
	if last.name != "response.incomplete" || last.data["response"].(map[string]any)["incomplete_details"].(map[string]any)["reason"] != "max_output_tokens" {
		t.Errorf("last event %+v", last)
	}
}

func TestStreamEncoderErrorAfterContent(t *testing.T) {
	t.Parallel()
	e := NewStreamEncoder(ir.StreamOptions{Model: "m"})
	out := e.Encode(nil, ir.StreamEvent{Kind: ir.StreamText, Text: "partial"})
	out = e.Encode(out, ir.StreamEvent{Kind: ir.StreamError, Err: &rewrite.AppError{Status: 429, Class: "rate_limited", Message: "slow down"}})
	out = e.Close(out)
	evs := readEvents(t, out)
	n := len(evs)
	if evs[n-2].name != "error" || evs[n-2].data["code"] != "rate_limit_exceeded" || evs[n-2].data["message"] != "slow down" {
		t.Errorf("error event %+v", evs[n-2])
	}
	if evs[n-1].name != "response.failed" || evs[n-1].data["response"].(map[string]any)["status"] != "failed" {
		t.Errorf("last event %+v", evs[n-1])
	}
	if evs[n-1].data["sequence_number"] != float64(n-1) {
		t.Errorf("sequence numbers break at the error: %+v", evs[n-1])
	}
}

// The encoder's stream decodes back into the events it was given (less
// thinking, which the Responses stream does not carry).
func TestStreamRoundTrip(t *testing.T) {
	t.Parallel()
	got := decodeStream(t, encodeAll(textAndTool...))
	var want []ir.StreamEvent
	for _, ev := range textAndTool {
		if ev.Kind != ir.StreamThinking {
			want = append(want, ev)
		}
	}
	want[0] = ir.StreamEvent{Kind: ir.StreamStart, ID: "resp_msg_01abc", Model: "gpt-app"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("round trip\n got %+v\nwant %+v", got, want)
	}
}
