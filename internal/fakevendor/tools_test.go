package fakevendor

import (
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/detour-proxy/detour/rewrite"
)

// Tool declarations of every shape: get_weather(city required, days) and
// get_time(tz, utc; nothing required).
const (
	openaiTools = `"tools":[` +
		`{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"}},"required":["city"]}}},` +
		`{"type":"function","function":{"name":"get_time","parameters":{"type":"object","properties":{"tz":{"type":"string"},"utc":{"type":"boolean"}}}}}]`
	anthropicTools = `"tools":[` +
		`{"name":"get_weather","input_schema":{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"}},"required":["city"]}},` +
		`{"name":"get_time","input_schema":{"type":"object","properties":{"tz":{"type":"string"},"utc":{"type":"boolean"}}}}]`
	geminiTools = `"tools":[{"functionDeclarations":[` +
		`{"name":"get_weather","parameters":{"type":"OBJECT","properties":{"city":{"type":"STRING"},"days":{"type":"INTEGER"}},"required":["city"]}},` +
		`{"name":"get_time","parametersJsonSchema":{"type":"object","properties":{"tz":{"type":"string"},"utc":{"type":"boolean"}}}}]}]`
)

const (
	weatherArgs = `{"city":"Paris"}`
	timeArgs    = `{"tz":"test","utc":true}`
)

// toolPath is the path of a request of shape (Gemini: its model endpoint).
func toolPath(shape rewrite.Shape, stream bool) string {
	switch shape {
	case rewrite.Anthropic:
		return "/v1/messages"
	case rewrite.Gemini:
		if stream {
			return "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
		}
		return "/v1beta/models/gemini-2.5-flash:generateContent"
	}
	return "/v1/chat/completions"
}

// toolBody is a request of shape declaring both tools, with extra fields
// (a leading comma each) and a first user turn.
func toolBody(shape rewrite.Shape, stream bool, extra string) string {
	switch shape {
	case rewrite.Anthropic:
		return `{"model":"claude-sonnet-4-5","max_tokens":64,"stream":` + strconv.FormatBool(stream) + `,` + anthropicTools + extra +
			`,"messages":[{"role":"user","content":"Weather in Paris?"}]}`
	case rewrite.Gemini:
		return `{` + geminiTools + extra + `,"contents":[{"role":"user","parts":[{"text":"Weather in Paris?"}]}]}`
	}
	return `{"model":"gpt-4o","stream":` + strconv.FormatBool(stream) + `,` + openaiTools + extra +
		`,"messages":[{"role":"user","content":"Weather in Paris?"}]}`
}

func TestToolArguments(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		schema string
		want   string
	}{
		{``, `{}`},
		{`null`, `{}`},
		{`{"type":"object"}`, `{}`},
		{`{"type":"object","properties":{}}`, `{}`},
		{`{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"}},"required":["city"]}`, `{"city":"Paris"}`},
		{`{"properties":{"location":{"type":"string"},"q":{"type":"string"},"n":{"type":"number"},"i":{"type":"integer"},"b":{"type":"boolean"},"a":{"type":"array","items":{"type":"string"}},"o":{"type":"object"}}}`,
			`{"a":[],"b":true,"i":1,"location":"Paris","n":1,"o":{},"q":"test"}`},
		// Gemini's OpenAPI types are upper case.
		{`{"type":"OBJECT","properties":{"City":{"type":"STRING"},"n":{"type":"NUMBER"},"ok":{"type":"BOOLEAN"}}}`, `{"City":"Paris","n":1,"ok":true}`},
		// Type lists take the first non-null type; no type is a string.
		{`{"properties":{"x":{"type":["null","integer"]},"y":{"type":"null"},"z":{"description":"?"}}}`, `{"x":1,"y":null,"z":"test"}`},
		// Required names without a property schema are strings.
		{`{"required":["location","other"]}`, `{"location":"Paris","other":"test"}`},
		// HTML characters stay as they are.
		{`{"properties":{"<b>":{"type":"string"}}}`, `{"<b>":"test"}`},
	} {
		if got := string(toolArguments(json.RawMessage(tc.schema))); got != tc.want {
			t.Errorf("toolArguments(%s) = %s; want %s", tc.schema, got, tc.want)
		}
	}
}

