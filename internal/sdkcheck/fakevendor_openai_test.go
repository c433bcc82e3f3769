package sdkcheck

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	fv "github.com/detour-proxy/detour/internal/fakevendor"
	"github.com/detour-proxy/detour/rewrite"
)

// openaiClient is the official SDK pointed at srv, without retries.
func openaiClient(url string) openai.Client {
	return openai.NewClient(
		option.WithBaseURL(url+"/v1/"),
		option.WithAPIKey("sk-test-key"),
		option.WithMaxRetries(0),
	)
}

func openaiParams() openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{
		Model:    "gpt-4o",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Say hi")},
	}
}

func TestOpenAISDKCompletion(t *testing.T) {
	t.Parallel()
	v, srv := serve(t, rewrite.OpenAI, fv.Options{Name: "alpha"})
	client := openaiClient(srv.URL)

	got, err := client.Chat.Completions.New(context.Background(), openaiParams())
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if len(got.Choices) != 1 {
		t.Fatalf("choices = %d; want 1", len(got.Choices))
	}
	if c := got.Choices[0]; c.Message.Content != "Hello from alpha." || c.FinishReason != "stop" || c.Message.Role != "assistant" {
		t.Errorf("choice = %q %q %q; want assistant, %q, stop", c.Message.Role, c.Message.Content, c.FinishReason, "Hello from alpha.")
	}
	if got.Model != "gpt-4o" || got.Object != "chat.completion" || !strings.HasPrefix(got.ID, "chatcmpl-") {
		t.Errorf("envelope = id %q object %q model %q", got.ID, got.Object, got.Model)
	}
	u := got.Usage
	if u.CompletionTokens != 3 || u.PromptTokens < 1 || u.TotalTokens != u.PromptTokens+u.CompletionTokens {
		t.Errorf("usage = %+v; want 3 completion tokens and a consistent total", u)
	}

	reqs := v.Requests()
	if len(reqs) != 1 {
		t.Fatalf("recorded %d requests; want 1", len(reqs))
	}
	r := reqs[0]
	if r.Path != "/v1/chat/completions" || r.Model != "gpt-4o" || r.Stream {
		t.Errorf("recorded path %q model %q stream %v", r.Path, r.Model, r.Stream)
	}
	if h := r.Header.Get("Authorization"); h != "Bearer sk-test-key" {
		t.Errorf("recorded Authorization = %q", h)
	}
	if !strings.Contains(string(r.Body), `"Say hi"`) {
		t.Errorf("recorded body %s lacks the prompt", r.Body)
	}
}

func TestOpenAISDKStreamWithUsage(t *testing.T) {
	t.Parallel()
	_, srv := serve(t, rewrite.OpenAI, fv.Options{Name: "alpha", Chunks: 3})
	client := openaiClient(srv.URL)
	params := openaiParams()
	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}

	stream := client.Chat.Completions.NewStreaming(context.Background(), params)
	var acc openai.ChatCompletionAccumulator
	var deltas []string
	for stream.Next() {
		chunk := stream.Current()
		if !acc.AddChunk(chunk) {
			t.Fatalf("accumulator rejected chunk %s", chunk.RawJSON())
		}
		if len(chunk.Choices) > 0 && chunk.Choices[0].Delta.Content != "" {
			deltas = append(deltas, chunk.Choices[0].Delta.Content)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	if got := strings.Join(deltas, "|"); got != "Hello| from| alpha." {
		t.Errorf("deltas = %q; want %q", got, "Hello| from| alpha.")
	}
	if got := acc.Choices[0].Message.Content; got != "Hello from alpha." {
		t.Errorf("text = %q", got)
	}
	if got := acc.Choices[0].FinishReason; got != "stop" {
		t.Errorf("finish_reason = %q; want stop", got)
	}
	if u := acc.Usage; u.CompletionTokens != 3 || u.PromptTokens < 1 || u.TotalTokens != u.PromptTokens+3 {
		t.Errorf("usage = %+v", u)
	}
	if acc.Model != "gpt-4o" {
		t.Errorf("model = %q", acc.Model)
	}
}

func TestOpenAISDKInsufficientQuota(t *testing.T) {
	t.Parallel()
	v, srv := serve(t, rewrite.OpenAI, fv.Options{})
	v.Script(fv.Fault{Kind: fv.Status, Status: 429, Class: fv.ClassInsufficientQuota})
	client := openaiClient(srv.URL)

	_, err := client.Chat.Completions.New(context.Background(), openaiParams())
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) {
		t.Fatalf("err = %v (%T); want *openai.Error", err, err)
	}
	if apiErr.StatusCode != 429 || apiErr.Code != "insufficient_quota" || apiErr.Type != "insufficient_quota" {
		t.Errorf("error = status %d code %q type %q; want 429 insufficient_quota", apiErr.StatusCode, apiErr.Code, apiErr.Type)
	}
	// The queue is spent: the next call succeeds.
	if _, err := client.Chat.Completions.New(context.Background(), openaiParams()); err != nil {
		t.Errorf("second call: %v", err)
	}
}

func TestOpenAISDKStreamErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		fault    fv.Fault
		wantText string
		wantErr  string
	}{
		{"early", fv.Fault{Kind: fv.StreamErrorEarly}, "", `"type":"server_error"`},
		{"mid", fv.Fault{Kind: fv.StreamErrorMid, Class: fv.ClassRateLimit}, "Hello from", "rate_limit_exceeded"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, srv := serve(t, rewrite.OpenAI, fv.Options{Name: "alpha"})
			v.Script(tc.fault)
			client := openaiClient(srv.URL)
			stream := client.Chat.Completions.NewStreaming(context.Background(), openaiParams())
			var acc openai.ChatCompletionAccumulator
			for stream.Next() {
				acc.AddChunk(stream.Current())
			}
			err := stream.Err()
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("stream error = %v; want one containing %q", err, tc.wantErr)
			}
			got := ""
			if len(acc.Choices) > 0 {
				got = acc.Choices[0].Message.Content
			}
			if got != tc.wantText {
				t.Errorf("text before the error = %q; want %q", got, tc.wantText)
			}
		})
	}
}
