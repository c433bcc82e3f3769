package sdkcheck

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/detour-proxy/detour/internal/detourtest"
	fv "github.com/detour-proxy/detour/internal/fakevendor"
	"github.com/detour-proxy/detour/rewrite"
)

// These tests drive openai-go's Responses client (client.Responses.New and
// NewStreaming) through detour to upstreams of every other shape, and
// openai-go's Chat client to a Responses-only upstream
// (docs/vendors.md#openai-responses).

// responsesPolicy routes api.openai.com/v1/responses to an OpenAI-shaped
// primary (the Responses fake, with the app's key) and then a backup of
// another shape with its own key. An openai backup is chat_only: the
// Chat Completions fake has no Responses API.
func responsesPolicy(t *testing.T, primary, backup *detourtest.Vendor, backupModel string) string {
	keyFile := filepath.Join(t.TempDir(), "backup.key")
	os.WriteFile(keyFile, []byte("backup-key"), 0o600)
	chatOnly := backup.Vendor.Shape() == rewrite.OpenAI
	return fmt.Sprintf(`{
  "upstreams": {
    "primary": {"shape": "openai", "base_url": %q, "ca_file": %q, "auth": {"from": "client"}},
    "backup":  {"shape": %q, "base_url": %q, "ca_file": %q, "auth": {"file": %q}, "models": {"*": %q}, "chat_only": %v}
  },
  "routes": [{"name": "responses", "match": {"host": "api.openai.com", "path": "/v1/responses"}, "chain": ["primary", "backup"]}]
}`, primary.BaseURL(), primary.CAFile, backup.Vendor.Shape(), backup.BaseURL(), backup.CAFile, keyFile, backupModel, chatOnly)
}

// responsesApp is an app on openai-go's Responses client.
type responsesApp struct {
	c     *openai.Client
	input responses.ResponseInputParam
	call  responses.ResponseFunctionToolCall
}

func (a *responsesApp) params(tools bool) responses.ResponseNewParams {
	p := responses.ResponseNewParams{Model: "gpt-4.1", Instructions: openai.String("Be brief."),
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: a.input}}
	if tools {
		p.Tools = []responses.ToolUnionParam{{OfFunction: &responses.FunctionToolParam{Name: "get_weather", Parameters: weatherSchema}}}
	}
	return p
}

func (a *responsesApp) run(t *testing.T, stream, tools bool) appResult {
	t.Helper()
	p := a.params(tools)
	var r responses.Response
	if stream {
		s := a.c.Responses.NewStreaming(detourtest.TestContext(t), p)
		var seq int64
		var deltas string
		var done bool
		for s.Next() {
			ev := s.Current()
			if ev.SequenceNumber != seq {
				t.Errorf("%s: sequence_number %d; want %d", ev.Type, ev.SequenceNumber, seq)
			}
			seq++
			switch ev.Type {
			case "response.output_text.delta":
				deltas += ev.Delta
			case "response.completed":
				r, done = ev.AsResponseCompleted().Response, true
			}
		}
		if err := s.Err(); err != nil {
			t.Fatalf("responses stream: %v", err)
		}
		if !done {
			t.Fatal("stream ended without response.completed")
		}
		if deltas != r.OutputText() {
			t.Errorf("deltas %q, response.completed text %q", deltas, r.OutputText())
		}
	} else {
		got, err := a.c.Responses.New(detourtest.TestContext(t), p)
		if err != nil {
			t.Fatalf("responses: %v", err)
		}
		r = *got
	}
	res := appResult{text: r.OutputText(), finish: string(r.Status), output: r.Usage.OutputTokens}
	if r.Usage.TotalTokens != r.Usage.InputTokens+r.Usage.OutputTokens || r.Usage.InputTokens == 0 {
		t.Errorf("usage %+v", r.Usage)
	}
	for _, it := range r.Output {
		if it.Type == "function_call" {
			a.call = it.AsFunctionCall()
			res.tool = a.call.Name
			if err := json.Unmarshal([]byte(a.call.Arguments), &res.args); err != nil {
				t.Fatalf("tool arguments %q: %v", a.call.Arguments, err)
			}
		}
	}
	return res
}

func (a *responsesApp) ask(t *testing.T, stream, tools bool) appResult {
	a.input = responses.ResponseInputParam{responses.ResponseInputItemParamOfMessage("What is the weather in Paris?", responses.EasyInputMessageRoleUser)}
	return a.run(t, stream, tools)
}