func TestSplitArgs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args string
		want []string
	}{
		{`{"city":"Paris"}`, []string{`{"city":`, `"Paris"}`}},
		{`{"tz":"test","utc":true}`, []string{`{"tz":`, `"test",`, `"utc":true}`}},
		{`{}`, []string{`{`, `}`}},
		{`{"a":[],"b":1}`, []string{`{"a":`, `[],`, `"b":1}`}},
		{`{"é":{}}`, []string{`{"é":`, `{}}`}},
	} {
		got := splitArgs(tc.args)
		if !reflect.DeepEqual(got, tc.want) || strings.Join(got, "") != tc.args {
			t.Errorf("splitArgs(%s) = %q; want %q", tc.args, got, tc.want)
		}
	}
}

// calledTools is the tool names and arguments of an answer body of shape,
// or its text when it calls none.
func calledTools(t *testing.T, shape rewrite.Shape, body []byte) (names []string, args []string, text string) {
	t.Helper()
	switch shape {
	case rewrite.OpenAI:
		var a struct {
			Choices []struct {
				Message struct {
					Content   *string `json:"content"`
					ToolCalls []struct {
						Function struct{ Name, Arguments string }
					} `json:"tool_calls"`
				} `json:"message"`
			} `json:"choices"`
		}
		if err := json.Unmarshal(body, &a); err != nil {
			t.Fatalf("%v: %s", err, body)
		}
		m := a.Choices[0].Message
		for _, c := range m.ToolCalls {
			names, args = append(names, c.Function.Name), append(args, c.Function.Arguments)
		}
		if m.Content != nil {
			text = *m.Content
		}
	case rewrite.Anthropic:
		var a struct {
			Content []struct {
				Type, Text, Name string
				Input            json.RawMessage
			} `json:"content"`
		}
		if err := json.Unmarshal(body, &a); err != nil {
			t.Fatalf("%v: %s", err, body)
		}
		for _, b := range a.Content {
			if b.Type == "tool_use" {
				names, args = append(names, b.Name), append(args, string(b.Input))
			}
			text += b.Text
		}
	case rewrite.Gemini:
		var a geminiToolAnswer
		if err := json.Unmarshal(body, &a); err != nil {
			t.Fatalf("%v: %s", err, body)
		}
		for _, p := range a.Candidates[0].Content.Parts {
			if p.FunctionCall != nil {
				names, args = append(names, p.FunctionCall.Name), append(args, string(p.FunctionCall.Args))
			}
			text += p.Text
		}
	}
	return names, args, text
}

// geminiToolAnswer is a GenerateContentResponse with function calls.
type geminiToolAnswer struct {
	Candidates []struct {
		Content struct {
			Role  string `json:"role"`
			Parts []struct {
				Text         string `json:"text"`
				FunctionCall *struct {
					ID   *string         `json:"id"`
					Name string          `json:"name"`
					Args json.RawMessage `json:"args"`
				} `json:"functionCall"`
				ThoughtSignature *string `json:"thoughtSignature"`
			} `json:"parts"`
		} `json:"content"`
		FinishReason string `json:"finishReason"`
	} `json:"candidates"`
	UsageMetadata struct {
		PromptTokenCount     int `json:"promptTokenCount"`
		CandidatesTokenCount int `json:"candidatesTokenCount"`
		TotalTokenCount      int `json:"totalTokenCount"`
	} `json:"usageMetadata"`
}

