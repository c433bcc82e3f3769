package translate

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/detour-proxy/detour/rewrite"
	"github.com/detour-proxy/detour/rewrite/ir"
	"github.com/detour-proxy/detour/rewrite/responses"
	"github.com/detour-proxy/detour/rewrite/sse"
)

// The Responses API's pairs: an app on the Responses API answered by each
// of the chat shapes, and a chat app of each shape answered by a
// Responses-only upstream (docs/vendors.md#openai-responses). They have
// fuzz targets, stream checks and benchmarks like the six chat pairs, and
// stand apart from them only because the chat pairs' goldens are keyed by
// rewrite.Shapes.
var responsesPairs = []pair{
	{rewrite.OpenAIResponses, rewrite.OpenAI},
	{rewrite.OpenAIResponses, rewrite.Anthropic},
	{rewrite.OpenAIResponses, rewrite.Gemini},
	{rewrite.OpenAI, rewrite.OpenAIResponses},
	{rewrite.Anthropic, rewrite.OpenAIResponses},
	{rewrite.Gemini, rewrite.OpenAIResponses},
}

// benchPairs and benchShapes are what bench_test.go measures: the chat
// pairs and shapes, then the Responses ones.
var (
	benchPairs  = append(append([]pair(nil), pairs...), responsesPairs...)
	benchShapes = append(append([]rewrite.Shape(nil), rewrite.Shapes...), rewrite.OpenAIResponses)
)

func FuzzRequest_responses_openai(f *testing.F) {
	fuzzRequest(f, pair{rewrite.OpenAIResponses, rewrite.OpenAI})
}
func FuzzRequest_responses_anthropic(f *testing.F) {
	fuzzRequest(f, pair{rewrite.OpenAIResponses, rewrite.Anthropic})
}
func FuzzRequest_responses_gemini(f *testing.F) {
	fuzzRequest(f, pair{rewrite.OpenAIResponses, rewrite.Gemini})
}
func FuzzRequest_openai_responses(f *testing.F) {
	fuzzRequest(f, pair{rewrite.OpenAI, rewrite.OpenAIResponses})
}
func FuzzRequest_anthropic_responses(f *testing.F) {
	fuzzRequest(f, pair{rewrite.Anthropic, rewrite.OpenAIResponses})
}
func FuzzRequest_gemini_responses(f *testing.F) {
	fuzzRequest(f, pair{rewrite.Gemini, rewrite.OpenAIResponses})
}

func FuzzStream_responses_openai(f *testing.F) {
	fuzzStream(f, pair{rewrite.OpenAIResponses, rewrite.OpenAI})
}
func FuzzStream_responses_anthropic(f *testing.F) {
	fuzzStream(f, pair{rewrite.OpenAIResponses, rewrite.Anthropic})
}
func FuzzStream_responses_gemini(f *testing.F) {
	fuzzStream(f, pair{rewrite.OpenAIResponses, rewrite.Gemini})
}
func FuzzStream_openai_responses(f *testing.F) {
	fuzzStream(f, pair{rewrite.OpenAI, rewrite.OpenAIResponses})
}
func FuzzStream_anthropic_responses(f *testing.F) {
	fuzzStream(f, pair{rewrite.Anthropic, rewrite.OpenAIResponses})
}
func FuzzStream_gemini_responses(f *testing.F) {
	fuzzStream(f, pair{rewrite.Gemini, rewrite.OpenAIResponses})
}

func init() {
	requestSeeds[rewrite.OpenAIResponses] = []string{
		`{"model":"m","input":"hi"}`,
		`{"model":"m","input":"hi","previous_response_id":"resp_1"}`,
		`{"model":"m","input":[{"type":"function_call","call_id":"a/b","name":"f","arguments":"[1]"},{"type":"function_call_output","call_id":"a/b","output":[{"type":"input_text","text":"r"}]}],"tool_choice":{"type":"function","name":"f"},"tools":[{"type":"function","name":"f","parameters":null}]}`,
		`{"model":"m","input":[{"role":"user","content":[{"type":"input_file","file_data":"data:application/pdf;base64,JVBERi0=","filename":"a.pdf"},{"type":"input_image","image_url":"https://x/y.png"}]}],"text":{"format":{"type":"json_schema","name":"n","schema":{"type":"object"},"strict":true}},"reasoning":{"effort":"xhigh"},"max_output_tokens":5}`,
		`{"model":"m","input":[{"type":"reasoning","id":"rs_1","summary":[]},{"role":"assistant","content":[{"type":"refusal","refusal":"no"}]}],"text":{"format":{"type":"json_object"}},"tools":[{"type":"web_search"}]}`,
	}
}

