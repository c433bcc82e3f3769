package sdkcheck

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	oresp "github.com/openai/openai-go/v3/responses"

	"github.com/detour-proxy/detour/internal/codectest"
	"github.com/detour-proxy/detour/rewrite"
	"github.com/detour-proxy/detour/rewrite/ir"
	"github.com/detour-proxy/detour/rewrite/responses"
)

// These tests hold rewrite/responses' encoders to the official openai-go
// SDK: what detour writes for a Responses app must be what the SDK reads
// from OpenAI (docs/vendors.md#openai-responses). The stream is the one of
// rewrite/responses' stream tests.

func responsesSDKClient(t *testing.T, contentType string, body []byte) oai.Client {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", contentType)
		_, _ = w.Write(body)
	}))
	t.Cleanup(srv.Close)
	return oai.NewClient(option.WithBaseURL(srv.URL), option.WithAPIKey("sk-test"), option.WithMaxRetries(0))
}

func TestResponsesCodecSDKReadsEncodedResponse(t *testing.T) {
	t.Parallel()
	r := &ir.Response{ID: "chatcmpl-1", Model: "up", Created: 1700000000, Finish: ir.FinishToolCalls,
		Parts: []ir.Part{
			{Kind: ir.PartThinking, Text: "hidden"},
			{Kind: ir.PartText, Text: "Checking "},
			{Kind: ir.PartText, Text: "now."},
			{Kind: ir.PartToolCall, ToolCall: &ir.ToolCall{ID: "call_1", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Paris"}`)}},
		},
		Usage: ir.TokenUsage{Input: 12, Output: 7, CachedInput: 2, Reasoning: 3}}
	body, err := responses.EncodeResponse(r, "gpt-app")
	if err != nil {
		t.Fatal(err)
	}
	c := responsesSDKClient(t, "application/json", body)
	got, err := c.Responses.New(context.Background(), oresp.ResponseNewParams{Model: "gpt-app", Input: oresp.ResponseNewParamsInputUnion{OfString: oai.String("hi")}})
	if err != nil {
		t.Fatal(err)
	}
	if got.OutputText() != "Checking now." || got.Model != "gpt-app" || got.Status != "completed" {
		t.Errorf("output text %q model %q status %q", got.OutputText(), got.Model, got.Status)
	}
	if len(got.Output) != 2 {
		t.Fatalf("output items %d; want a message and a function call", len(got.Output))
	}
	fc := got.Output[1].AsFunctionCall()
	if fc.CallID != "call_1" || fc.Name != "get_weather" || fc.Arguments != `{"city":"Paris"}` {
		t.Errorf("function call %+v", fc)
	}
	u := got.Usage
	if u.InputTokens != 12 || u.OutputTokens != 7 || u.TotalTokens != 19 || u.InputTokensDetails.CachedTokens != 2 || u.OutputTokensDetails.ReasoningTokens != 3 {
		t.Errorf("usage %+v", u)
	}
}

func TestResponsesCodecSDKReadsEncodedStream(t *testing.T) {
	t.Parallel()
	c := responsesSDKClient(t, "text/event-stream", responsesEncodeAll(codectest.ResponsesTextAndTool...))
	st := c.Responses.NewStreaming(context.Background(), oresp.ResponseNewParams{Model: "gpt-app", Input: oresp.ResponseNewParamsInputUnion{OfString: oai.String("hi")}})
	var text, args string
	var completed *oresp.Response
	var seq int64
	for st.Next() {
		ev := st.Current()
		if ev.SequenceNumber != seq {
			t.Errorf("%s: sequence_number %d; want %d", ev.Type, ev.SequenceNumber, seq)
		}
		seq++
		switch ev.Type {
		case "response.output_text.delta":
			text += ev.AsResponseOutputTextDelta().Delta
		case "response.function_call_arguments.done":
			args = ev.AsResponseFunctionCallArgumentsDone().Arguments
		case "response.completed":
			r := ev.AsResponseCompleted().Response
			completed = &r
		}
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	if text != "Let me look." || args != `{"city":"Paris"}` {
		t.Errorf("text %q args %q", text, args)
	}
	if completed == nil || completed.OutputText() != "Let me look." || completed.Usage.TotalTokens != 29 {
		t.Errorf("response.completed %+v", completed)
	}
}

func TestResponsesCodecSDKReadsStreamError(t *testing.T) {
	t.Parallel()
	e := responses.NewStreamEncoder(ir.StreamOptions{Model: "m"})
	out := e.Encode(nil, ir.StreamEvent{Kind: ir.StreamText, Text: "partial"})
	out = e.Encode(out, ir.StreamEvent{Kind: ir.StreamError, Err: &rewrite.AppError{Status: 503, Class: "overloaded", Message: "busy"}})
	c := responsesSDKClient(t, "text/event-stream", out)
	st := c.Responses.NewStreaming(context.Background(), oresp.ResponseNewParams{Model: "m", Input: oresp.ResponseNewParamsInputUnion{OfString: oai.String("hi")}})
	var sawError, sawFailed bool
	for st.Next() {
		switch ev := st.Current(); ev.Type {
		case "error":
			e := ev.AsError()
			sawError = e.Code == "server_is_overloaded" && e.Message == "busy"
		case "response.failed":
			f := ev.AsResponseFailed()
			sawFailed = f.Response.Status == "failed" && f.Response.Error.Message == "busy"
		}
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	if !sawError || !sawFailed {
		t.Errorf("error event %v, response.failed %v; want both, as the SDK reads them", sawError, sawFailed)
	}
}

// responsesEncodeAll runs events through a StreamEncoder and closes it.
func responsesEncodeAll(evs ...ir.StreamEvent) []byte {
	e := responses.NewStreamEncoder(ir.StreamOptions{Model: "gpt-app", Created: 1700000000})
	var out []byte
	for _, ev := range evs {
		out = e.Encode(out, ev)
	}
	return e.Close(out)
}
