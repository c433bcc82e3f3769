package anthropic

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/detour-proxy/detour/internal/codectest"
	"github.com/detour-proxy/detour/rewrite/ir"
)

// jsonOf renders v for failure messages.
func jsonOf(v any) string {
	b, _ := json.MarshalIndent(v, "", "  ")
	return string(b)
}

func TestDecodeRequest(t *testing.T) {
	unsafeID := ir.SafeToolID("call|1") // what detour sent for an OpenAI id
	for _, tc := range []struct {
		name string
		body string
		want ir.Request
	}{
		{
			name: "string system and content",
			body: `{"model":"claude-sonnet-4-5","max_tokens":64,"system":"Be terse.","messages":[{"role":"user","content":"Hi"}]}`,
			want: ir.Request{Model: "claude-sonnet-4-5", MaxTokens: 64, System: []string{"Be terse."},
				Messages: []ir.Message{{Role: ir.RoleUser, Parts: []ir.Part{{Kind: ir.PartText, Text: "Hi"}}}}},
		},
		{
			name: "every system block in order",
			body: `{"model":"m","max_tokens":1,"system":[{"type":"text","text":"one","cache_control":{"type":"ephemeral"}},{"type":"text","text":"two"}],"messages":[{"role":"user","content":[{"type":"text","text":"Hi"}]}]}`,
			want: ir.Request{Model: "m", MaxTokens: 1, System: []string{"one", "two"},
				Messages: []ir.Message{{Role: ir.RoleUser, Parts: []ir.Part{{Kind: ir.PartText, Text: "Hi"}}}}},
		},
		{
			name: "images and documents",
			body: `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[
				{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBO"}},
				{"type":"image","source":{"type":"url","url":"https://example.com/a.jpg"}},
				{"type":"document","title":"r.pdf","source":{"type":"base64","media_type":"application/pdf","data":"JVBE"}},
				{"type":"document","source":{"type":"url","url":"https://example.com/r.pdf"}},
				{"type":"document","source":{"type":"text","media_type":"text/plain","data":"plain"}}]}]}`,
			want: ir.Request{Model: "m", MaxTokens: 1, Messages: []ir.Message{{Role: ir.RoleUser, Parts: []ir.Part{
				{Kind: ir.PartImage, Media: &ir.Media{MediaType: "image/png", Data: "iVBO"}},
				{Kind: ir.PartImage, Media: &ir.Media{URL: "https://example.com/a.jpg"}},
				{Kind: ir.PartDocument, Media: &ir.Media{MediaType: "application/pdf", Data: "JVBE", Filename: "r.pdf"}},
				{Kind: ir.PartDocument, Media: &ir.Media{URL: "https://example.com/r.pdf"}},
				{Kind: ir.PartDocument, Media: &ir.Media{MediaType: "text/plain", Data: "cGxhaW4="}},
			}}}},
		},
		{
			name: "tool round trip with thinking, ids mapped back",
			body: `{"model":"m","max_tokens":2048,"thinking":{"type":"enabled","budget_tokens":1024},
				"tools":[{"name":"get_weather","description":"Weather","input_schema":{"type":"object","properties":{"city":{"type":"string"}}}}],
				"tool_choice":{"type":"auto","disable_parallel_tool_use":true},
				"messages":[
				{"role":"user","content":"Weather in Paris?"},
				{"role":"assistant","content":[
					{"type":"thinking","thinking":"Need the tool.","signature":"sig1"},
					{"type":"redacted_thinking","data":"opaque"},
					{"type":"text","text":"Checking."},
					{"type":"tool_use","id":"` + unsafeID + `","name":"get_weather","input":{"city":"Paris"}},
					{"type":"tool_use","id":"toolu_2","name":"get_weather","input":"not an object"}]},
				{"role":"user","content":[
					{"type":"tool_result","tool_use_id":"` + unsafeID + `","content":"18C"},
					{"type":"tool_result","tool_use_id":"toolu_2","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}],"is_error":true},
					{"type":"tool_result","tool_use_id":"toolu_3"},
					{"type":"text","text":"Thanks"}]}]}`,
			want: ir.Request{Model: "m", MaxTokens: 2048, ThinkingBudget: 1024,
				Tools:             []ir.Tool{{Name: "get_weather", Description: "Weather", Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}}}`)}},
				ToolChoice:        &ir.ToolChoice{Mode: ir.ToolChoiceAuto},
				ParallelToolCalls: ptr(false),
				Messages: []ir.Message{
					{Role: ir.RoleUser, Parts: []ir.Part{{Kind: ir.PartText, Text: "Weather in Paris?"}}},
					{Role: ir.RoleAssistant, Parts: []ir.Part{
						{Kind: ir.PartThinking, Text: "Need the tool.", Signature: "sig1"},
						{Kind: ir.PartThinking, Signature: "opaque"},
						{Kind: ir.PartText, Text: "Checking."},
						{Kind: ir.PartToolCall, ToolCall: &ir.ToolCall{ID: "call|1", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Paris"}`)}},
						{Kind: ir.PartToolCall, ToolCall: &ir.ToolCall{ID: "toolu_2", Name: "get_weather", Arguments: json.RawMessage(`{}`)}},
					}},
					{Role: ir.RoleUser, Parts: []ir.Part{
						{Kind: ir.PartToolResult, ToolResult: &ir.ToolResult{CallID: "call|1", Content: "18C"}},
						{Kind: ir.PartToolResult, ToolResult: &ir.ToolResult{CallID: "toolu_2", Content: "a\nb", IsError: true}},
						{Kind: ir.PartToolResult, ToolResult: &ir.ToolResult{CallID: "toolu_3"}},
						{Kind: ir.PartText, Text: "Thanks"},
					}},
				}},
		},
		{
			name: "sampling, stop, stream, metadata",
			body: `{"model":"m","max_tokens":10,"temperature":0.5,"top_p":0.9,"top_k":40,"stop_sequences":["END"],"stream":true,"metadata":{"user_id":"u-1"},"messages":[{"role":"user","content":"x"}]}`,
			want: ir.Request{Model: "m", MaxTokens: 10, Temperature: ptr(0.5), TopP: ptr(0.9), TopK: ptr(40), Stop: []string{"END"}, Stream: true, User: "u-1",
				Messages: []ir.Message{{Role: ir.RoleUser, Parts: []ir.Part{{Kind: ir.PartText, Text: "x"}}}}},
		},
		{
			name: "tool choices",
			body: `{"model":"m","max_tokens":1,"tool_choice":{"type":"tool","name":"f"},"messages":[{"role":"user","content":"x"}]}`,
			want: ir.Request{Model: "m", MaxTokens: 1, ToolChoice: &ir.ToolChoice{Mode: ir.ToolChoiceTool, Name: "f"},
				Messages: []ir.Message{{Role: ir.RoleUser, Parts: []ir.Part{{Kind: ir.PartText, Text: "x"}}}}},
		},
		{
			name: "adaptive thinking and structured output",
			body: `{"model":"m","max_tokens":1,"thinking":{"type":"adaptive"},"output_config":{"effort":"max","format":{"type":"json_schema","schema":{"type":"object"}}},"messages":[{"role":"user","content":"x"}]}`,
			want: ir.Request{Model: "m", MaxTokens: 1, ReasoningEffort: "high",
				ResponseFormat: &ir.ResponseFormat{Type: "json_schema", Name: "response", Schema: json.RawMessage(`{"type":"object"}`), Strict: true},
				Messages:       []ir.Message{{Role: ir.RoleUser, Parts: []ir.Part{{Kind: ir.PartText, Text: "x"}}}}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := DecodeRequest([]byte(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(*got, tc.want) {
				t.Errorf("got %s\nwant %s", jsonOf(got), jsonOf(tc.want))
			}
		})
	}
}