func TestToolChoiceAndParallel(t *testing.T) {
	t.Parallel()
	type want struct {
		names  string // called tools, comma-separated; "" for a text answer
		choice string // Recorded.ToolChoice
	}
	for _, tc := range []struct {
		name     string
		shape    rewrite.Shape
		parallel bool // Options.ParallelTools
		extra    string
		want     want
	}{
		{"openai default", rewrite.OpenAI, false, ``, want{"get_weather", ""}},
		{"openai auto parallel", rewrite.OpenAI, true, `,"tool_choice":"auto"`, want{"get_weather,get_time", "auto"}},
		{"openai required", rewrite.OpenAI, false, `,"tool_choice":"required"`, want{"get_weather", "required"}},
		{"openai none", rewrite.OpenAI, true, `,"tool_choice":"none"`, want{"", "none"}},
		{"openai forced", rewrite.OpenAI, true, `,"tool_choice":{"type":"function","function":{"name":"get_time"}}`, want{"get_time", "get_time"}},
		{"openai forced unknown", rewrite.OpenAI, false, `,"tool_choice":{"type":"function","function":{"name":"nope"}}`, want{"get_weather", "nope"}},
		{"openai parallel off", rewrite.OpenAI, true, `,"parallel_tool_calls":false`, want{"get_weather", ""}},
		{"openai parallel on", rewrite.OpenAI, true, `,"parallel_tool_calls":true`, want{"get_weather,get_time", ""}},
		{"anthropic default", rewrite.Anthropic, false, ``, want{"get_weather", ""}},
		{"anthropic parallel", rewrite.Anthropic, true, ``, want{"get_weather,get_time", ""}},
		{"anthropic any", rewrite.Anthropic, true, `,"tool_choice":{"type":"any"}`, want{"get_weather,get_time", "required"}},
		{"anthropic disable parallel", rewrite.Anthropic, true, `,"tool_choice":{"type":"auto","disable_parallel_tool_use":true}`, want{"get_weather", "auto"}},
		{"anthropic tool", rewrite.Anthropic, true, `,"tool_choice":{"type":"tool","name":"get_time"}`, want{"get_time", "get_time"}},
		{"anthropic none", rewrite.Anthropic, false, `,"tool_choice":{"type":"none"}`, want{"", "none"}},
		{"gemini default", rewrite.Gemini, false, ``, want{"get_weather", ""}},
		{"gemini parallel", rewrite.Gemini, true, ``, want{"get_weather,get_time", ""}},
		{"gemini auto", rewrite.Gemini, false, `,"toolConfig":{"functionCallingConfig":{"mode":"AUTO"}}`, want{"get_weather", "auto"}},
		{"gemini any", rewrite.Gemini, true, `,"toolConfig":{"functionCallingConfig":{"mode":"ANY"}}`, want{"get_weather,get_time", "required"}},
		{"gemini any one name", rewrite.Gemini, true, `,"toolConfig":{"functionCallingConfig":{"mode":"ANY","allowedFunctionNames":["get_time"]}}`, want{"get_time", "get_time"}},
		{"gemini any two names", rewrite.Gemini, false, `,"toolConfig":{"functionCallingConfig":{"mode":"ANY","allowedFunctionNames":["get_time","get_weather"]}}`, want{"get_weather", "required"}},
		{"gemini none", rewrite.Gemini, true, `,"toolConfig":{"functionCallingConfig":{"mode":"NONE"}}`, want{"", "none"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, srv := serve(t, tc.shape, Options{Name: "alpha", ParallelTools: tc.parallel})
			got := mustPost(t, srv.URL+toolPath(tc.shape, false), toolBody(tc.shape, false, tc.extra))
			if got.status != 200 {
				t.Fatalf("status %d: %s", got.status, got.body)
			}
			names, args, text := calledTools(t, tc.shape, got.body)
			if strings.Join(names, ",") != tc.want.names {
				t.Errorf("called %q; want %q\n%s", names, tc.want.names, got.body)
			}
			for i, n := range names {
				want := map[string]string{"get_weather": weatherArgs, "get_time": timeArgs}[n]
				if args[i] != want {
					t.Errorf("%s arguments %s; want %s", n, args[i], want)
				}
			}
			if tc.want.names == "" && text != "Hello from alpha." {
				t.Errorf("text = %q; want the vendor's text", text)
			}
			r := v.Requests()[0]
			if !reflect.DeepEqual(r.Tools, []string{"get_weather", "get_time"}) || r.ToolChoice != tc.want.choice || r.ToolResults != nil {
				t.Errorf("recorded tools %q choice %q results %v; want both tools, choice %q, no results", r.Tools, r.ToolChoice, r.ToolResults, tc.want.choice)
			}
			var recorded []string
			for _, c := range r.ToolCalls {
				recorded = append(recorded, c.Name)
			}
			if !reflect.DeepEqual(recorded, names) {
				t.Errorf("recorded calls %v; answered %v", r.ToolCalls, names)
			}
		})
	}
}

