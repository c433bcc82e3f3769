package sdkcheck

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	sdk "github.com/anthropics/anthropic-sdk-go"
	anthropicoption "github.com/anthropics/anthropic-sdk-go/option"
	oai "github.com/openai/openai-go/v3"
	oaioption "github.com/openai/openai-go/v3/option"
	"google.golang.org/genai"

	"github.com/detour-proxy/detour/internal/codectest"
	"github.com/detour-proxy/detour/rewrite"
	"github.com/detour-proxy/detour/rewrite/ir"
	"github.com/detour-proxy/detour/rewrite/translate"
)

// synthText and synthTool are the answers of internal/codectest that
// rewrite/translate's Synthesize tests share.
var (
	synthText = codectest.SynthText
	synthTool = codectest.SynthTool
)

// --- The official SDKs read what Synthesize writes. ---

// synthServer answers every request with Synthesize's output for the app
// shape, streamed when the request asks for it.
func synthServer(t *testing.T, app rewrite.Shape, r *ir.Response) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var body struct {
			Model         string `json:"model"`
			Stream        bool   `json:"stream"`
			StreamOptions struct {
				IncludeUsage bool `json:"include_usage"`
			} `json:"stream_options"`
		}
		_ = json.NewDecoder(req.Body).Decode(&body)
		stream := body.Stream || strings.HasSuffix(req.URL.Path, ":streamGenerateContent")
		model := body.Model
		if app == rewrite.Gemini {
			m, _, _ := rewrite.GeminiModelFromPath(req.URL.Path)
			model = m
		}
		ct, out, err := translate.Synthesize(app, model, r, stream, body.StreamOptions.IncludeUsage)
		if err != nil {
			t.Error(err)
		}
		w.Header().Set("Content-Type", ct)
		_, _ = w.Write(out)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestSynthesizeOpenAISDK(t *testing.T) {
	for _, a := range []*ir.Response{synthText, synthTool} {
		srv := synthServer(t, rewrite.OpenAI, a)
		client := oai.NewClient(oaioption.WithBaseURL(srv.URL), oaioption.WithAPIKey("sk-test"), oaioption.WithMaxRetries(0))
		want := codectest.ViewOf(t, a)
		params := oai.ChatCompletionNewParams{Model: "gpt-4o", Messages: []oai.ChatCompletionMessageParamUnion{oai.UserMessage("hi")}}

		c, err := client.Chat.Completions.New(context.Background(), params)
		if err != nil {
			t.Fatal(err)
		}
		checkOpenAICompletion(t, "json", c.ID, c.Model, c.Choices[0].Message, string(c.Choices[0].FinishReason), c.Usage, want, true)

		for _, includeUsage := range []bool{true, false} {
			params.StreamOptions = oai.ChatCompletionStreamOptionsParam{IncludeUsage: oai.Bool(includeUsage)}
			stream := client.Chat.Completions.NewStreaming(context.Background(), params)
			var acc oai.ChatCompletionAccumulator
			for stream.Next() {
				if !acc.AddChunk(stream.Current()) {
					t.Fatalf("accumulator refused %s", stream.Current().RawJSON())
				}
			}
			if err := stream.Err(); err != nil {
				t.Fatal(err)
			}
			checkOpenAICompletion(t, "stream", acc.ID, acc.Model, acc.Choices[0].Message, string(acc.Choices[0].FinishReason), acc.Usage, want, includeUsage)
		}
	}
}

func checkOpenAICompletion(t *testing.T, how, id, model string, msg oai.ChatCompletionMessage, finish string, u oai.CompletionUsage, want codectest.AnswerView, usage bool) {
	t.Helper()
	if id != "chatcmpl-"+want.ID || model != "gpt-4o" || msg.Content != want.Text {
		t.Errorf("%s: id %q model %q content %q", how, id, model, msg.Content)
	}
	if len(msg.ToolCalls) != len(want.Calls) {
		t.Fatalf("%s: tool calls %+v", how, msg.ToolCalls)
	}
	for i, c := range want.Calls {
		tc := msg.ToolCalls[i]
		if tc.ID != c.ID || tc.Function.Name != c.Name || tc.Function.Arguments != c.Args {
			t.Errorf("%s: call %d = %q %q %q; want %+v", how, i, tc.ID, tc.Function.Name, tc.Function.Arguments, c)
		}
	}
	wantFinish := map[ir.FinishReason]string{ir.FinishStop: "stop", ir.FinishToolCalls: "tool_calls"}[want.Finish]
	if finish != wantFinish {
		t.Errorf("%s: finish %q; want %q", how, finish, wantFinish)
	}
	wantIn, wantOut := want.Usage.Input, want.Usage.Output
	if !usage {
		wantIn, wantOut = 0, 0
	}
	if u.PromptTokens != wantIn || u.CompletionTokens != wantOut || u.TotalTokens != wantIn+wantOut {
		t.Errorf("%s: usage %d/%d/%d", how, u.PromptTokens, u.CompletionTokens, u.TotalTokens)
	}
}