// TestDecodeRequestChoices covers the remaining tool_choice types.
func TestDecodeRequestChoices(t *testing.T) {
	for typ, want := range map[string]ir.ToolChoiceMode{"auto": ir.ToolChoiceAuto, "any": ir.ToolChoiceRequired, "none": ir.ToolChoiceNone} {
		r, err := DecodeRequest([]byte(`{"model":"m","max_tokens":1,"tool_choice":{"type":"` + typ + `"},"messages":[{"role":"user","content":"x"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		if r.ToolChoice == nil || r.ToolChoice.Mode != want || r.ParallelToolCalls != nil {
			t.Errorf("tool_choice %s: got %+v, parallel %v; want %s", typ, r.ToolChoice, r.ParallelToolCalls, want)
		}
	}
}

func TestDecodeRequestRefuses(t *testing.T) {
	for _, tc := range []struct {
		name        string
		body        string
		unsupported bool
	}{
		{"not json", `{"model":`, false},
		{"system role", `{"model":"m","max_tokens":1,"messages":[{"role":"system","content":"x"}]}`, false},
		{"no content", `{"model":"m","max_tokens":1,"messages":[{"role":"user"}]}`, false},
		{"unknown tool_choice", `{"model":"m","max_tokens":1,"tool_choice":{"type":"maybe"},"messages":[{"role":"user","content":"x"}]}`, false},
		{"tool_choice tool without a name", `{"model":"m","max_tokens":1,"tool_choice":{"type":"tool"},"messages":[{"role":"user","content":"x"}]}`, false},
		{"server tool", `{"model":"m","max_tokens":1,"tools":[{"type":"web_search_20250305","name":"web_search"}],"messages":[{"role":"user","content":"x"}]}`, true},
		{"file image", `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"file","file_id":"f"}}]}]}`, true},
		{"image in tool result", `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"x"}}]}]}]}`, true},
		{"search result block", `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"search_result","source":"s","title":"t","content":[]}]}]}`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeRequest([]byte(tc.body))
			if err == nil {
				t.Fatal("no error")
			}
			var u *ir.UnsupportedError
			if errors.As(err, &u) != tc.unsupported {
				t.Errorf("error %v: UnsupportedError %v, want %v", err, !tc.unsupported, tc.unsupported)
			}
		})
	}
}

// richRequest is a tool round trip as an OpenAI app sends it, with the
// things Anthropic refuses: empty assistant text, ids outside its charset,
// non-object arguments, results in separate tool messages, temperature
// above 1, blank stop sequences, a seed.
func richRequest() *ir.Request {
	return &ir.Request{
		Model:  "gpt-4o",
		System: []string{"You are terse.", "  ", "Answer in French."},
		Messages: []ir.Message{
			{Role: ir.RoleUser, Parts: []ir.Part{
				{Kind: ir.PartText, Text: "Weather in Paris and Lyon?"},
				{Kind: ir.PartImage, Media: &ir.Media{URL: "data:image/png;base64,iVBORw0KGgo=", Detail: "low"}},
			}},
			{Role: ir.RoleAssistant, Parts: []ir.Part{
				{Kind: ir.PartText, Text: ""},
				{Kind: ir.PartToolCall, ToolCall: &ir.ToolCall{ID: "call:abc/1", Name: "get_weather", Arguments: json.RawMessage(`{"city": "Paris"}`)}},
				{Kind: ir.PartToolCall, ToolCall: &ir.ToolCall{ID: "call_2", Name: "get_weather", Arguments: json.RawMessage(`"Lyon"`)}},
			}},
			{Role: ir.RoleTool, Parts: []ir.Part{{Kind: ir.PartToolResult, ToolResult: &ir.ToolResult{CallID: "call:abc/1", Content: `{"temp":18}`, IsJSON: true}}}},
			{Role: ir.RoleTool, Parts: []ir.Part{{Kind: ir.PartToolResult, ToolResult: &ir.ToolResult{CallID: "call_2", Content: "city not found", IsError: true}}}},
			{Role: ir.RoleUser, Parts: []ir.Part{{Kind: ir.PartText, Text: "Merci. Et demain ?"}}},
		},
		Tools:             []ir.Tool{{Name: "get_weather", Description: "Current weather", Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)}},
		ToolChoice:        &ir.ToolChoice{Mode: ir.ToolChoiceRequired},
		ParallelToolCalls: ptr(false),
		Temperature:       ptr(1.5),
		TopP:              ptr(0.9),
		Stop:              []string{"END", " ", ""},
		Seed:              ptr[int64](7),
		User:              "user-42",
		Stream:            true,
	}
}

func TestEncodeRequestGolden(t *testing.T) {
	for _, tc := range []struct {
		name      string
		req       *ir.Request
		opts      ir.EncodeOptions
		wantNotes []string
	}{
		{
			name: "request_tool_round_trip",
			req:  richRequest(),
			opts: ir.EncodeOptions{Model: "claude-sonnet-4-5", DefaultMaxTokens: 1000},
			wantNotes: []string{
				`tool call "get_weather" arguments are not a JSON object: sent as {}`,
				"temperature clamped from 1.5 to 1",
				`blank stop sequence " " removed`,
				`blank stop sequence "" removed`,
				"seed dropped: Anthropic has none",
			},
		},
		{
			name: "request_json_schema",
			req: &ir.Request{
				Messages:       []ir.Message{{Role: ir.RoleUser, Parts: []ir.Part{{Kind: ir.PartText, Text: "List two colours."}}}},
				ResponseFormat: &ir.ResponseFormat{Type: "json_schema", Name: "colours", Schema: json.RawMessage(`{"type":"object","properties":{"colours":{"type":"array","items":{"type":"string"}}}}`)},
				MaxTokens:      300,
			},
			opts: ir.EncodeOptions{Model: "claude-haiku-4-5"},
		},
		{
			name: "request_reasoning_json_mode",
			req: &ir.Request{
				Messages:        []ir.Message{{Role: ir.RoleUser, Parts: []ir.Part{{Kind: ir.PartText, Text: "Think, then answer in JSON."}}}},
				ResponseFormat:  &ir.ResponseFormat{Type: "json_object"},
				ReasoningEffort: "high",
				MaxTokens:       1000,
				Temperature:     ptr(0.2),
				TopK:            ptr(5),
			},
			opts: ir.EncodeOptions{Model: "claude-sonnet-4-5"},
			wantNotes: []string{
				"JSON mode: json_tool_call offered, not forced, because thinking is on",
				"temperature 0.2 dropped: thinking is on",
				"top_k dropped: thinking is on",
				"max_tokens raised from 1000 to 5096 above the thinking budget 4096",
			},
		},
		{
			name: "request_thinking_replay",
			req: &ir.Request{
				ThinkingBudget: 2000,
				Messages: []ir.Message{
					{Role: ir.RoleUser, Parts: []ir.Part{{Kind: ir.PartText, Text: "Weather?"}}},
					{Role: ir.RoleAssistant, Parts: []ir.Part{
						{Kind: ir.PartThinking, Text: "Use the tool.", Signature: "c2ln"},
						{Kind: ir.PartThinking, Signature: "cmVkYWN0ZWQ="},
						{Kind: ir.PartToolCall, ToolCall: &ir.ToolCall{ID: "toolu_1", Name: "get_weather"}},
					}},
					{Role: ir.RoleUser, Parts: []ir.Part{{Kind: ir.PartToolResult, ToolResult: &ir.ToolResult{CallID: "toolu_1", Content: "Sunny"}}}},
				},
				Tools: []ir.Tool{{Name: "get_weather"}},
			},
			opts: ir.EncodeOptions{Model: "claude-sonnet-4-5", DefaultMaxTokens: 8000},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var notes noteList
			tc.opts.Notes = notes.add
			got, err := EncodeRequest(tc.req, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			golden(t, tc.name+".json", got)
			if !slices.Equal(notes, tc.wantNotes) {
				t.Errorf("notes:\n%q\nwant:\n%q", notes, tc.wantNotes)
			}
			checkRequestRules(t, got)
		})
	}
}

// checkRequestRules asserts the rules of docs/vendors.md#translation-pitfalls that the API
// enforces, on an encoded request: alternating user/assistant turns, no
// blank text, each tool_use answered in the very next user turn with the
// results first, ids in the charset, object inputs, budget below max_tokens.
func checkRequestRules(t *testing.T, body []byte) { checkRequestRulesPairing(t, body, true) }

// checkRequestRulesPairing is checkRequestRules; pairing false skips the
// check that every tool_use is answered, which the encoder cannot make
// true of a history that never answered a call.
func checkRequestRulesPairing(t *testing.T, body []byte, pairing bool) {
	t.Helper()
	var req struct {
		MaxTokens int `json:"max_tokens"`
		Thinking  *struct {
			BudgetTokens int `json:"budget_tokens"`
		} `json:"thinking"`
		System   []inBlock `json:"system"`
		Messages []struct {
			Role    string    `json:"role"`
			Content []inBlock `json:"content"`
		} `json:"messages"`
		Temperature *float64 `json:"temperature"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatal(err)
	}
	if req.MaxTokens <= 0 {
		t.Error("max_tokens not set")
	}
	if req.Thinking != nil && req.Thinking.BudgetTokens >= req.MaxTokens {
		t.Errorf("budget %d not below max_tokens %d", req.Thinking.BudgetTokens, req.MaxTokens)
	}
	if tt := req.Temperature; tt != nil && (*tt < 0 || *tt > 1) {
		t.Errorf("temperature %v", *tt)
	}
	for _, b := range req.System {
		if isBlank(b.Text) {
			t.Error("blank system block")
		}
	}
	var pending []string // tool_use ids awaiting results
	for i, m := range req.Messages {
		if i > 0 && m.Role == req.Messages[i-1].Role {
			t.Errorf("messages %d and %d are both %s", i-1, i, m.Role)
		}
		if m.Role != "user" && m.Role != "assistant" {
			t.Errorf("role %q", m.Role)
		}
		if len(m.Content) == 0 {
			t.Errorf("message %d is empty", i)
		}
		var results []string
		otherSeen := false
		for _, b := range m.Content {
			switch b.Type {
			case "text":
				if isBlank(b.Text) {
					t.Errorf("message %d: blank text block", i)
				}
				otherSeen = true
			case "tool_use":
				if !codectest.AnthropicID(b.ID) || !isObject(b.Input) {
					t.Errorf("tool_use id %q input %s", b.ID, b.Input)
				}
			case "tool_result":
				if otherSeen {
					t.Errorf("message %d: tool_result after other blocks", i)
				}
				if !codectest.AnthropicID(b.ToolUseID) {
					t.Errorf("tool_result id %q", b.ToolUseID)
				}
				results = append(results, b.ToolUseID)
			default:
				otherSeen = true
			}
		}
		if len(pending) > 0 && pairing {
			for _, id := range pending {
				if !slices.Contains(results, id) {
					t.Errorf("tool_use %s not answered in message %d", id, i)
				}
			}
			pending = nil
		}
		if m.Role == "assistant" {
			for _, b := range m.Content {
				if b.Type == "tool_use" {
					pending = append(pending, b.ID)
				}
			}
		}
	}
}

