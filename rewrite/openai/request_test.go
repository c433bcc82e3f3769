package openai

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/detour-proxy/detour/rewrite/ir"
)

func TestDecodeRequestFields(t *testing.T) {
	for _, tc := range []struct {
		name  string
		body  string
		check func(t *testing.T, r *ir.Request)
	}{
		{"system and developer prompts all kept in order",
			`{"messages":[{"role":"developer","content":"a"},{"role":"user","content":"q"},{"role":"system","content":[{"type":"text","text":"b"},{"type":"text","text":"c"}]}]}`,
			func(t *testing.T, r *ir.Request) {
				if strings.Join(r.System, "|") != "a|b|c" || len(r.Messages) != 1 {
					t.Errorf("system %q, %d messages", r.System, len(r.Messages))
				}
			}},
		{"max_completion_tokens wins over max_tokens",
			`{"messages":[],"max_tokens":10,"max_completion_tokens":20}`,
			func(t *testing.T, r *ir.Request) {
				if r.MaxTokens != 20 {
					t.Errorf("max tokens %d", r.MaxTokens)
				}
			}},
		{"legacy max_tokens",
			`{"messages":[],"max_tokens":10}`,
			func(t *testing.T, r *ir.Request) {
				if r.MaxTokens != 10 {
					t.Errorf("max tokens %d", r.MaxTokens)
				}
			}},
		{"stop as a string",
			`{"messages":[],"stop":"END"}`,
			func(t *testing.T, r *ir.Request) {
				if len(r.Stop) != 1 || r.Stop[0] != "END" {
					t.Errorf("stop %q", r.Stop)
				}
			}},
		{"stop as a list",
			`{"messages":[],"stop":["a","b"]}`,
			func(t *testing.T, r *ir.Request) {
				if strings.Join(r.Stop, ",") != "a,b" {
					t.Errorf("stop %q", r.Stop)
				}
			}},
		{"tool_choice strings",
			`{"messages":[],"tool_choice":"required"}`,
			func(t *testing.T, r *ir.Request) {
				if r.ToolChoice == nil || r.ToolChoice.Mode != ir.ToolChoiceRequired {
					t.Errorf("tool choice %+v", r.ToolChoice)
				}
			}},
		{"tool_choice null is unset",
			`{"messages":[],"tool_choice":null,"stop":null,"response_format":null}`,
			func(t *testing.T, r *ir.Request) {
				if r.ToolChoice != nil || r.Stop != nil || r.ResponseFormat != nil {
					t.Errorf("%+v", r)
				}
			}},
		{"response_format text is no format",
			`{"messages":[],"response_format":{"type":"text"}}`,
			func(t *testing.T, r *ir.Request) {
				if r.ResponseFormat != nil {
					t.Errorf("format %+v", r.ResponseFormat)
				}
			}},
		{"unparseable, empty and non-object arguments become {}",
			`{"messages":[{"role":"assistant","tool_calls":[
				{"id":"1","type":"function","function":{"name":"a","arguments":"{\"x\":"}},
				{"id":"2","type":"function","function":{"name":"b","arguments":""}},
				{"id":"3","type":"function","function":{"name":"c","arguments":"[1]"}},
				{"id":"4","type":"function","function":{"name":"d","arguments":" { \"k\" : 1 } "}}]}]}`,
			func(t *testing.T, r *ir.Request) {
				want := []string{`{}`, `{}`, `{}`, `{"k":1}`}
				for i, p := range r.Messages[0].Parts {
					if string(p.ToolCall.Arguments) != want[i] {
						t.Errorf("call %d arguments %s; want %s", i, p.ToolCall.Arguments, want[i])
					}
				}
			}},
		{"assistant content beside tool calls: empty text dropped, refusal kept as text",
			`{"messages":[{"role":"assistant","content":"","refusal":"no","tool_calls":[{"id":"1","type":"function","function":{"name":"a","arguments":"{}"}}]}]}`,
			func(t *testing.T, r *ir.Request) {
				p := r.Messages[0].Parts
				if len(p) != 2 || p[0].Kind != ir.PartText || p[0].Text != "no" || p[1].Kind != ir.PartToolCall {
					t.Errorf("parts %+v", p)
				}
			}},
		{"tool result named after the call it answers",
			`{"messages":[{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"get","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":"r"},{"role":"tool","tool_call_id":"unknown","content":"r2"}]}`,
			func(t *testing.T, r *ir.Request) {
				if got := r.Messages[1].Parts[0].ToolResult; got.Name != "get" || got.CallID != "c1" || got.Content != "r" {
					t.Errorf("result %+v", got)
				}
				if got := r.Messages[2].Parts[0].ToolResult; got.Name != "" || got.CallID != "unknown" {
					t.Errorf("result %+v", got)
				}
			}},
		{"data URI without base64 is encoded",
			`{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/svg+xml;charset=utf-8,%3Csvg%2F%3E"}}]}]}`,
			func(t *testing.T, r *ir.Request) {
				m := r.Messages[0].Parts[0].Media
				if m.MediaType != "image/svg+xml" || m.Data != "PHN2Zy8+" || m.URL != "" {
					t.Errorf("media %+v", m)
				}
			}},
		{"image_url as a bare string",
			`{"messages":[{"role":"user","content":[{"type":"image_url","image_url":"https://x/y.png"}]}]}`,
			func(t *testing.T, r *ir.Request) {
				if m := r.Messages[0].Parts[0].Media; m.URL != "https://x/y.png" {
					t.Errorf("media %+v", m)
				}
			}},
		{"file with bare base64 is a PDF",
			`{"messages":[{"role":"user","content":[{"type":"file","file":{"file_data":"JVBERi0=","filename":"x.pdf"}}]}]}`,
			func(t *testing.T, r *ir.Request) {
				p := r.Messages[0].Parts[0]
				if p.Kind != ir.PartDocument || p.Media.MediaType != "application/pdf" || p.Media.Data != "JVBERi0=" || p.Media.Filename != "x.pdf" {
					t.Errorf("part %+v media %+v", p, p.Media)
				}
			}},
		{"unknown fields are ignored",
			`{"messages":[],"logit_bias":{"1":2},"audio":{"voice":"x"},"store":true,"modalities":["text"]}`,
			func(*testing.T, *ir.Request) {}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := DecodeRequest([]byte(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, r)
		})
	}
}