// checkResponsesStream checks a Responses stream as openai-go and the
// Responses API's documented order want it (docs/vendors.md#openai-responses-stream):
// every event named by its type, sequence_number counting from 0,
// response.created then response.in_progress first, one output item open
// at a time with its deltas between its added and done events, the done
// events carrying what the deltas added up to, and the stream ending with
// response.completed or response.incomplete (or error and
// response.failed) whose response lists the items.
func checkResponsesStream(t testing.TB, evs []sse.Event, o streamCheck) summary {
	t.Helper()
	var s summary
	type item struct {
		id, kind, text string
		done           bool
	}
	var items []item
	open := -1
	closed, errored := false, false
	for i, ev := range evs {
		var e struct {
			Type           string          `json:"type"`
			SequenceNumber *int            `json:"sequence_number"`
			ItemID         string          `json:"item_id"`
			OutputIndex    int             `json:"output_index"`
			Delta          string          `json:"delta"`
			Text           string          `json:"text"`
			Arguments      string          `json:"arguments"`
			Message        string          `json:"message"`
			Item           json.RawMessage `json:"item"`
			Response       json.RawMessage `json:"response"`
		}
		mustUnmarshal(t, ev.Data, &e)
		if closed || errored && e.Type != "response.failed" {
			t.Errorf("event %d (%s) after the stream's end", i, e.Type)
		}
		if ev.Name != e.Type {
			t.Errorf("event %d: event line %q, type %q", i, ev.Name, e.Type)
		}
		if e.SequenceNumber == nil || *e.SequenceNumber != i {
			t.Errorf("event %d (%s): sequence_number %v", i, e.Type, e.SequenceNumber)
		}
		if (i == 0) != (e.Type == "response.created") || (i == 1) != (e.Type == "response.in_progress") && e.Type != "error" {
			t.Errorf("event %d is %s; want response.created, then response.in_progress, first", i, e.Type)
		}
		switch e.Type {
		case "response.created", "response.in_progress":
			var r struct {
				Model string `json:"model"`
			}
			mustUnmarshal(t, e.Response, &r)
			if o.model != "" && r.Model != o.model {
				t.Errorf("%s: model %q; want %q", e.Type, r.Model, o.model)
			}
		case "response.output_item.added":
			var it struct {
				ID     string `json:"id"`
				Type   string `json:"type"`
				Name   string `json:"name"`
				CallID string `json:"call_id"`
			}
			mustUnmarshal(t, e.Item, &it)
			if open >= 0 {
				t.Errorf("event %d: item %s added while %s is open", i, it.ID, items[open].id)
			}
			if e.OutputIndex != len(items) {
				t.Errorf("event %d: output_index %d; want %d", i, e.OutputIndex, len(items))
			}
			items = append(items, item{id: it.ID, kind: it.Type})
			open = len(items) - 1
			if it.Type == "function_call" {
				if o.strict && (it.Name == "" || it.CallID == "") {
					t.Errorf("event %d: a function call without name or call_id", i)
				}
				s.Tools = append(s.Tools, toolSummary{ID: it.CallID, Name: it.Name})
			}
		case "response.content_part.added", "response.output_text.delta", "response.output_text.done", "response.content_part.done",
			"response.function_call_arguments.delta", "response.function_call_arguments.done":
			if open < 0 || items[open].id != e.ItemID || e.OutputIndex != open {
				t.Errorf("event %d (%s) for item %q at %d, not the open item", i, e.Type, e.ItemID, e.OutputIndex)
				continue
			}
			it := &items[open]
			switch e.Type {
			case "response.output_text.delta", "response.function_call_arguments.delta":
				it.text += e.Delta
			case "response.output_text.done":
				if e.Text != it.text {
					t.Errorf("output_text.done text %q; the deltas made %q", e.Text, it.text)
				}
				s.Text += it.text
			case "response.function_call_arguments.done":
				if e.Arguments != it.text && !(it.text == "" && e.Arguments == "{}") {
					t.Errorf("function_call_arguments.done %q; the deltas made %q", e.Arguments, it.text)
				}
				s.Tools[len(s.Tools)-1].Args = toolArgs(t, o.strict, e.Arguments, "{}")
			}
		case "response.output_item.done":
			if open < 0 || e.OutputIndex != open {
				t.Errorf("event %d: output_item.done for %d, open %d", i, e.OutputIndex, open)
				continue
			}
			items[open].done = true
			open = -1
		case "response.completed", "response.incomplete":
			closed = true
			if open >= 0 {
				t.Errorf("%s with item %s still open", e.Type, items[open].id)
			}
			var r struct {
				Status string            `json:"status"`
				Output []json.RawMessage `json:"output"`
				Usage  *struct {
					InputTokens, OutputTokens, TotalTokens int64
				} `json:"usage"`
			}
			mustUnmarshal(t, e.Response, &r)
			if len(r.Output) != len(items) {
				t.Errorf("%s lists %d items; the stream had %d", e.Type, len(r.Output), len(items))
			}
			if r.Usage == nil {
				t.Errorf("%s without usage", e.Type)
			} else {
				s.Input, s.Output = r.Usage.InputTokens, r.Usage.OutputTokens
			}
			s.Finish = r.Status
		case "error":
			errored = true
			s.Error = e.Message
		case "response.failed":
			if !errored {
				t.Errorf("response.failed without the error event before it")
			}
			closed = true
		}
	}
	if errored && !closed {
		t.Errorf("error without response.failed after it")
	}
	endChecks(t, "responses", o.wantError, errored, closed && !errored, "response.completed")
	return s
}

