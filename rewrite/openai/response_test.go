package openai

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/detour-proxy/detour/rewrite/ir"
)

func TestDecodeFinish(t *testing.T) {
	for _, tc := range []struct {
		reason string
		tools  bool
		want   ir.FinishReason
	}{
		{"stop", false, ir.FinishStop},
		{"length", false, ir.FinishLength},
		{"tool_calls", true, ir.FinishToolCalls},
		{"content_filter", false, ir.FinishContentFilter},
		{"function_call", true, ir.FinishToolCalls},
		{"stop", true, ir.FinishToolCalls}, // compatible servers that say stop after calls
		{"length", true, ir.FinishLength},
		{"", false, ir.FinishStop},
		{"eos", false, ir.FinishStop}, // unknown: never lose the finish
	} {
		if got := decodeFinish(tc.reason, tc.tools); got != tc.want {
			t.Errorf("decodeFinish(%q, tools=%v) = %q; want %q", tc.reason, tc.tools, got, tc.want)
		}
	}
}

func TestFinishOut(t *testing.T) {
	for _, tc := range []struct {
		f     ir.FinishReason
		tools bool
		want  string
	}{
		{ir.FinishStop, false, "stop"},
		{ir.FinishStop, true, "tool_calls"},
		{"", false, "stop"},
		{"", true, "tool_calls"},
		{ir.FinishLength, true, "length"},
		{ir.FinishContentFilter, false, "content_filter"},
		{ir.FinishToolCalls, false, "tool_calls"},
	} {
		if got := finishOut(tc.f, tc.tools); got != tc.want {
			t.Errorf("finishOut(%q, tools=%v) = %q; want %q", tc.f, tc.tools, got, tc.want)
		}
	}
}

func TestDecodeResponseErrors(t *testing.T) {
	for _, body := range []string{
		``,
		`null`,
		`{"choices":[`,
		`{"choices":[]}`,
		`{"id":"x"}`,
		`{"choices":[{"message":{"content":5}}]}`,
		`{"choices":"no"}`,
		`{"error":{"message":"Provider returned error","code":502}}`,
	} {
		if r, err := DecodeResponse([]byte(body)); err == nil {
			t.Errorf("DecodeResponse(%s) = %+v; want an error", body, r)
		}
	}
	_, err := DecodeResponse([]byte(`{"error":{"message":"upstream said no","code":502}}`))
	if err == nil || !strings.Contains(err.Error(), "upstream said no") {
		t.Errorf("error %v does not carry the upstream's message", err)
	}
}

func TestDecodeResponseLegacyFunctionCall(t *testing.T) {
	r, err := DecodeResponse([]byte(`{"id":"chatcmpl-9","choices":[{"index":0,"message":{"role":"assistant","content":null,"function_call":{"name":"f","arguments":"{\"a\":1}"}},"finish_reason":"function_call"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Parts) != 1 || r.Parts[0].ToolCall == nil || r.Parts[0].ToolCall.Name != "f" ||
		string(r.Parts[0].ToolCall.Arguments) != `{"a":1}` || r.Parts[0].ToolCall.ID == "" || r.Finish != ir.FinishToolCalls {
		t.Errorf("decoded %+v", r)
	}
}

func TestEncodeResponseDefaults(t *testing.T) {
	before := time.Now().Unix()
	body, err := EncodeResponse(&ir.Response{Model: "upstream", Parts: []ir.Part{{Kind: ir.PartText, Text: "x"}}}, "")
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		ID      string `json:"id"`
		Model   string `json:"model"`
		Created int64  `json:"created"`
		Choices []struct {
			Logprobs json.RawMessage `json:"logprobs"`
			Message  struct {
				Refusal json.RawMessage `json:"refusal"`
			} `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(body, &c); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(c.ID, "chatcmpl-") || len(c.ID) <= len("chatcmpl-") {
		t.Errorf("generated id %q", c.ID)
	}
	if c.Model != "upstream" {
		t.Errorf("model %q; want the IR's when the app's is unknown", c.Model)
	}
	if c.Created < before {
		t.Errorf("created %d; want now", c.Created)
	}
	if string(c.Choices[0].Logprobs) != "null" || string(c.Choices[0].Message.Refusal) != "null" {
		t.Errorf("logprobs %s refusal %s; want null", c.Choices[0].Logprobs, c.Choices[0].Message.Refusal)
	}
}

func TestDecodeResponseContentParts(t *testing.T) {
	r, err := DecodeResponse([]byte(`{"id":"x","choices":[{"index":0,"message":{"role":"assistant","content": [ {"type" : "text", "text" : "a\u00e9"} , null , { "type":"thinking","thinking":[{"type":"text","text":"no"}] }, {"type":"text","text":"b"} ] ,"reasoning":"r"},"finish_reason":"stop"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Parts) != 2 || r.Parts[0].Kind != ir.PartThinking || r.Parts[0].Text != "r" || r.Parts[1].Text != "aéb" {
		t.Errorf("parts %+v", r.Parts)
	}
}
