package openai

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/detour-proxy/detour/internal/codectest"
	"github.com/detour-proxy/detour/rewrite/ir"
)

// roundTripRequest holds everything the OpenAI shape can carry, in the form
// DecodeRequest produces, so that Decode(Encode(r)) must give r back.
func roundTripRequest() *ir.Request {
	return &ir.Request{
		Model:  "gpt-4o-mini",
		System: []string{"first system", "then a developer prompt"},
		Messages: []ir.Message{
			{Role: ir.RoleUser, Name: "ann", Parts: []ir.Part{{Kind: ir.PartText, Text: "plain <text> & \"quotes\"\n"}}},
			{Role: ir.RoleUser, Parts: []ir.Part{
				{Kind: ir.PartText, Text: "look"},
				{Kind: ir.PartImage, Media: &ir.Media{MediaType: "image/png", Data: "iVBORw0KGgo=", Detail: "high"}},
				{Kind: ir.PartImage, Media: &ir.Media{URL: "https://example.com/x.jpg", Detail: "auto"}},
				{Kind: ir.PartDocument, Media: &ir.Media{MediaType: "application/pdf", Data: "JVBERi0=", Filename: "a.pdf"}},
			}},
			{Role: ir.RoleAssistant, Name: "bot", Parts: []ir.Part{
				{Kind: ir.PartText, Text: "calling"},
				{Kind: ir.PartToolCall, ToolCall: &ir.ToolCall{ID: "call_1", Name: "f", Arguments: json.RawMessage(`{"a":[1,2],"b":{"c":null}}`)}},
				{Kind: ir.PartToolCall, ToolCall: &ir.ToolCall{ID: "call_2", Name: "g", Arguments: json.RawMessage(`{}`)}},
			}},
			{Role: ir.RoleTool, Parts: []ir.Part{{Kind: ir.PartToolResult, ToolResult: &ir.ToolResult{CallID: "call_1", Name: "f", Content: "ok"}}}},
			{Role: ir.RoleTool, Parts: []ir.Part{{Kind: ir.PartToolResult, ToolResult: &ir.ToolResult{CallID: "call_2", Name: "g", Content: ""}}}},
			{Role: ir.RoleAssistant, Parts: []ir.Part{{Kind: ir.PartText, Text: "done"}}},
		},
		Tools: []ir.Tool{
			{Name: "f", Description: "does f", Parameters: json.RawMessage(`{"type":"object"}`), Strict: true},
			{Name: "g"},
		},
		ToolChoice:        &ir.ToolChoice{Mode: ir.ToolChoiceTool, Name: "f"},
		ParallelToolCalls: ptr(true),
		MaxTokens:         512,
		Temperature:       ptr(1.5),
		TopP:              ptr(0.5),
		Stop:              []string{"END", "\n\n"},
		N:                 2,
		Seed:              ptr(int64(-3)),
		ResponseFormat:    &ir.ResponseFormat{Type: "json_schema", Name: "out", Schema: json.RawMessage(`{"type":"object"}`), Strict: true},
		ReasoningEffort:   "high",
		Stream:            true,
		IncludeUsage:      true, // forced on by the encoder whenever Stream
		User:              "u-1",
	}
}

func TestRequestRoundTrip(t *testing.T) {
	variants := map[string]func(*ir.Request){
		"full":        func(*ir.Request) {},
		"tool modes":  func(r *ir.Request) { r.ToolChoice = &ir.ToolChoice{Mode: ir.ToolChoiceRequired} },
		"json_object": func(r *ir.Request) { r.ResponseFormat = &ir.ResponseFormat{Type: "json_object"} },
		"not streamed": func(r *ir.Request) {
			r.Stream, r.IncludeUsage = false, false
			r.ToolChoice = &ir.ToolChoice{Mode: ir.ToolChoiceNone}
		},
		"minimal": func(r *ir.Request) {
			*r = ir.Request{Model: "gpt-4o-mini", Messages: []ir.Message{{Role: ir.RoleUser, Parts: []ir.Part{{Kind: ir.PartText, Text: ""}}}}}
		},
	}
	for name, change := range variants {
		t.Run(name, func(t *testing.T) {
			want := roundTripRequest()
			change(want)
			body, err := EncodeRequest(want, ir.EncodeOptions{Model: "gpt-4o-mini"})
			if err != nil {
				t.Fatal(err)
			}
			got, err := DecodeRequest(body)
			if err != nil {
				t.Fatalf("DecodeRequest(%s): %v", body, err)
			}
			if !reflect.DeepEqual(normalizeRequest(t, got), normalizeRequest(t, want)) {
				t.Errorf("round trip changed the request\nbody %s\n got %s\nwant %s", body, codectest.MarshalIndent(t, got), codectest.MarshalIndent(t, want))
			}
		})
	}
}