func TestResponsesPairsTranslateStreams(t *testing.T) {
	t.Parallel()
	for _, p := range responsesPairs {
		for _, kind := range streamKinds {
			t.Run(p.String()+"/"+kind, func(t *testing.T) {
				req := decodeApp(t, p.from, true)
				run := runStream(t, req, p, readFile(t, "upstream", string(p.to)+"_stream_"+kind+".sse"))
				if len(run.errs) > 0 {
					t.Errorf("decode errors: %v", run.errs)
				}
				if len(run.closeAgain) > 0 {
					t.Errorf("a second Close wrote %q", run.closeAgain)
				}
				s := checkStream(t, p.from, run.out, streamCheck{wantError: run.sawError, includeUsage: req.IncludeUsage, model: appModel[p.from], strict: true})
				switch kind {
				case "text":
					if !strings.Contains(s.Text, "Paris") {
						t.Errorf("text %q", s.Text)
					}
				case "tool":
					if len(s.Tools) == 0 || s.Tools[0].Name != "get_weather" || !strings.Contains(s.Tools[0].Args, "Paris") {
						t.Errorf("tools %+v", s.Tools)
					}
				case "error":
					if !run.sawError || s.Error == "" {
						t.Errorf("no error event for the upstream's error: %+v", s)
					}
				}
				if t.Failed() {
					t.Logf("app stream:\n%s", run.out)
				}
			})
		}
	}
}

func TestResponsesPairsTranslateAnswers(t *testing.T) {
	t.Parallel()
	for _, p := range responsesPairs {
		for _, kind := range []string{"text", "tool"} {
			t.Run(p.String()+"/"+kind, func(t *testing.T) {
				req := decodeApp(t, p.from, false)
				out, err := Response(req, p.from, p.to, readFile(t, "upstream", string(p.to)+"_"+kind+".json"))
				if err != nil {
					t.Fatal(err)
				}
				back, err := decodeResponse(p.from, out)
				if err != nil {
					t.Fatalf("the %s answer detour wrote does not decode: %v\n%s", p.from, err, out)
				}
				var text, tool string
				for _, part := range back.Parts {
					text += part.Text
					if part.ToolCall != nil {
						tool += part.ToolCall.Name + string(part.ToolCall.Arguments)
					}
				}
				if kind == "text" && !strings.Contains(text, "Paris") || kind == "tool" && !strings.Contains(tool, "get_weather") {
					t.Errorf("answer %s", out)
				}
				if back.Usage.Input == 0 || back.Usage.Output == 0 {
					t.Errorf("usage %+v lost", back.Usage)
				}
			})
		}
	}
}

// The Responses app fixture decodes into every field the IR carries.
func TestResponsesAppFixtureDecodes(t *testing.T) {
	t.Parallel()
	req := decodeApp(t, rewrite.OpenAIResponses, false)
	if len(req.System) != 2 || len(req.Messages) != 3 || len(req.Tools) != 1 || req.ReasoningEffort != "low" || req.MaxTokens != 512 {
		t.Errorf("request %+v", req)
	}
	if _, err := responses.EncodeRequest(req, ir.EncodeOptions{Model: "gpt-4.1"}); err != nil {
		t.Error(err)
	}
}

// A Responses app gets its static and cached answers in its own shape, and
// its answers can be cached: Synthesize and DecodeAnswer know the shape.
func TestResponsesSynthesizedAnswers(t *testing.T) {
	t.Parallel()
	for _, stream := range []bool{false, true} {
		ct, body := StaticResponse(rewrite.OpenAIResponses, "gpt-4.1", "Sorry, try later.", stream, false)
		if stream {
			s := checkStream(t, rewrite.OpenAIResponses, body, streamCheck{model: "gpt-4.1", strict: true})
			if ct != contentTypeSSE || s.Text != "Sorry, try later." || s.Finish != "completed" {
				t.Errorf("static stream: %s %+v", ct, s)
			}
		} else if r, err := responses.DecodeResponse(body); ct != contentTypeJSON || err != nil || r.Parts[0].Text != "Sorry, try later." {
			t.Errorf("static answer: %s %v %s", ct, err, body)
		}
		r, err := DecodeAnswer(rewrite.OpenAIResponses, body, stream)
		if err != nil || len(r.Parts) != 1 || r.Parts[0].Text != "Sorry, try later." || r.Finish != "stop" {
			t.Errorf("DecodeAnswer(stream %v): %v %+v", stream, err, r)
		}
	}
}