func TestDecodeRequestErrors(t *testing.T) {
	for _, tc := range []struct {
		name        string
		body        string
		unsupported bool // *ir.UnsupportedError rather than a plain error
	}{
		{"invalid JSON", `{"messages":[`, false},
		{"not an object", `[]`, false},
		{"null", `null`, false},
		{"empty", ``, false},
		{"messages not a list", `{"messages":{}}`, false},
		{"temperature a string", `{"messages":[],"temperature":"hot"}`, false},
		{"content a number", `{"messages":[{"role":"user","content":5}]}`, false},
		{"stop a number", `{"messages":[],"stop":5}`, false},
		{"tool_choice unknown string", `{"messages":[],"tool_choice":"sometimes"}`, false},
		{"unknown role", `{"messages":[{"role":"robot","content":"x"}]}`, false},
		{"image in a system message", `{"messages":[{"role":"system","content":[{"type":"image_url","image_url":{"url":"https://x"}}]}]}`, false},
		{"image_url without url", `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{}}]}]}`, false},
		{"audio part", `{"messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"x","format":"wav"}}]}]}`, true},
		{"file_id", `{"messages":[{"role":"user","content":[{"type":"file","file":{"file_id":"file-1"}}]}]}`, true},
		{"custom tool", `{"messages":[],"tools":[{"type":"custom","custom":{"name":"x"}}]}`, true},
		{"allowed_tools choice", `{"messages":[],"tool_choice":{"type":"allowed_tools","allowed_tools":{}}}`, true},
		{"legacy function role", `{"messages":[{"role":"function","name":"f","content":"x"}]}`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := DecodeRequest([]byte(tc.body))
			if err == nil {
				t.Fatalf("no error; decoded %+v", r)
			}
			var ue *ir.UnsupportedError
			if errors.As(err, &ue) != tc.unsupported {
				t.Errorf("error %v (%T); want unsupported=%v", err, err, tc.unsupported)
			}
		})
	}
}

