package responses

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/detour-proxy/detour/rewrite/ir"
)

func TestDecodeRequestReadsEveryInputForm(t *testing.T) {
	t.Parallel()
	body := `{"model":"gpt-4.1","instructions":"Be brief.","store":true,
	 "input":[
	  {"role":"developer","content":"Answer in French."},
	  {"role":"user","content":[{"type":"input_text","text":"What is this?"},{"type":"input_image","image_url":"data:image/png;base64,iVBORw0KGgo=","detail":"low"}]},
	  {"type":"message","role":"assistant","content":[{"type":"output_text","text":"Let me check."}]},
	  {"type":"function_call","id":"fc_1","call_id":"call_1","name":"lookup","arguments":"{\"q\":\"x\"}"},
	  {"type":"function_call","id":"fc_2","call_id":"call_2","name":"lookup","arguments":"not json"},
	  {"type":"function_call_output","call_id":"call_1","output":"found"},
	  {"type":"function_call_output","call_id":"call_2","output":[{"type":"input_text","text":"a"},{"type":"input_text","text":"b"}]},
	  {"type":"reasoning","id":"rs_1","summary":[],"encrypted_content":"gAAA"}
	 ],
	 "tools":[{"type":"function","name":"lookup","description":"Look up","parameters":{"type":"object"},"strict":true}],
	 "tool_choice":{"type":"function","name":"lookup"},
	 "text":{"format":{"type":"json_schema","name":"answer","schema":{"type":"object"},"strict":true}},
	 "reasoning":{"effort":"minimal"},"max_output_tokens":300,"temperature":0.5,"stream":true}`
	r, err := DecodeRequest([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(r.System, "|"), "Be brief.|Answer in French."; got != want {
		t.Errorf("system %q; want %q", got, want)
	}
	if len(r.Messages) != 3 {
		t.Fatalf("messages %d; want 3 (user, assistant with text and two calls, tool results; nothing for reasoning): %+v", len(r.Messages), r.Messages)
	}
	if p := r.Messages[0].Parts[1]; p.Kind != ir.PartImage || p.Media.MediaType != "image/png" || p.Media.Data != "iVBORw0KGgo=" || p.Media.Detail != "low" {
		t.Errorf("image part %+v", p.Media)
	}
	a := r.Messages[1]
	if a.Role != ir.RoleAssistant || len(a.Parts) != 3 || a.Parts[1].ToolCall.ID != "call_1" || string(a.Parts[2].ToolCall.Arguments) != "{}" {
		t.Errorf("assistant turn %+v", a)
	}
	tr := r.Messages[2]
	if tr.Role != ir.RoleTool || len(tr.Parts) != 2 || tr.Parts[0].ToolResult.Name != "lookup" || tr.Parts[1].ToolResult.Content != "ab" {
		t.Errorf("tool turn %+v", tr)
	}
	if r.ToolChoice == nil || r.ToolChoice.Mode != ir.ToolChoiceTool || r.ToolChoice.Name != "lookup" {
		t.Errorf("tool choice %+v", r.ToolChoice)
	}
	if f := r.ResponseFormat; f == nil || f.Type != "json_schema" || f.Name != "answer" || !f.Strict || string(f.Schema) != `{"type":"object"}` {
		t.Errorf("response format %+v", f)
	}
	if r.ReasoningEffort != "minimal" || r.MaxTokens != 300 || *r.Temperature != 0.5 || !r.Stream || !r.IncludeUsage || !r.Tools[0].Strict {
		t.Errorf("request %+v", r)
	}
}

func TestDecodeRequestStringInput(t *testing.T) {
	t.Parallel()
	r, err := DecodeRequest([]byte(`{"model":"m","input":"hi"}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Messages) != 1 || r.Messages[0].Role != ir.RoleUser || r.Messages[0].Parts[0].Text != "hi" {
		t.Errorf("messages %+v", r.Messages)
	}
}

func TestDecodeRequestRefusesState(t *testing.T) {
	t.Parallel()
	for _, body := range []string{
		`{"model":"m","input":"hi","previous_response_id":"resp_1"}`,
		`{"model":"m","input":"hi","conversation":"conv_1"}`,
		`{"model":"m","input":"hi","conversation":{"id":"conv_1"}}`,
		`{"model":"m","input":"hi","background":true}`,
		`{"model":"m","input":[{"type":"item_reference","id":"msg_1"}]}`,
	} {
		_, err := DecodeRequest([]byte(body))
		var ue *ir.UnsupportedError
		if !errors.As(err, &ue) || !strings.Contains(ue.What, "OpenAI-shaped upstreams") {
			t.Errorf("%s: err %v; want an UnsupportedError naming the state", body, err)
		}
	}
	// store (true by default in the API) and store:false are both translated.
	for _, body := range []string{`{"model":"m","input":"hi","store":true}`, `{"model":"m","input":"hi","store":false}`, `{"model":"m","input":"hi","previous_response_id":null,"background":false}`} {
		if _, err := DecodeRequest([]byte(body)); err != nil {
			t.Errorf("%s: %v; want it translated", body, err)
		}
	}
}

func TestDecodeRequestRefusesBuiltInTools(t *testing.T) {
	t.Parallel()
	_, err := DecodeRequest([]byte(`{"model":"m","input":"hi","tools":[{"type":"web_search"}]}`))
	var ue *ir.UnsupportedError
	if !errors.As(err, &ue) {
		t.Errorf("err %v; want UnsupportedError", err)
	}
}

func TestEncodeRequestWritesResponsesItems(t *testing.T) {
	t.Parallel()
	temp := 0.2
	r := &ir.Request{
		Model:  "x",
		System: []string{"a", "b"},
		Messages: []ir.Message{
			{Role: ir.RoleUser, Parts: []ir.Part{{Kind: ir.PartText, Text: "hi"}, {Kind: ir.PartImage, Media: &ir.Media{URL: "https://x/y.png"}}}},
			{Role: ir.RoleAssistant, Parts: []ir.Part{{Kind: ir.PartThinking, Text: "hmm"}, {Kind: ir.PartText, Text: "calling"}, {Kind: ir.PartToolCall, ToolCall: &ir.ToolCall{ID: "c1", Name: "f", Arguments: json.RawMessage(`{"a":1}`)}}}},
			{Role: ir.RoleTool, Parts: []ir.Part{{Kind: ir.PartToolResult, ToolResult: &ir.ToolResult{CallID: "c1", Content: "ok"}}}},
		},
		Tools:          []ir.Tool{{Name: "f"}},
		ToolChoice:     &ir.ToolChoice{Mode: ir.ToolChoiceRequired},
		MaxTokens:      100,
		Temperature:    &temp,
		Stop:           []string{"x"},
		ResponseFormat: &ir.ResponseFormat{Type: "json_schema", Schema: json.RawMessage(`{"type":"object"}`)},
		ThinkingBudget: 2000,
		Stream:         true,
	}
	var notes []string
	b, err := EncodeRequest(r, ir.EncodeOptions{Model: "gpt-4.1", Notes: func(n string) { notes = append(notes, n) }})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"model":"gpt-4.1","input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"},{"type":"input_image","image_url":"https://x/y.png","detail":"auto"}]},{"type":"message","role":"assistant","content":[{"type":"output_text","text":"calling"}]},{"type":"function_call","call_id":"c1","name":"f","arguments":"{\"a\":1}"},{"type":"function_call_output","call_id":"c1","output":"ok"}],"instructions":"a\n\nb","tools":[{"type":"function","name":"f","parameters":{"type":"object","properties":{}},"strict":false}],"tool_choice":"required","max_output_tokens":100,"temperature":0.2,"text":{"format":{"type":"json_schema","name":"response","schema":{"type":"object"}}},"reasoning":{"effort":"medium"},"stream":true,"store":false}`
	if string(b) != want {
		t.Errorf("got  %s\nwant %s", b, want)
	}
	if len(notes) != 2 {
		t.Errorf("notes %q; want the dropped stop sequence and thinking", notes)
	}
	if _, err := EncodeRequest(&ir.Request{N: 2}, ir.EncodeOptions{}); err == nil {
		t.Error("n=2 encoded; want UnsupportedError")
	}
}