func TestEncodeRequestRules(t *testing.T) {
	user := func(parts ...ir.Part) ir.Message { return ir.Message{Role: ir.RoleUser, Parts: parts} }
	text := func(s string) ir.Part { return ir.Part{Kind: ir.PartText, Text: s} }
	hi := []ir.Message{user(text("Hi"))}
	for _, tc := range []struct {
		name      string
		req       ir.Request
		opts      ir.EncodeOptions
		want      []string // substrings of the body
		wantNot   []string
		wantNotes []string
	}{
		{
			name: "default max_tokens",
			req:  ir.Request{Messages: hi},
			want: []string{`"max_tokens":4096`},
		},
		{
			name: "policy max_tokens",
			req:  ir.Request{Messages: hi},
			opts: ir.EncodeOptions{DefaultMaxTokens: 777},
			want: []string{`"max_tokens":777`},
		},
		{
			name: "model from options, else request",
			req:  ir.Request{Model: "gpt-4o", Messages: hi},
			opts: ir.EncodeOptions{Model: "claude-x"},
			want: []string{`"model":"claude-x"`},
		},
		{
			name:      "effort to budget",
			req:       ir.Request{Messages: hi, ReasoningEffort: "medium", MaxTokens: 10000},
			want:      []string{`"thinking":{"type":"enabled","budget_tokens":2048}`, `"max_tokens":10000`},
			wantNotes: nil,
		},
		{
			name:      "small budget raised to the minimum",
			req:       ir.Request{Messages: hi, ThinkingBudget: 100},
			want:      []string{`"budget_tokens":1024`},
			wantNotes: []string{"thinking budget raised from 100 to 1024 (the API minimum)"},
		},
		{
			name:      "temperature below zero",
			req:       ir.Request{Messages: hi, Temperature: ptr(-0.5)},
			want:      []string{`"temperature":0`},
			wantNotes: []string{"temperature clamped from -0.5 to 0"},
		},
		{
			name: "top_k passed",
			req:  ir.Request{Messages: hi, TopK: ptr(7), TopP: ptr(0.5), Temperature: ptr(0.7)},
			want: []string{`"top_k":7`, `"top_p":0.5`, `"temperature":0.7`},
		},
		{
			name:      "forced tool beats thinking",
			req:       ir.Request{Messages: hi, ReasoningEffort: "low", Tools: []ir.Tool{{Name: "f"}}, ToolChoice: &ir.ToolChoice{Mode: ir.ToolChoiceTool, Name: "f"}},
			want:      []string{`"tool_choice":{"type":"tool","name":"f"}`},
			wantNot:   []string{`"thinking"`},
			wantNotes: []string{"thinking disabled: tool_choice forces a tool"},
		},
		{
			name: "tool_choice none",
			req:  ir.Request{Messages: hi, Tools: []ir.Tool{{Name: "f"}}, ToolChoice: &ir.ToolChoice{Mode: ir.ToolChoiceNone}, ParallelToolCalls: ptr(false)},
			want: []string{`"tool_choice":{"type":"none"}`},
		},
		{
			name: "parallel off without a choice",
			req:  ir.Request{Messages: hi, Tools: []ir.Tool{{Name: "f"}}, ParallelToolCalls: ptr(false)},
			want: []string{`"tool_choice":{"type":"auto","disable_parallel_tool_use":true}`},
		},
		{
			name:    "tool_choice without tools is not sent",
			req:     ir.Request{Messages: hi, ToolChoice: &ir.ToolChoice{Mode: ir.ToolChoiceRequired}},
			wantNot: []string{`tool_choice`, `"tools"`},
		},
		{
			name: "json_object forces the json tool",
			req:  ir.Request{Messages: hi, ResponseFormat: &ir.ResponseFormat{Type: "json_object"}},
			want: []string{`"name":"json_tool_call"`, `"input_schema":{"type":"object"}`, `"tool_choice":{"type":"tool","name":"json_tool_call"}`},
		},
		{
			name: "json mode with the app's tools: some tool must be called",
			req:  ir.Request{Messages: hi, Tools: []ir.Tool{{Name: "f"}}, ResponseFormat: &ir.ResponseFormat{Type: "json_object"}},
			want: []string{`{"name":"f","input_schema":{"type":"object"}}`, `"name":"json_tool_call"`, `"tool_choice":{"type":"any"}`},
		},
		{
			name: "history with tools but none declared",
			req: ir.Request{Messages: []ir.Message{
				user(text("Hi")),
				{Role: ir.RoleAssistant, Parts: []ir.Part{{Kind: ir.PartToolCall, ToolCall: &ir.ToolCall{ID: "a", Name: "f", Arguments: json.RawMessage(`{}`)}}}},
				{Role: ir.RoleTool, Parts: []ir.Part{{Kind: ir.PartToolResult, ToolResult: &ir.ToolResult{CallID: "a", Content: "ok"}}}},
			}},
			want:      []string{`"name":"detour_placeholder_tool"`, `"tool_choice":{"type":"none"}`, `{"type":"tool_result","tool_use_id":"a","content":"ok"}`},
			wantNotes: []string{"placeholder tool declared (tool_choice none): the history has tool calls but the request declares no tools"},
		},
		{
			name: "thinking off when the last tool turn has no thinking to replay",
			req: ir.Request{ReasoningEffort: "high", Tools: []ir.Tool{{Name: "f"}}, Messages: []ir.Message{
				user(text("Hi")),
				{Role: ir.RoleAssistant, Parts: []ir.Part{{Kind: ir.PartToolCall, ToolCall: &ir.ToolCall{ID: "a", Name: "f"}}}},
				{Role: ir.RoleTool, Parts: []ir.Part{{Kind: ir.PartToolResult, ToolResult: &ir.ToolResult{CallID: "a", Content: "ok"}}}},
			}},
			wantNot:   []string{`"thinking"`},
			wantNotes: []string{"thinking disabled: the last assistant tool-use turn has no thinking block to replay"},
		},
		{
			name: "unsigned thinking dropped, results first, prefill trimmed",
			req: ir.Request{Messages: []ir.Message{
				user(text("Hi")),
				{Role: ir.RoleAssistant, Parts: []ir.Part{{Kind: ir.PartThinking, Text: "hmm"}, {Kind: ir.PartToolCall, ToolCall: &ir.ToolCall{ID: "a", Name: "f"}}}},
				user(text("wait")),
				{Role: ir.RoleTool, Parts: []ir.Part{{Kind: ir.PartToolResult, ToolResult: &ir.ToolResult{CallID: "a"}}}},
				{Role: ir.RoleAssistant, Parts: []ir.Part{{Kind: ir.PartText, Text: "The answer is "}}},
			}, Tools: []ir.Tool{{Name: "f"}}},
			want: []string{
				`{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"f","input":{}}]}`,
				`{"role":"user","content":[{"type":"tool_result","tool_use_id":"a"},{"type":"text","text":"wait"}]}`,
				`{"role":"assistant","content":[{"type":"text","text":"The answer is"}]}`,
			},
			wantNotes: []string{"thinking without a signature dropped"},
		},
		{
			name: "empty message dropped and neighbours merged",
			req: ir.Request{Messages: []ir.Message{
				user(text("a")),
				{Role: ir.RoleAssistant, Parts: []ir.Part{{Kind: ir.PartText, Text: "  "}}},
				user(text("b")),
			}},
			want:      []string{`"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}]`},
			wantNotes: []string{"message 1 dropped: nothing Anthropic accepts in it"},
		},
		{
			name: "media sources",
			req: ir.Request{Messages: []ir.Message{user(
				ir.Part{Kind: ir.PartImage, Media: &ir.Media{URL: "https://example.com/a.png"}},
				ir.Part{Kind: ir.PartImage, Media: &ir.Media{MediaType: "image/JPEG", Data: "/9j/"}},
				ir.Part{Kind: ir.PartDocument, Media: &ir.Media{MediaType: "application/pdf", Data: "JVBE", Filename: "r.pdf"}},
				ir.Part{Kind: ir.PartDocument, Media: &ir.Media{MediaType: "text/plain", Data: "aGk="}},
				ir.Part{Kind: ir.PartDocument, Media: &ir.Media{URL: "https://example.com/r.pdf"}},
			)}},
			want: []string{
				`{"type":"image","source":{"type":"url","url":"https://example.com/a.png"}}`,
				`{"type":"image","source":{"type":"base64","media_type":"image/jpeg","data":"/9j/"}}`,
				`{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"JVBE"},"title":"r.pdf"}`,
				`{"type":"document","source":{"type":"text","media_type":"text/plain","data":"hi"}}`,
				`{"type":"document","source":{"type":"url","url":"https://example.com/r.pdf"}}`,
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var notes noteList
			tc.opts.Notes = notes.add
			body, err := EncodeRequest(&tc.req, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(string(body), w) {
					t.Errorf("body lacks %s\n%s", w, body)
				}
			}
			for _, w := range tc.wantNot {
				if strings.Contains(string(body), w) {
					t.Errorf("body has %s\n%s", w, body)
				}
			}
			if !slices.Equal(notes, tc.wantNotes) {
				t.Errorf("notes %q, want %q", notes, tc.wantNotes)
			}
			checkRequestRules(t, body)
		})
	}
}

