package sdkcheck

import (
	"context"
	"errors"
	"net/http/httptest"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	fv "github.com/detour-proxy/detour/internal/fakevendor"
	"github.com/detour-proxy/detour/rewrite"
)

// The Responses fake is read by openai-go's own Responses client: what the
// SDK parses is what the fake must send.

func responsesClient(t *testing.T, v *fv.Vendor) openai.Client {
	t.Helper()
	srv := httptest.NewServer(v)
	t.Cleanup(srv.Close)
	return openai.NewClient(option.WithBaseURL(srv.URL+"/v1"), option.WithAPIKey("sk-test"), option.WithMaxRetries(0))
}

func responsesTool() responses.ToolUnionParam {
	return responses.ToolUnionParam{OfFunction: &responses.FunctionToolParam{
		Name:       "get_weather",
		Parameters: map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}, "required": []string{"city"}},
	}}
}

func TestResponsesFakeAnswersTheSDK(t *testing.T) {
	t.Parallel()
	v := fv.New(rewrite.OpenAIResponses, fv.Options{Name: "resp"})
	c := responsesClient(t, v)
	ctx := context.Background()
	r, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: "gpt-4.1", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}})
	if err != nil {
		t.Fatal(err)
	}
	if r.OutputText() != "Hello from resp." || r.Usage.TotalTokens == 0 {
		t.Errorf("text %q usage %+v", r.OutputText(), r.Usage)
	}

	st := c.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: "gpt-4.1", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}})
	var text string
	var seq int64
	var last string
	for st.Next() {
		ev := st.Current()
		if ev.SequenceNumber != seq {
			t.Errorf("%s: sequence_number %d; want %d", ev.Type, ev.SequenceNumber, seq)
		}
		seq++
		last = ev.Type
		if ev.Type == "response.output_text.delta" {
			text += ev.Delta
		}
	}
	if err := st.Err(); err != nil || text != "Hello from resp." || last != "response.completed" {
		t.Errorf("stream: err %v text %q last %q", err, text, last)
	}
}

func TestResponsesFakeToolRoundTrip(t *testing.T) {
	t.Parallel()
	v := fv.New(rewrite.OpenAIResponses, fv.Options{Name: "resp"})
	c := responsesClient(t, v)
	ctx := context.Background()
	params := responses.ResponseNewParams{Model: "gpt-4.1", Tools: []responses.ToolUnionParam{responsesTool()},
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("weather?")}}
	r, err := c.Responses.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	fc := r.Output[0].AsFunctionCall()
	if r.Output[0].Type != "function_call" || fc.Name != "get_weather" || fc.CallID == "" {
		t.Fatalf("output %+v", r.Output)
	}
	out := responses.ResponseInputItemParamOfFunctionCallOutput(toolOutput)
	out.OfFunctionCallOutput.CallID = openai.String(fc.CallID)
	params.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
		responses.ResponseInputItemParamOfMessage("weather?", responses.EasyInputMessageRoleUser),
		responses.ResponseInputItemParamOfFunctionCall(fc.Arguments, fc.CallID, fc.Name),
		out,
	}}
	r, err = c.Responses.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if want := fv.ToolResultPrefix + toolOutput; r.OutputText() != want {
		t.Errorf("text %q; want %q", r.OutputText(), want)
	}
	if got := v.Requests()[1].ToolResults; len(got) != 1 || got[0].Name != "get_weather" {
		t.Errorf("tool results %+v", got)
	}
}

func TestResponsesFakeErrors(t *testing.T) {
	t.Parallel()
	v := fv.New(rewrite.OpenAIResponses, fv.Options{Name: "resp"})
	v.Script(fv.Fault{Kind: fv.Status, Class: fv.ClassRateLimit}, fv.Fault{Kind: fv.StreamErrorMid, Class: fv.ClassServerError})
	c := responsesClient(t, v)
	ctx := context.Background()
	_, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: "gpt-4.1", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 429 || apiErr.Code != "rate_limit_exceeded" {
		t.Errorf("err %v; want a 429 rate_limit_exceeded", err)
	}
	st := c.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: "gpt-4.1", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}})
	var sawError bool
	for st.Next() {
		if ev := st.Current(); ev.Type == "error" {
			sawError = ev.AsError().Code == "server_error"
		}
	}
	if !sawError {
		t.Error("no error event in a StreamErrorMid stream")
	}
}