func TestToolResultsParsed(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		shape rewrite.Shape
		body  string
		want  []ToolResult
		text  string
	}{
		{
			"openai string and parts", rewrite.OpenAI,
			`{"model":"gpt-4o",` + openaiTools + `,"messages":[{"role":"user","content":"hi"},` +
				`{"role":"assistant","content":null,"tool_calls":[{"id":"call_a","type":"function","function":{"name":"get_weather","arguments":"{}"}},{"id":"call_b","type":"function","function":{"name":"get_time","arguments":"{}"}}]},` +
				`{"role":"tool","tool_call_id":"call_a","content":"21 °C, <clear>"},` +
				`{"role":"tool","tool_call_id":"call_b","content":[{"type":"text","text":"12:00"},{"type":"text","text":" UTC"}]}]}`,
			[]ToolResult{{ID: "call_a", Name: "get_weather", Content: "21 °C, <clear>"}, {ID: "call_b", Name: "get_time", Content: "12:00 UTC"}},
			"The tool said: 21 °C, <clear>; 12:00 UTC",
		},
		{
			"openai result not last", rewrite.OpenAI,
			`{"model":"gpt-4o","messages":[{"role":"tool","tool_call_id":"x","content":"old"},{"role":"user","content":"again"}]}`,
			nil, "Hello from alpha.",
		},
		{
			"anthropic blocks", rewrite.Anthropic,
			`{"model":"claude-sonnet-4-5","max_tokens":64,"messages":[{"role":"user","content":"hi"},` +
				`{"role":"assistant","content":[{"type":"text","text":"Let me look."},{"type":"tool_use","id":"toolu_a","name":"get_weather","input":{"city":"Paris"}}]},` +
				`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_a","content":[{"type":"text","text":"sunny"},{"type":"text","text":", 21"}]},` +
				`{"type":"tool_result","tool_use_id":"toolu_b","content":"no such call","is_error":true},{"type":"text","text":"thanks"}]}]}`,
			[]ToolResult{{ID: "toolu_a", Name: "get_weather", Content: "sunny, 21"}, {ID: "toolu_b", Content: "no such call", IsError: true}},
			"The tool said: sunny, 21; no such call",
		},
		{
			"anthropic plain user turn", rewrite.Anthropic,
			`{"model":"claude-sonnet-4-5","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`,
			nil, "Hello from alpha.",
		},
		{
			"gemini responses", rewrite.Gemini,
			`{"contents":[{"role":"user","parts":[{"text":"hi"}]},` +
				`{"role":"model","parts":[{"functionCall":{"name":"get_weather","args":{"city":"Paris"}}},{"functionCall":{"name":"get_time","args":{}}},{"functionCall":{"name":"get_x","args":{}}},{"functionCall":{"name":"get_y","args":{}}}]},` +
				`{"role":"user","parts":[{"functionResponse":{"id":"fc_1","name":"get_weather","response":{"output":"sunny"}}},` +
				`{"functionResponse":{"name":"get_time","response":{ "output": {"h": 12} }}},` +
				`{"functionResponse":{"name":"get_x","response":{"error":"boom"}}},` +
				`{"functionResponse":{"name":"get_y","response":{ "temp": 21, "unit": "C" }}}]}]}`,
			[]ToolResult{
				{ID: "fc_1", Name: "get_weather", Content: "sunny"},
				{Name: "get_time", Content: `{"h":12}`},
				{Name: "get_x", Content: "boom", IsError: true},
				{Name: "get_y", Content: `{"temp":21,"unit":"C"}`},
			},
			`The tool said: sunny; {"h":12}; boom; {"temp":21,"unit":"C"}`,
		},
		{
			"gemini legacy function role", rewrite.Gemini,
			`{"contents":[{"role":"function","parts":[{"functionResponse":{"name":"f","response":{"output":"ok"}}}]}]}`,
			[]ToolResult{{Name: "f", Content: "ok"}}, "The tool said: ok",
		},
		{
			"gemini last turn is the model's", rewrite.Gemini,
			`{"contents":[{"role":"user","parts":[{"functionResponse":{"name":"f","response":{"output":"ok"}}}]},{"role":"model","parts":[{"text":"ok"}]}]}`,
			nil, "Hello from alpha.",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := Options{Name: "alpha"}
			if tc.want != nil {
				// The answer to tool results ignores Options.Text.
				opts.Text = "ignored when results come"
			}
			v, srv := serve(t, tc.shape, opts)
			got := mustPost(t, srv.URL+toolPath(tc.shape, false), tc.body)
			names, _, text := calledTools(t, tc.shape, got.body)
			if len(names) != 0 || text != tc.text {
				t.Errorf("answer calls %v, text %q; want text %q", names, text, tc.text)
			}
			if r := v.Requests()[0]; !reflect.DeepEqual(r.ToolResults, tc.want) || r.ToolCalls != nil {
				t.Errorf("recorded results %+v, calls %v\nwant results %+v", r.ToolResults, r.ToolCalls, tc.want)
			}
		})
	}
}