func TestEncodeRequestUnsupported(t *testing.T) {
	hi := ir.Message{Role: ir.RoleUser, Parts: []ir.Part{{Kind: ir.PartText, Text: "Hi"}}}
	for _, tc := range []struct {
		name string
		req  ir.Request
		what string
	}{
		{"n > 1", ir.Request{N: 2, Messages: []ir.Message{hi}}, "n > 1"},
		{"no messages", ir.Request{}, "a request without messages"},
		{"gs image", ir.Request{Messages: []ir.Message{{Role: ir.RoleUser, Parts: []ir.Part{{Kind: ir.PartImage, Media: &ir.Media{URL: "gs://b/o.png"}}}}}}, `image URL "gs"`},
		{"tiff image", ir.Request{Messages: []ir.Message{{Role: ir.RoleUser, Parts: []ir.Part{{Kind: ir.PartImage, Media: &ir.Media{MediaType: "image/tiff", Data: "AA"}}}}}}, `image type "image/tiff"`},
		{"docx", ir.Request{Messages: []ir.Message{{Role: ir.RoleUser, Parts: []ir.Part{{Kind: ir.PartDocument, Media: &ir.Media{MediaType: "application/msword", Data: "AA"}}}}}}, `document type "application/msword"`},
		{"image from the assistant", ir.Request{Messages: []ir.Message{hi, {Role: ir.RoleAssistant, Parts: []ir.Part{{Kind: ir.PartImage, Media: &ir.Media{URL: "https://x/y.png"}}}}}}, "image in an assistant turn"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := EncodeRequest(&tc.req, ir.EncodeOptions{})
			var u *ir.UnsupportedError
			if !errors.As(err, &u) || u.What != tc.what {
				t.Errorf("error %v, want UnsupportedError %q", err, tc.what)
			}
		})
	}
}