func TestResponseRoundTrip(t *testing.T) {
	for name, want := range map[string]*ir.Response{
		"text and tools": {
			ID: "chatcmpl-1", Model: "gpt-4o", Created: testCreated,
			Parts: []ir.Part{
				{Kind: ir.PartThinking, Text: "hmm"},
				{Kind: ir.PartText, Text: "answer <b>"},
				{Kind: ir.PartToolCall, ToolCall: &ir.ToolCall{ID: "call_1", Name: "f", Arguments: json.RawMessage(`{"x":1}`)}},
				{Kind: ir.PartToolCall, ToolCall: &ir.ToolCall{ID: "call_2", Name: "g", Arguments: json.RawMessage(`{}`)}},
			},
			Finish: ir.FinishToolCalls,
			Usage:  ir.TokenUsage{Input: 10, Output: 20, CachedInput: 4, Reasoning: 5},
		},
		"length": {
			ID: "chatcmpl-2", Model: "gpt-4o", Created: testCreated,
			Parts:  []ir.Part{{Kind: ir.PartText, Text: "cut"}},
			Finish: ir.FinishLength, Usage: ir.TokenUsage{Input: 1, Output: 2},
		},
		"content filter": {
			ID: "chatcmpl-3", Model: "gpt-4o", Created: testCreated,
			Finish: ir.FinishContentFilter,
		},
	} {
		t.Run(name, func(t *testing.T) {
			body, err := EncodeResponse(want, want.Model)
			if err != nil {
				t.Fatal(err)
			}
			got, err := DecodeResponse(body)
			if err != nil {
				t.Fatalf("DecodeResponse(%s): %v", body, err)
			}
			if !reflect.DeepEqual(normalizeJSON(t, got), normalizeJSON(t, want)) {
				t.Errorf("round trip changed the response\nbody %s\n got %s\nwant %s", body, codectest.MarshalIndent(t, got), codectest.MarshalIndent(t, want))
			}
		})
	}
}

// TestStreamRoundTrip: IR events encoded as an OpenAI stream and decoded
// again are the same events, apart from the id's chatcmpl- prefix, the
// model (the app's), a tool call's empty arguments becoming "{}", and the
// finish reason saying tool_calls after tool calls.
func TestStreamRoundTrip(t *testing.T) {
	stream := encodeEvents(parallelToolStream, ir.StreamOptions{Model: "gpt-4o", IncludeUsage: true, Created: testCreated})
	got := decodeStream(t, bytes.NewReader(stream))
	want := []ir.StreamEvent{
		{Kind: ir.StreamStart, ID: "chatcmpl-r1", Model: "gpt-4o"},
		{Kind: ir.StreamToolStart, Index: 0, ID: "call_a", Name: "get_weather"},
		{Kind: ir.StreamToolArgs, Index: 0, Text: `{"city":`},
		{Kind: ir.StreamToolStart, Index: 1, ID: "call_b", Name: "get_time"},
		{Kind: ir.StreamToolArgs, Index: 1, Text: `{"tz":"Europe/Rome"}`},
		{Kind: ir.StreamToolArgs, Index: 0, Text: `"Paris"}`},
		{Kind: ir.StreamFinish, Finish: ir.FinishToolCalls},
		{Kind: ir.StreamUsage, Usage: ir.TokenUsage{Input: 20, Output: 12}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("round trip:\n got %s\nwant %s", eventLines(t, got), eventLines(t, want))
	}

	stream = encodeEvents(textStream, ir.StreamOptions{Model: "gpt-4o", IncludeUsage: true, Created: testCreated})
	got = decodeStream(t, bytes.NewReader(stream))
	want = []ir.StreamEvent{
		{Kind: ir.StreamStart, ID: "chatcmpl-msg_01", Model: "gpt-4o"},
		{Kind: ir.StreamThinking, Text: "Greet back."},
		{Kind: ir.StreamText, Text: "Hi"},
		{Kind: ir.StreamText, Text: " there, "},
		{Kind: ir.StreamText, Text: "\"friend\" <3\n"},
		{Kind: ir.StreamFinish, Finish: ir.FinishStop},
		{Kind: ir.StreamUsage, Usage: ir.TokenUsage{Input: 9, Output: 6}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("round trip:\n got %s\nwant %s", eventLines(t, got), eventLines(t, want))
	}
}

// normalizeJSON round-trips v through JSON, so raw JSON fields compare by
// value.
func normalizeJSON(t *testing.T, v any) any {
	t.Helper()
	var out any
	if err := json.Unmarshal(codectest.MarshalIndent(t, v), &out); err != nil {
		t.Fatal(err)
	}
	return out
}