func TestToolRecordsAreCopies(t *testing.T) {
	t.Parallel()
	v, srv := serve(t, rewrite.OpenAI, Options{})
	mustPost(t, srv.URL+"/v1/chat/completions", toolBody(rewrite.OpenAI, false, ""))
	r := v.Requests()[0]
	r.Tools[0], r.ToolCalls[0].Name = "changed", "changed"
	again := v.Requests()[0]
	if again.Tools[0] != "get_weather" || again.ToolCalls[0].Name != "get_weather" {
		t.Errorf("Requests did not copy the tool slices: %+v", again)
	}
}

// TestToolUsage pins the token counts of tool-call answers: one per four
// bytes of name and arguments, plus one, per call.
func TestToolUsage(t *testing.T) {
	t.Parallel()
	const single = (len("get_weather")+len(weatherArgs))/4 + 1
	const both = single + (len("get_time")+len(timeArgs))/4 + 1
	for _, parallel := range []bool{false, true} {
		want := single
		if parallel {
			want = both
		}
		_, srv := serve(t, rewrite.Gemini, Options{ParallelTools: parallel})
		var a geminiToolAnswer
		if err := json.Unmarshal(mustPost(t, srv.URL+toolPath(rewrite.Gemini, false), toolBody(rewrite.Gemini, false, "")).body, &a); err != nil {
			t.Fatal(err)
		}
		if u := a.UsageMetadata; u.CandidatesTokenCount != want || u.TotalTokenCount != u.PromptTokenCount+want {
			t.Errorf("parallel %v: usage %+v; want %d candidate tokens", parallel, u, want)
		}
	}
}

func TestGeminiToolCallIDs(t *testing.T) {
	t.Parallel()
	for _, ids := range []bool{false, true} {
		_, srv := serve(t, rewrite.Gemini, Options{ParallelTools: true, GeminiIDs: ids})
		var a geminiToolAnswer
		if err := json.Unmarshal(mustPost(t, srv.URL+toolPath(rewrite.Gemini, false), toolBody(rewrite.Gemini, false, "")).body, &a); err != nil {
			t.Fatal(err)
		}
		parts := a.Candidates[0].Content.Parts
		if len(parts) != 2 || a.Candidates[0].FinishReason != "STOP" {
			t.Fatalf("GeminiIDs %v: %d parts, finishReason %q; want 2 calls, STOP", ids, len(parts), a.Candidates[0].FinishReason)
		}
		for i, p := range parts {
			id := p.FunctionCall.ID
			switch {
			case !ids && (id != nil || p.ThoughtSignature != nil):
				t.Errorf("part %d has an id or a signature without GeminiIDs", i)
			case ids && (id == nil || *id != "fc_fake000001_"+strconv.Itoa(i)):
				t.Errorf("part %d id = %v; want fc_fake000001_%d", i, id, i)
			case ids && i == 0 && (p.ThoughtSignature == nil || *p.ThoughtSignature != "c2lnbmF0dXJl"):
				t.Errorf("first part's thoughtSignature = %v", p.ThoughtSignature)
			case ids && i == 1 && p.ThoughtSignature != nil:
				t.Errorf("second parallel call carries a thoughtSignature")
			}
		}
	}
}

