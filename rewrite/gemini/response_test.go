package gemini

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/detour-proxy/detour/internal/codectest"
	"github.com/detour-proxy/detour/rewrite/ir"
)

func TestDecodeResponse(t *testing.T) {
	body := `{"candidates":[{"content":{"role":"model","parts":[
		{"text":"Thinking about it","thought":true},
		{"text":"Checking."},
		{"functionCall":{"name":"get_weather","args":{"city":"Paris"}},"thoughtSignature":"c2ln"},
		{"functionCall":{"id":"g3-id","name":"get_time"}},
		{"thoughtSignature":"b25seQ=="}
	]},"finishReason":"STOP","index":0}],
	"usageMetadata":{"promptTokenCount":100,"cachedContentTokenCount":40,"candidatesTokenCount":20,"thoughtsTokenCount":30,"totalTokenCount":150},
	"modelVersion":"gemini-2.5-pro","responseId":"resp-1"}`
	r, err := DecodeResponse([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	want := &ir.Response{
		ID: "resp-1", Model: "gemini-2.5-pro",
		Parts: []ir.Part{
			{Kind: ir.PartThinking, Text: "Thinking about it"},
			{Kind: ir.PartText, Text: "Checking."},
			{Kind: ir.PartToolCall, ToolCall: &ir.ToolCall{ID: "call_resp-1_0", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Paris"}`), ThoughtSignature: "c2ln"}},
			{Kind: ir.PartToolCall, ToolCall: &ir.ToolCall{ID: "g3-id", Name: "get_time", Arguments: json.RawMessage(`{}`)}},
		},
		Finish: ir.FinishToolCalls,
		Usage:  ir.TokenUsage{Input: 100, CachedInput: 40, Output: 50, Reasoning: 30},
	}
	if a, b := codectest.MarshalIndent(t, r), codectest.MarshalIndent(t, want); string(a) != string(b) {
		t.Errorf("got:\n%s\nwant:\n%s", a, b)
	}
}

func TestDecodeResponseFinish(t *testing.T) {
	for reason, want := range map[string]ir.FinishReason{
		"STOP": ir.FinishStop, "MAX_TOKENS": ir.FinishLength, "": ir.FinishStop,
		"SAFETY": ir.FinishContentFilter, "BLOCKLIST": ir.FinishContentFilter,
		"PROHIBITED_CONTENT": ir.FinishContentFilter, "SPII": ir.FinishContentFilter,
		"IMAGE_SAFETY": ir.FinishContentFilter, "RECITATION": ir.FinishContentFilter,
		"LANGUAGE": ir.FinishContentFilter, "OTHER": ir.FinishContentFilter,
		"MALFORMED_FUNCTION_CALL": ir.FinishStop, "UNEXPECTED_TOOL_CALL": ir.FinishStop,
		"FINISH_REASON_UNSPECIFIED": ir.FinishStop, "SOMETHING_NEW": ir.FinishStop,
	} {
		r, err := DecodeResponse([]byte(`{"candidates":[{"content":{"parts":[{"text":"x"}]},"finishReason":"` + reason + `"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		if r.Finish != want {
			t.Errorf("%s → %s; want %s", reason, r.Finish, want)
		}
	}
	r, _ := DecodeResponse([]byte(`{"candidates":[{"content":{"parts":[{"functionCall":{"name":"f"}}]},"finishReason":"MAX_TOKENS"}]}`))
	if r.Finish != ir.FinishLength {
		t.Errorf("a call cut by MAX_TOKENS → %s; want length", r.Finish)
	}
}

// TestDecodeResponseBlockedPrompt: a blocked prompt has no candidates, only
// promptFeedback.blockReason.
func TestDecodeResponseBlockedPrompt(t *testing.T) {
	r, err := DecodeResponse([]byte(`{"promptFeedback":{"blockReason":"SAFETY"},"usageMetadata":{"promptTokenCount":7,"totalTokenCount":7},"modelVersion":"m","responseId":"b"}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Parts) != 0 || r.Finish != ir.FinishContentFilter || r.Usage.Input != 7 {
		t.Errorf("got %+v; want no parts, content_filter, the prompt's usage", r)
	}
	r, _ = DecodeResponse([]byte(`{"candidates":[]}`))
	if r.Finish != ir.FinishStop || r.Parts == nil {
		t.Errorf("empty answer → %+v; want stop and an empty part list", r)
	}
}

// TestDecodeResponseIDsWithoutResponseID: a server that sends no responseId
// still gets ids that are stable per response and differ between responses.
func TestDecodeResponseIDsWithoutResponseID(t *testing.T) {
	id := func(body string) string {
		r, err := DecodeResponse([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		return r.Parts[0].ToolCall.ID
	}
	a := `{"candidates":[{"content":{"parts":[{"functionCall":{"name":"f","args":{"x":1}}}]}}]}`
	b := `{"candidates":[{"content":{"parts":[{"functionCall":{"name":"f","args":{"x":2}}}]}}]}`
	if first, again := id(a), id(a); first != again {
		t.Error("same response, different ids")
	}
	if id(a) == id(b) {
		t.Errorf("different responses share id %s", id(a))
	}
	if !strings.HasPrefix(id(a), "call_h") {
		t.Errorf("id %s; want a hash-scoped generated id", id(a))
	}
}

func TestDecodeResponseErrors(t *testing.T) {
	_, err := DecodeResponse([]byte(`{"error":{"code":429,"message":"quota","status":"RESOURCE_EXHAUSTED"}}`))
	if !errors.Is(err, errErrorBody) {
		t.Errorf("error envelope: err %v; want errErrorBody", err)
	}
	for _, body := range []string{``, `[]`, `{"candidates":"x"}`} {
		if _, err := DecodeResponse([]byte(body)); err == nil {
			t.Errorf("%q decoded without error", body)
		}
	}
}

// sampleResponse is an answer as another vendor's decoder produces it
// (codectest's, which internal/sdkcheck's go-genai tests encode too).
func sampleResponse() *ir.Response { return codectest.GeminiSampleResponse() }

func TestEncodeResponseGolden(t *testing.T) {
	b, err := EncodeResponse(sampleResponse(), "gemini-2.5-flash")
	if err != nil {
		t.Fatal(err)
	}
	if strings.ContainsAny(string(b), "\n") {
		t.Error("response body is not one line")
	}
	golden(t, "response.encoded.golden", reindent(t, b))
}

func TestEncodeResponseFinish(t *testing.T) {
	for f, want := range map[ir.FinishReason]string{
		ir.FinishStop: "STOP", ir.FinishToolCalls: "STOP", ir.FinishLength: "MAX_TOKENS",
		ir.FinishContentFilter: "SAFETY", "": "STOP",
	} {
		b, err := EncodeResponse(&ir.Response{Finish: f}, "m")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), `"finishReason":"`+want+`"`) {
			t.Errorf("%q → %s; want %s", f, b, want)
		}
	}
}

// TestResponseRoundTrip: an answer encoded for a Gemini app and decoded
// again is the same answer (the app's model name replaces the upstream's).
func TestResponseRoundTrip(t *testing.T) {
	in := sampleResponse()
	b, err := EncodeResponse(in, "gemini-2.5-flash")
	if err != nil {
		t.Fatal(err)
	}
	out, err := DecodeResponse(b)
	if err != nil {
		t.Fatal(err)
	}
	want := &ir.Response{
		ID: "chatcmpl-9", Model: "gemini-2.5-flash",
		Parts: []ir.Part{
			{Kind: ir.PartThinking, Text: "Plan: call the tool."},
			{Kind: ir.PartText, Text: "Let me check <that>."},
			{Kind: ir.PartToolCall, ToolCall: &ir.ToolCall{ID: "call_1", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Paris"}`)}},
			{Kind: ir.PartToolCall, ToolCall: &ir.ToolCall{ID: "call_2", Name: "get_time", Arguments: json.RawMessage(`{}`)}},
		},
		Finish: ir.FinishToolCalls,
		Usage:  in.Usage,
	}
	if !reflect.DeepEqual(out, want) {
		t.Errorf("got:\n%s\nwant:\n%s", codectest.MarshalIndent(t, out), codectest.MarshalIndent(t, want))
	}
}