// TestToolIDsOutsideTheCharset: ids Anthropic refuses go out through
// SafeToolID, tool_use and tool_result alike, and come back unchanged.
func TestToolIDsOutsideTheCharset(t *testing.T) {
	for _, id := range []string{"call_ok-1", "call:abc/1", "fc.1 2", "ünï", "dtr_looks_encoded", "a|b"} {
		req := &ir.Request{Tools: []ir.Tool{{Name: "f"}}, Messages: []ir.Message{
			{Role: ir.RoleUser, Parts: []ir.Part{{Kind: ir.PartText, Text: "go"}}},
			{Role: ir.RoleAssistant, Parts: []ir.Part{{Kind: ir.PartToolCall, ToolCall: &ir.ToolCall{ID: id, Name: "f", Arguments: json.RawMessage(`{}`)}}}},
			{Role: ir.RoleTool, Parts: []ir.Part{{Kind: ir.PartToolResult, ToolResult: &ir.ToolResult{CallID: id, Content: "ok"}}}},
		}}
		body, err := EncodeRequest(req, ir.EncodeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		checkRequestRules(t, body)
		back, err := DecodeRequest(body)
		if err != nil {
			t.Fatal(err)
		}
		if got := back.Messages[1].Parts[0].ToolCall.ID; got != id {
			t.Errorf("tool_use id %q came back as %q", id, got)
		}
		if got := back.Messages[2].Parts[0].ToolResult.CallID; got != id {
			t.Errorf("tool_result id %q came back as %q", id, got)
		}
		// Through a response too: the app's next turn echoes what it got.
		resp, err := EncodeResponse(&ir.Response{Parts: []ir.Part{{Kind: ir.PartToolCall, ToolCall: &ir.ToolCall{ID: id, Name: "f"}}}}, "m")
		if err != nil {
			t.Fatal(err)
		}
		dr, err := DecodeResponse(resp)
		if err != nil {
			t.Fatal(err)
		}
		if got := dr.Parts[0].ToolCall.ID; got != id {
			t.Errorf("response tool_use id %q came back as %q", id, got)
		}
	}
}

// TestRequestRoundTrip: what Anthropic can carry survives
// Decode(Encode(r)) unchanged.
func TestRequestRoundTrip(t *testing.T) {
	r := &ir.Request{
		Model:  "claude-sonnet-4-5",
		System: []string{"one", "two"},
		Messages: []ir.Message{
			{Role: ir.RoleUser, Parts: []ir.Part{
				{Kind: ir.PartText, Text: "Weather? <b>&</b>"},
				{Kind: ir.PartImage, Media: &ir.Media{MediaType: "image/png", Data: "iVBO"}},
				{Kind: ir.PartImage, Media: &ir.Media{URL: "https://example.com/a.png"}},
				{Kind: ir.PartDocument, Media: &ir.Media{MediaType: "application/pdf", Data: "JVBE", Filename: "r.pdf"}},
				{Kind: ir.PartDocument, Media: &ir.Media{MediaType: "text/plain", Data: "aGk="}},
			}},
			{Role: ir.RoleAssistant, Parts: []ir.Part{
				{Kind: ir.PartThinking, Text: "think", Signature: "sig"},
				{Kind: ir.PartThinking, Signature: "redacted"},
				{Kind: ir.PartText, Text: "Checking."},
				{Kind: ir.PartToolCall, ToolCall: &ir.ToolCall{ID: "call:1", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Paris"}`)}},
			}},
			{Role: ir.RoleUser, Parts: []ir.Part{
				{Kind: ir.PartToolResult, ToolResult: &ir.ToolResult{CallID: "call:1", Content: "18C", IsError: true}},
				{Kind: ir.PartText, Text: "Thanks"},
			}},
		},
		Tools:             []ir.Tool{{Name: "get_weather", Description: "d", Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}}}`)}},
		ToolChoice:        &ir.ToolChoice{Mode: ir.ToolChoiceAuto},
		ParallelToolCalls: ptr(false),
		MaxTokens:         9000,
		TopP:              ptr(0.97),
		Stop:              []string{"END"},
		ThinkingBudget:    2048,
		Stream:            true,
		User:              "u",
	}
	body, err := EncodeRequest(r, ir.EncodeOptions{Model: "claude-sonnet-4-5", Notes: func(n string) { t.Errorf("unexpected note %q", n) }})
	if err != nil {
		t.Fatal(err)
	}
	back, err := DecodeRequest(body)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, r) {
		t.Errorf("round trip:\ngot  %s\nwant %s", jsonOf(back), jsonOf(r))
	}

	// Without thinking: temperature, top_k and every tool choice survive.
	for _, tc := range []*ir.ToolChoice{{Mode: ir.ToolChoiceRequired}, {Mode: ir.ToolChoiceNone}, {Mode: ir.ToolChoiceTool, Name: "f"}} {
		r := &ir.Request{Model: "m", MaxTokens: 5, Temperature: ptr(0.4), TopK: ptr(3), Tools: []ir.Tool{{Name: "f", Parameters: json.RawMessage(`{"type":"object"}`)}}, ToolChoice: tc,
			Messages: []ir.Message{{Role: ir.RoleUser, Parts: []ir.Part{{Kind: ir.PartText, Text: "x"}}}}}
		body, err := EncodeRequest(r, ir.EncodeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		back, err := DecodeRequest(body)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(back, r) {
			t.Errorf("round trip:\ngot  %s\nwant %s", jsonOf(back), jsonOf(r))
		}
	}
}