// toolStreamEvents names a tool stream's events: Anthropic by event name;
// OpenAI call (a call's opening delta), args, finish, usage, done, error;
// Gemini call, call+finish, finish (text), error.
func toolStreamEvents(t *testing.T, shape rewrite.Shape, body []byte) string {
	t.Helper()
	var out []string
	for _, e := range parseSSE(t, body) {
		d := e.data
		switch {
		case shape == rewrite.Anthropic:
			out = append(out, e.name)
		case d == "[DONE]":
			out = append(out, "done")
		case strings.HasPrefix(d, `{"error":`):
			out = append(out, "error")
		case strings.Contains(d, `"functionCall"`) && strings.Contains(d, `"finishReason":"STOP"`):
			out = append(out, "call+finish")
		case strings.Contains(d, `"functionCall"`), strings.Contains(d, `"name":`):
			out = append(out, "call")
		case strings.Contains(d, `"arguments":`):
			out = append(out, "args")
		case strings.Contains(d, `"finish_reason":"tool_calls"`), strings.Contains(d, `"finishReason":"STOP"`):
			out = append(out, "finish")
		case strings.Contains(d, `"choices":[]`):
			out = append(out, "usage")
		default:
			out = append(out, "other")
		}
	}
	return strings.Join(out, " ")
}

func TestToolStreamFaults(t *testing.T) {
	t.Parallel()
	type want map[rewrite.Shape]string
	for _, tc := range []struct {
		fault Fault
		want  want
	}{
		{Fault{}, want{
			rewrite.OpenAI:    "call args args finish done",
			rewrite.Anthropic: "message_start content_block_start ping content_block_delta content_block_delta content_block_stop message_delta message_stop",
			rewrite.Gemini:    "call+finish",
		}},
		{Fault{Kind: StreamErrorEarly}, want{
			rewrite.OpenAI:    "call error",
			rewrite.Anthropic: "message_start error",
			rewrite.Gemini:    "error",
		}},
		{Fault{Kind: StreamErrorMid}, want{
			rewrite.OpenAI:    "call args error",
			rewrite.Anthropic: "message_start content_block_start ping content_block_delta error",
			rewrite.Gemini:    "call error",
		}},
		{Fault{Kind: StreamEOF}, want{
			rewrite.OpenAI:    "call args",
			rewrite.Anthropic: "message_start content_block_start ping content_block_delta",
			rewrite.Gemini:    "call",
		}},
		{Fault{Kind: StreamStall, Delay: 10 * time.Millisecond}, want{
			rewrite.OpenAI:    "call args args finish done",
			rewrite.Anthropic: "message_start content_block_start ping content_block_delta content_block_delta content_block_stop message_delta message_stop",
			rewrite.Gemini:    "call finish",
		}},
	} {
		for _, shape := range rewrite.Shapes {
			t.Run(tc.fault.String()+"/"+string(shape), func(t *testing.T) {
				v, srv := serve(t, shape, Options{})
				v.Script(tc.fault)
				got := mustPost(t, srv.URL+toolPath(shape, true), toolBody(shape, true, ""))
				if got.status != 200 || got.readErr != nil {
					t.Fatalf("status %d, read error %v", got.status, got.readErr)
				}
				if events := toolStreamEvents(t, shape, got.body); events != tc.want[shape] {
					t.Errorf("events = %s\nwant     %s", events, tc.want[shape])
				}
			})
		}
	}
}

func TestToolStreamParallelOrder(t *testing.T) {
	t.Parallel()
	for shape, want := range map[rewrite.Shape]string{
		// Call 0's opening delta opens the stream; include_usage is set.
		rewrite.OpenAI: "call args args call args args args finish usage done",
		rewrite.Anthropic: "message_start content_block_start ping content_block_delta content_block_delta content_block_stop " +
			"content_block_start content_block_delta content_block_delta content_block_delta content_block_stop message_delta message_stop",
		rewrite.Gemini: "call+finish",
	} {
		t.Run(string(shape), func(t *testing.T) {
			_, srv := serve(t, shape, Options{ParallelTools: true})
			extra := ""
			if shape == rewrite.OpenAI {
				extra = `,"stream_options":{"include_usage":true}`
			}
			got := mustPost(t, srv.URL+toolPath(shape, true), toolBody(shape, true, extra))
			if events := toolStreamEvents(t, shape, got.body); events != want {
				t.Errorf("events = %s\nwant     %s", events, want)
			}
		})
	}
}