func (a *responsesApp) answerTool(t *testing.T, stream bool, result string) appResult {
	out := responses.ResponseInputItemParamOfFunctionCallOutput(result)
	out.OfFunctionCallOutput.CallID = openai.String(a.call.CallID)
	a.input = append(a.input, responses.ResponseInputItemParamOfFunctionCall(a.call.Arguments, a.call.CallID, a.call.Name), out)
	return a.run(t, stream, true)
}

func TestResponsesAppAnsweredByEveryShape(t *testing.T) {
	t.Parallel()
	for _, up := range rewrite.Shapes {
		for _, stream := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s backup, stream %v", up, stream), func(t *testing.T) {
				t.Parallel()
				primary := detourtest.NewVendor(t, rewrite.OpenAIResponses, "primary")
				primary.SetDefault(fv.Fault{Kind: fv.Status, Status: 503, Class: fv.ClassOverloaded})
				backup := detourtest.NewVendor(t, up, "backup")
				h := detourtest.Start(t, responsesPolicy(t, primary, backup, upstreamModel[up]))
				a := &responsesApp{c: openaiThrough(h)}

				got := a.ask(t, stream, false)
				if got.text != "Hello from backup." || got.finish != "completed" || got.output == 0 {
					t.Fatalf("answer %+v; want the %s backup's text, completed, with usage", got, up)
				}
				rs := h.WaitRecords(t, 1)
				if rs[0].AnsweredBy != "backup" || len(rs[0].Attempts) != 2 || !rs[0].Attempts[1].Translated {
					t.Fatalf("record %+v; want the primary's 503, then the translated backup", rs[0])
				}
				if r := primary.Requests()[0]; r.Path != "/v1/responses" || r.Header.Get("Authorization") != "Bearer "+detourtest.AppOpenAIKey {
					t.Errorf("primary got %s with %q; want the app's own request and key", r.Path, r.Header.Get("Authorization"))
				}

				got = a.ask(t, stream, true)
				if got.tool != "get_weather" || got.args["city"] != "Paris" {
					t.Fatalf("tool call %q %v; want get_weather {city: Paris}", got.tool, got.args)
				}
				final := a.answerTool(t, stream, "sunny, 21°C")
				if final.text != fv.ToolResultPrefix+"sunny, 21°C" {
					t.Errorf("final answer %q; want the tool result to have reached the backup", final.text)
				}
				for _, r := range backup.Requests() {
					if strings.Contains(fmt.Sprint(r.Header), "SECRET") {
						t.Errorf("backup saw the app's key: %v", r.Header)
					}
					if r.Model != upstreamModel[up] {
						t.Errorf("backup got model %q; want %q", r.Model, upstreamModel[up])
					}
				}
				if rs := backup.Requests(); len(rs[len(rs)-1].ToolResults) != 1 {
					t.Errorf("the backup's last request has tool results %+v; want the one function_call_output", rs[len(rs)-1].ToolResults)
				}
			})
		}
	}
}

func TestChatAppAnsweredByResponsesUpstream(t *testing.T) {
	t.Parallel()
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream %v", stream), func(t *testing.T) {
			t.Parallel()
			up := detourtest.NewVendor(t, rewrite.OpenAIResponses, "resp")
			keyFile := filepath.Join(t.TempDir(), "k")
			os.WriteFile(keyFile, []byte("resp-key"), 0o600)
			// No models mapping: a Responses deployment takes OpenAI's names.
			h := detourtest.Start(t, fmt.Sprintf(`{
  "upstreams": {"resp": {"shape": "openai-responses", "base_url": %q, "ca_file": %q, "auth": {"file": %q}}},
  "routes": [{"name": "chat", "match": {"host": "api.openai.com", "path": "/v1/chat/completions"}, "chain": ["resp"]}]
}`, up.BaseURL(), up.CAFile, keyFile))
			a := &openaiApp{c: openaiThrough(h)}
			got := a.ask(t, stream, false)
			if got.text != "Hello from resp." || got.finish != "stop" || got.output == 0 {
				t.Fatalf("answer %+v", got)
			}
			got = a.ask(t, stream, true)
			if got.tool != "get_weather" || got.args["city"] != "Paris" {
				t.Fatalf("tool call %q %v", got.tool, got.args)
			}
			final := a.answerTool(t, stream, "sunny")
			if final.text != fv.ToolResultPrefix+"sunny" {
				t.Errorf("final answer %q", final.text)
			}
			r := up.Requests()[0]
			if r.Path != "/v1/responses" || r.Header.Get("Authorization") != "Bearer resp-key" || r.Model != "gpt-4o" {
				t.Errorf("upstream got %s, %q, model %q", r.Path, r.Header.Get("Authorization"), r.Model)
			}
			var body map[string]any
			json.Unmarshal(r.Body, &body)
			if body["store"] != false {
				t.Errorf("store = %v; want false: detour asks a Responses upstream to keep nothing", body["store"])
			}
		})
	}
}