func TestEncodeRequestRules(t *testing.T) {
	text := func(s string) []ir.Message {
		return []ir.Message{{Role: ir.RoleUser, Parts: []ir.Part{{Kind: ir.PartText, Text: s}}}}
	}
	for _, tc := range []struct {
		name string
		req  ir.Request
		want []string // substrings of the body
		not  []string // must not appear
	}{
		{"model from the options", ir.Request{Model: "claude", Messages: text("x")},
			[]string{`"model":"gpt-x"`}, []string{"claude"}},
		{"stream forces include_usage", ir.Request{Stream: true, Messages: text("x")},
			[]string{`"stream":true,"stream_options":{"include_usage":true}`}, nil},
		{"no stream_options without stream", ir.Request{IncludeUsage: true, Messages: text("x")},
			nil, []string{"stream"}},
		{"budget 1024 is low", ir.Request{ThinkingBudget: 1024, Messages: text("x")},
			[]string{`"reasoning_effort":"low"`}, nil},
		{"budget 1025 is medium", ir.Request{ThinkingBudget: 1025, Messages: text("x")},
			[]string{`"reasoning_effort":"medium"`}, nil},
		{"budget 2049 is high", ir.Request{ThinkingBudget: 2049, Messages: text("x")},
			[]string{`"reasoning_effort":"high"`}, nil},
		{"an explicit effort wins over the budget", ir.Request{ReasoningEffort: "minimal", ThinkingBudget: 9000, Messages: text("x")},
			[]string{`"reasoning_effort":"minimal"`}, nil},
		{"a dynamic (negative) budget sets nothing", ir.Request{ThinkingBudget: -1, Messages: text("x")},
			nil, []string{"reasoning_effort"}},
		{"no null or empty fields", ir.Request{Messages: text("x")},
			nil, []string{"null", `""`, "[]", "{}", "tools", "tool_choice", "temperature", "max_completion_tokens", "n\":", "seed", "user"}},
		{"a tool-call-only assistant turn has no content", ir.Request{Messages: []ir.Message{{Role: ir.RoleAssistant, Parts: []ir.Part{
			{Kind: ir.PartThinking, Text: "t", Signature: "s"},
			{Kind: ir.PartToolCall, ToolCall: &ir.ToolCall{ID: "c", Name: "f"}},
		}}}},
			[]string{`{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]}`}, []string{"content", "thinking", `"t"`}},
		{"tool results come before the rest of a user turn", ir.Request{Messages: []ir.Message{{Role: ir.RoleUser, Parts: []ir.Part{
			{Kind: ir.PartText, Text: "and?"},
			{Kind: ir.PartToolResult, ToolResult: &ir.ToolResult{CallID: "c1", Content: "r1"}},
			{Kind: ir.PartToolResult, ToolResult: &ir.ToolResult{CallID: "c2", Content: "r2", IsJSON: true}},
		}}}},
			[]string{`[{"role":"tool","content":"r1","tool_call_id":"c1"},{"role":"tool","content":"r2","tool_call_id":"c2"},{"role":"user","content":"and?"}]`}, nil},
		{"temperature clamped to 2", ir.Request{Temperature: ptr(3.0), Messages: text("x")},
			[]string{`"temperature":2`}, nil},
		{"text is not HTML-escaped", ir.Request{Messages: text("<a & b>")},
			[]string{`"content":"<a & b>"`}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body, err := EncodeRequest(&tc.req, ir.EncodeOptions{Model: "gpt-x"})
			if err != nil {
				t.Fatal(err)
			}
			if !json.Valid(body) {
				t.Fatalf("invalid JSON %s", body)
			}
			s := strings.TrimPrefix(string(body), `{"model":"gpt-x","messages":[{"role":"user","content":"x"}]`)
			for _, w := range tc.want {
				if !strings.Contains(string(body), w) {
					t.Errorf("body %s lacks %s", body, w)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(s, n) {
					t.Errorf("body %s has %s", body, n)
				}
			}
		})
	}
}

func TestEncodeRequestUnsupported(t *testing.T) {
	for _, tc := range []struct {
		name string
		part ir.Part
	}{
		{"gs:// image", ir.Part{Kind: ir.PartImage, Media: &ir.Media{URL: "gs://bucket/a.png", MediaType: "image/png"}}},
		{"document by URL", ir.Part{Kind: ir.PartDocument, Media: &ir.Media{URL: "https://x/a.pdf"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &ir.Request{Messages: []ir.Message{{Role: ir.RoleUser, Parts: []ir.Part{{Kind: ir.PartText, Text: "x"}, tc.part}}}}
			_, err := EncodeRequest(r, ir.EncodeOptions{Model: "m"})
			var ue *ir.UnsupportedError
			if !errors.As(err, &ue) {
				t.Errorf("error %v; want *ir.UnsupportedError", err)
			} else if strings.Contains(ue.What, "bucket") {
				t.Errorf("error echoes the URL: %v", ue)
			}
		})
	}
}

// TestEncodeRequestShortensLongToolIDs: OpenAI refuses tool call ids over
// 40 characters; a longer id from another vendor is replaced by a stable
// stand-in, the same in the call and in the result that answers it.
func TestEncodeRequestShortensLongToolIDs(t *testing.T) {
	long := "call_" + strings.Repeat("x", 60)
	r := &ir.Request{Messages: []ir.Message{
		{Role: ir.RoleAssistant, Parts: []ir.Part{
			{Kind: ir.PartToolCall, ToolCall: &ir.ToolCall{ID: long, Name: "f"}},
			{Kind: ir.PartToolCall, ToolCall: &ir.ToolCall{ID: "short_1", Name: "g"}},
		}},
		{Role: ir.RoleUser, Parts: []ir.Part{
			{Kind: ir.PartToolResult, ToolResult: &ir.ToolResult{CallID: long, Content: "a"}},
			{Kind: ir.PartToolResult, ToolResult: &ir.ToolResult{CallID: "short_1", Content: "b"}},
		}},
	}}
	body, err := EncodeRequest(r, ir.EncodeOptions{Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		Messages []struct {
			ToolCallID string `json:"tool_call_id"`
			ToolCalls  []struct {
				ID string `json:"id"`
			} `json:"tool_calls"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &out); err != nil {
		t.Fatal(err)
	}
	call, result := out.Messages[0].ToolCalls[0].ID, out.Messages[1].ToolCallID
	if len(call) > maxToolIDLen || call != result || call == long {
		t.Errorf("long id sent as call %q, result %q", call, result)
	}
	if out.Messages[0].ToolCalls[1].ID != "short_1" || out.Messages[2].ToolCallID != "short_1" {
		t.Errorf("a short id was changed: %s", body)
	}
}