// TestToolStreamsMatchTranslationExamples replays the tool-call example
// streams of docs/vendors.md#streams (OpenAI, Anthropic, Gemini) for get_weather(city): the same
// bytes but for the fake's ids and token counts.
func TestToolStreamsMatchTranslationExamples(t *testing.T) {
	t.Parallel()
	const openaiWant = `data: {"id":"chatcmpl-fake000001","object":"chat.completion.chunk","created":1735689600,"model":"gpt-4o","choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_fake000001_0","type":"function","function":{"name":"get_weather","arguments":""}}]},"finish_reason":null}]}

data: {"id":"chatcmpl-fake000001","object":"chat.completion.chunk","created":1735689600,"model":"gpt-4o","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":"}}]},"finish_reason":null}]}

data: {"id":"chatcmpl-fake000001","object":"chat.completion.chunk","created":1735689600,"model":"gpt-4o","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"Paris\"}"}}]},"finish_reason":null}]}

data: {"id":"chatcmpl-fake000001","object":"chat.completion.chunk","created":1735689600,"model":"gpt-4o","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}

data: [DONE]

`
	const anthropicWant = `event: message_start
data: {"type":"message_start","message":{"id":"msg_fake000001","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":PROMPT,"output_tokens":1}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_fake000001_0","name":"get_weather","input":{}}}

event: ping
data: {"type":"ping"}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"city\":"}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"\"Paris\"}"}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":OUTPUT}}

event: message_stop
data: {"type":"message_stop"}

`
	const geminiWant = `data: {"candidates":[{"content":{"role":"model","parts":[{"functionCall":{"name":"get_weather","args":{"city":"Paris"}}}]},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":PROMPT,"candidatesTokenCount":OUTPUT,"totalTokenCount":TOTAL},"modelVersion":"gemini-2.5-flash","responseId":"fake000001"}

`
	const output = (len("get_weather")+len(weatherArgs))/4 + 1
	weather := `{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}`
	for _, tc := range []struct {
		shape      rewrite.Shape
		path, body string
		want       string
	}{
		{rewrite.OpenAI, "/v1/chat/completions", `{"model":"gpt-4o","stream":true,"tools":[{"type":"function","function":` + weather + `}]}`, openaiWant},
		{rewrite.Anthropic, "/v1/messages", `{"model":"claude-sonnet-4-5","stream":true,"tools":[{"name":"get_weather","input_schema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}]}`, anthropicWant},
		{rewrite.Gemini, toolPath(rewrite.Gemini, true), `{"tools":[{"functionDeclarations":[` + weather + `]}]}`, geminiWant},
	} {
		t.Run(string(tc.shape), func(t *testing.T) {
			_, srv := serve(t, tc.shape, Options{})
			prompt := len(tc.body) / 4
			want := strings.NewReplacer("PROMPT", strconv.Itoa(prompt), "OUTPUT", strconv.Itoa(output), "TOTAL", strconv.Itoa(prompt+output)).Replace(tc.want)
			if got := mustPost(t, srv.URL+tc.path, tc.body).body; string(got) != want {
				t.Errorf("stream:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}

// TestGoldenToolAnswers pins the exact bytes of tool-call answers and of
// answers to tool results. Run with -update after a deliberate change, and
// review the diff against docs/vendors.md#whole-answers and docs/vendors.md#streams.
func TestGoldenToolAnswers(t *testing.T) {
	t.Parallel()
	const (
		openaiResult = `{"model":"gpt-4o","messages":[{"role":"user","content":"Weather in Paris?"},` +
			`{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},` +
			`{"role":"tool","tool_call_id":"call_1","content":"{\"temp\":21,\"sky\":\"clear\"}"}]}`
		anthropicResult = `{"model":"claude-sonnet-4-5","max_tokens":64,"messages":[{"role":"user","content":"Weather in Paris?"},` +
			`{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city":"Paris"}}]},` +
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"{\"temp\":21,\"sky\":\"clear\"}"}]}]}`
		geminiResult = `{"contents":[{"role":"user","parts":[{"text":"Weather in Paris?"}]},` +
			`{"role":"model","parts":[{"functionCall":{"name":"get_weather","args":{"city":"Paris"}}}]},` +
			`{"role":"user","parts":[{"functionResponse":{"name":"get_weather","response":{"output":"{\"temp\":21,\"sky\":\"clear\"}"}}}]}]}`
	)
	streamBody := func(body string) string { return strings.Replace(body, `{"model":`, `{"stream":true,"model":`, 1) }
	for _, tc := range []struct {
		name  string
		shape rewrite.Shape
		opts  Options
		path  string
		body  string
	}{
		{"openai_tool_json", rewrite.OpenAI, Options{}, toolPath(rewrite.OpenAI, false), toolBody(rewrite.OpenAI, false, "")},
		{"openai_tool_stream_usage", rewrite.OpenAI, Options{}, toolPath(rewrite.OpenAI, true), toolBody(rewrite.OpenAI, true, `,"stream_options":{"include_usage":true}`)},
		{"openai_tool_parallel_json", rewrite.OpenAI, Options{ParallelTools: true}, toolPath(rewrite.OpenAI, false), toolBody(rewrite.OpenAI, false, "")},
		{"openai_tool_parallel_stream", rewrite.OpenAI, Options{ParallelTools: true}, toolPath(rewrite.OpenAI, true), toolBody(rewrite.OpenAI, true, "")},
		{"openai_tool_result_json", rewrite.OpenAI, Options{}, toolPath(rewrite.OpenAI, false), openaiResult},
		{"openai_tool_result_stream", rewrite.OpenAI, Options{}, toolPath(rewrite.OpenAI, true), streamBody(openaiResult)},
		{"anthropic_tool_json", rewrite.Anthropic, Options{}, toolPath(rewrite.Anthropic, false), toolBody(rewrite.Anthropic, false, "")},
		{"anthropic_tool_stream", rewrite.Anthropic, Options{}, toolPath(rewrite.Anthropic, true), toolBody(rewrite.Anthropic, true, "")},
		{"anthropic_tool_parallel_json", rewrite.Anthropic, Options{ParallelTools: true}, toolPath(rewrite.Anthropic, false), toolBody(rewrite.Anthropic, false, "")},
		{"anthropic_tool_parallel_stream", rewrite.Anthropic, Options{ParallelTools: true}, toolPath(rewrite.Anthropic, true), toolBody(rewrite.Anthropic, true, "")},
		{"anthropic_tool_result_json", rewrite.Anthropic, Options{}, toolPath(rewrite.Anthropic, false), anthropicResult},
		{"anthropic_tool_result_stream", rewrite.Anthropic, Options{}, toolPath(rewrite.Anthropic, true), streamBody(anthropicResult)},
		{"gemini_tool_json", rewrite.Gemini, Options{}, toolPath(rewrite.Gemini, false), toolBody(rewrite.Gemini, false, "")},
		{"gemini_tool_stream_sse", rewrite.Gemini, Options{}, toolPath(rewrite.Gemini, true), toolBody(rewrite.Gemini, true, "")},
		{"gemini_tool_ids_parallel_json", rewrite.Gemini, Options{ParallelTools: true, GeminiIDs: true}, toolPath(rewrite.Gemini, false), toolBody(rewrite.Gemini, false, "")},
		{"gemini_tool_ids_parallel_stream_sse", rewrite.Gemini, Options{ParallelTools: true, GeminiIDs: true}, toolPath(rewrite.Gemini, true), toolBody(rewrite.Gemini, true, "")},
		{"gemini_tool_result_json", rewrite.Gemini, Options{}, toolPath(rewrite.Gemini, false), geminiResult},
		{"gemini_tool_result_stream_sse", rewrite.Gemini, Options{}, toolPath(rewrite.Gemini, true), geminiResult},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, srv := serve(t, tc.shape, tc.opts)
			checkGolden(t, tc.name, mustPost(t, srv.URL+tc.path, tc.body).body)
		})
	}
}