func TestResponsesErrorBeforeCommitInItsEnvelope(t *testing.T) {
	t.Parallel()
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream %v", stream), func(t *testing.T) {
			t.Parallel()
			primary := detourtest.NewVendor(t, rewrite.OpenAIResponses, "primary")
			primary.SetDefault(fv.Fault{Kind: fv.Status, Status: 503, Class: fv.ClassOverloaded})
			backup := detourtest.NewVendor(t, rewrite.Anthropic, "backup")
			backup.SetDefault(fv.Fault{Kind: fv.Status, Class: fv.ClassInvalidRequest})
			h := detourtest.Start(t, responsesPolicy(t, primary, backup, "claude-haiku-4-5"))
			c := openaiThrough(h)
			p := responses.ResponseNewParams{Model: "gpt-4.1", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}}
			var err error
			if stream {
				s := c.Responses.NewStreaming(detourtest.TestContext(t), p)
				for s.Next() {
					t.Errorf("event %s before the error", s.Current().Type)
				}
				err = s.Err()
			} else {
				_, err = c.Responses.New(detourtest.TestContext(t), p)
			}
			var apiErr *openai.Error
			if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Type != "invalid_request_error" || apiErr.Message == "" {
				t.Fatalf("err %v; want the Anthropic 400 as an OpenAI invalid_request_error", err)
			}
		})
	}
}

func TestResponsesErrorAfterCommitIsAnErrorEvent(t *testing.T) {
	t.Parallel()
	primary := detourtest.NewVendor(t, rewrite.OpenAIResponses, "primary")
	primary.SetDefault(fv.Fault{Kind: fv.Status, Status: 503, Class: fv.ClassOverloaded})
	backup := detourtest.NewVendor(t, rewrite.Anthropic, "backup")
	backup.SetDefault(fv.Fault{Kind: fv.StreamErrorMid, Class: fv.ClassOverloaded})
	h := detourtest.Start(t, responsesPolicy(t, primary, backup, "claude-haiku-4-5"))
	s := openaiThrough(h).Responses.NewStreaming(detourtest.TestContext(t), responses.ResponseNewParams{Model: "gpt-4.1", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}})
	var text string
	var types []string
	for s.Next() {
		ev := s.Current()
		types = append(types, ev.Type)
		if ev.Type == "response.output_text.delta" {
			text += ev.Delta
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	n := len(types)
	if text == "" || n < 2 || types[n-2] != "error" || types[n-1] != "response.failed" {
		t.Errorf("text %q, events %v; want content, then error and response.failed", text, types)
	}
}

func TestStatefulResponsesRequestStaysOnOpenAI(t *testing.T) {
	t.Parallel()
	primary := detourtest.NewVendor(t, rewrite.OpenAIResponses, "primary")
	primary.SetDefault(fv.Fault{Kind: fv.Status, Status: 503, Class: fv.ClassOverloaded})
	backup := detourtest.NewVendor(t, rewrite.Anthropic, "backup")
	h := detourtest.Start(t, responsesPolicy(t, primary, backup, "claude-haiku-4-5"))
	_, err := openaiThrough(h).Responses.New(detourtest.TestContext(t), responses.ResponseNewParams{
		Model: "gpt-4.1", PreviousResponseID: openai.String("resp_earlier"),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("and then?")},
	})
	// The chain's last failure decides the app's error: here the skip.
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || !strings.Contains(apiErr.Message, "previous_response_id") {
		t.Fatalf("err %v; want an OpenAI error that names previous_response_id", err)
	}
	if backup.Calls() != 0 {
		t.Error("a request with previous_response_id reached the Anthropic backup")
	}
	line := h.WaitLogLine(t, "request", func(m map[string]any) bool { return m["route"] == "responses" })
	if s := fmt.Sprint(line["attempts"]); !strings.Contains(s, "previous_response_id") || !strings.Contains(s, "skipped") {
		t.Errorf("log line attempts %s; want the backup skipped for previous_response_id", s)
	}
}