func TestSynthesizeAnthropicSDK(t *testing.T) {
	for _, a := range []*ir.Response{synthText, synthTool} {
		srv := synthServer(t, rewrite.Anthropic, a)
		client := sdk.NewClient(anthropicoption.WithBaseURL(srv.URL), anthropicoption.WithAPIKey("test"), anthropicoption.WithMaxRetries(0))
		params := sdk.MessageNewParams{
			Model: "claude-sonnet-4-5", MaxTokens: 100,
			Messages: []sdk.MessageParam{sdk.NewUserMessage(sdk.NewTextBlock("hi"))},
		}
		want := codectest.ViewOf(t, a)
		msg, err := client.Messages.New(context.Background(), params)
		if err != nil {
			t.Fatal(err)
		}
		checkAnthropicMessage(t, "json", *msg, want)

		stream := client.Messages.NewStreaming(context.Background(), params)
		var acc sdk.Message
		for stream.Next() {
			if err := acc.Accumulate(stream.Current()); err != nil {
				t.Fatal(err)
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		checkAnthropicMessage(t, "stream", acc, want)
	}
}

func checkAnthropicMessage(t *testing.T, how string, msg sdk.Message, want codectest.AnswerView) {
	t.Helper()
	var text, thinking, sig string
	var calls []codectest.CallView
	for _, b := range msg.Content {
		switch b.Type {
		case "text":
			text += b.Text
		case "thinking":
			thinking += b.Thinking
			sig += b.Signature
		case "tool_use":
			var buf bytes.Buffer
			_ = json.Compact(&buf, b.Input)
			calls = append(calls, codectest.CallView{ID: b.ID, Name: b.Name, Args: buf.String()})
		}
	}
	for i := range want.Calls {
		want.Calls[i].ThoughtSignature = ""
	}
	if msg.ID != "msg_"+want.ID || string(msg.Model) != "claude-sonnet-4-5" || text != want.Text || thinking != want.Thinking || sig != want.Signature {
		t.Errorf("%s: id %q model %q text %q thinking %q signature %q", how, msg.ID, msg.Model, text, thinking, sig)
	}
	if !reflect.DeepEqual(calls, want.Calls) {
		t.Errorf("%s: calls %+v; want %+v", how, calls, want.Calls)
	}
	wantStop := map[ir.FinishReason]sdk.StopReason{ir.FinishStop: "end_turn", ir.FinishToolCalls: "tool_use"}[want.Finish]
	if msg.StopReason != wantStop {
		t.Errorf("%s: stop_reason %q; want %q", how, msg.StopReason, wantStop)
	}
	if in := msg.Usage.InputTokens + msg.Usage.CacheReadInputTokens; in != want.Usage.Input || msg.Usage.OutputTokens != want.Usage.Output {
		t.Errorf("%s: usage %+v", how, msg.Usage)
	}
}

func TestSynthesizeGenAISDK(t *testing.T) {
	for _, a := range []*ir.Response{synthText, synthTool} {
		srv := synthServer(t, rewrite.Gemini, a)
		client, err := genai.NewClient(context.Background(), &genai.ClientConfig{
			APIKey: "test-key", Backend: genai.BackendGeminiAPI,
			HTTPOptions: genai.HTTPOptions{BaseURL: srv.URL},
		})
		if err != nil {
			t.Fatal(err)
		}
		want := codectest.ViewOf(t, a)
		resp, err := client.Models.GenerateContent(context.Background(), "gemini-2.5-flash", genai.Text("hi"), nil)
		if err != nil {
			t.Fatal(err)
		}
		checkGenAI(t, "json", []*genai.GenerateContentResponse{resp}, want)

		var chunks []*genai.GenerateContentResponse
		for resp, err := range client.Models.GenerateContentStream(context.Background(), "gemini-2.5-flash", genai.Text("hi"), nil) {
			if err != nil {
				t.Fatal(err)
			}
			chunks = append(chunks, resp)
		}
		checkGenAI(t, "stream", chunks, want)
	}
}

func checkGenAI(t *testing.T, how string, chunks []*genai.GenerateContentResponse, want codectest.AnswerView) {
	t.Helper()
	var text, thinking string
	var calls []codectest.CallView
	for _, c := range chunks {
		if c.ModelVersion != "gemini-2.5-flash" || c.ResponseID != want.ID {
			t.Errorf("%s: modelVersion %q responseId %q", how, c.ModelVersion, c.ResponseID)
		}
		for _, p := range c.Candidates[0].Content.Parts {
			switch {
			case p.FunctionCall != nil:
				args, _ := json.Marshal(p.FunctionCall.Args)
				calls = append(calls, codectest.CallView{ID: p.FunctionCall.ID, Name: p.FunctionCall.Name, Args: string(args), ThoughtSignature: string(p.ThoughtSignature)})
			case p.Thought:
				thinking += p.Text
			default:
				text += p.Text
			}
		}
	}
	for i, c := range want.Calls {
		if c.ThoughtSignature != "" {
			// go-genai decodes the base64 signature into bytes.
			want.Calls[i].ThoughtSignature = "thought"
		}
	}
	if text != want.Text || thinking != want.Thinking || !reflect.DeepEqual(calls, want.Calls) {
		t.Errorf("%s: text %q thinking %q calls %+v; want %q %q %+v", how, text, thinking, calls, want.Text, want.Thinking, want.Calls)
	}
	last := chunks[len(chunks)-1]
	if last.Candidates[0].FinishReason != genai.FinishReasonStop {
		t.Errorf("%s: finishReason %q", how, last.Candidates[0].FinishReason)
	}
	if u := last.UsageMetadata; u == nil || int64(u.PromptTokenCount) != want.Usage.Input || int64(u.CandidatesTokenCount) != want.Usage.Output {
		t.Errorf("%s: usage %+v", how, u)
	}
}
