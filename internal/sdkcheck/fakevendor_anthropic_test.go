package sdkcheck

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"

	fv "github.com/detour-proxy/detour/internal/fakevendor"
	"github.com/detour-proxy/detour/rewrite"
)

// anthropicClient is the official SDK pointed at url, without retries.
func anthropicClient(url string) anthropic.Client {
	return anthropic.NewClient(
		option.WithBaseURL(url),
		option.WithAPIKey("sk-ant-test"),
		option.WithMaxRetries(0),
	)
}

func anthropicParams() anthropic.MessageNewParams {
	return anthropic.MessageNewParams{
		Model:     "claude-sonnet-4-5", // the fake accepts any model name
		MaxTokens: 64,
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Say hi"))},
	}
}

func TestAnthropicSDKMessage(t *testing.T) {
	t.Parallel()
	v, srv := serve(t, rewrite.Anthropic, fv.Options{Name: "beta"})
	client := anthropicClient(srv.URL)

	msg, err := client.Messages.New(context.Background(), anthropicParams())
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if len(msg.Content) != 1 || msg.Content[0].Text != "Hello from beta." {
		t.Fatalf("content = %+v; want one text block %q", msg.Content, "Hello from beta.")
	}
	if msg.StopReason != anthropic.StopReasonEndTurn || msg.Model != "claude-sonnet-4-5" || msg.Role != "assistant" {
		t.Errorf("stop_reason %q model %q role %q", msg.StopReason, msg.Model, msg.Role)
	}
	if msg.Usage.OutputTokens != 3 || msg.Usage.InputTokens < 1 {
		t.Errorf("usage = in %d out %d; want out 3", msg.Usage.InputTokens, msg.Usage.OutputTokens)
	}
	r := v.Requests()[0]
	if r.Header.Get("x-api-key") != "sk-ant-test" || r.Header.Get("anthropic-version") == "" {
		t.Errorf("recorded headers lack the SDK's key and version: %v", r.Header)
	}
	if r.Model != "claude-sonnet-4-5" || r.Stream {
		t.Errorf("recorded model %q stream %v", r.Model, r.Stream)
	}
}

func TestAnthropicSDKStream(t *testing.T) {
	t.Parallel()
	v, srv := serve(t, rewrite.Anthropic, fv.Options{Name: "beta", Chunks: 2})
	client := anthropicClient(srv.URL)

	stream := client.Messages.NewStreaming(context.Background(), anthropicParams())
	var msg anthropic.Message
	var types []string
	for stream.Next() {
		ev := stream.Current()
		types = append(types, ev.Type)
		if err := msg.Accumulate(ev); err != nil {
			t.Fatalf("Accumulate(%s): %v", ev.Type, err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	// The SDK drops ping events; TestAnthropicRawStream sees it.
	want := "message_start content_block_start content_block_delta content_block_delta content_block_stop message_delta message_stop"
	if got := strings.Join(types, " "); got != want {
		t.Errorf("events = %s\nwant     %s", got, want)
	}
	if len(msg.Content) != 1 || msg.Content[0].Text != "Hello from beta." {
		t.Errorf("content = %+v", msg.Content)
	}
	if msg.StopReason != anthropic.StopReasonEndTurn {
		t.Errorf("stop_reason = %q", msg.StopReason)
	}
	if msg.Usage.OutputTokens != 3 || msg.Usage.InputTokens < 1 {
		t.Errorf("usage = in %d out %d; want out 3", msg.Usage.InputTokens, msg.Usage.OutputTokens)
	}
	if !v.Requests()[0].Stream {
		t.Error("recorded request is not marked as a stream")
	}
}

func TestAnthropicSDKStreamErrorEarly(t *testing.T) {
	t.Parallel()
	v, srv := serve(t, rewrite.Anthropic, fv.Options{})
	v.Script(fv.Fault{Kind: fv.StreamErrorEarly})
	client := anthropicClient(srv.URL)

	stream := client.Messages.NewStreaming(context.Background(), anthropicParams())
	var msg anthropic.Message
	n := 0
	for stream.Next() {
		n++
		if err := msg.Accumulate(stream.Current()); err != nil {
			t.Fatal(err)
		}
	}
	err := stream.Err()
	if err == nil || !strings.Contains(err.Error(), "overloaded_error") {
		t.Fatalf("stream error = %v; want one containing overloaded_error", err)
	}
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) {
		t.Fatalf("err = %T; want *anthropic.Error", err)
	}
	if apiErr.Type() != "overloaded_error" || apiErr.StatusCode != 200 {
		t.Errorf("error type %q status %d; want overloaded_error inside a 200", apiErr.Type(), apiErr.StatusCode)
	}
	if n != 1 || len(msg.Content) != 0 {
		t.Errorf("got %d events and content %+v before the error; want message_start only", n, msg.Content)
	}
}

func TestAnthropicSDKStatusErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		fault      fv.Fault
		wantStatus int
		wantType   string
	}{
		{fv.Fault{Kind: fv.Status, Class: fv.ClassOverloaded}, 529, "overloaded_error"},
		{fv.Fault{Kind: fv.Status, Class: fv.ClassSpendLimit}, 429, "rate_limit_error"},
		{fv.Fault{Kind: fv.Status, Class: fv.ClassCreditBalance}, 400, "invalid_request_error"},
		{fv.Fault{Kind: fv.Status, Class: fv.ClassAuth}, 401, "authentication_error"},
	} {
		t.Run(tc.fault.String(), func(t *testing.T) {
			v, srv := serve(t, rewrite.Anthropic, fv.Options{})
			v.Script(tc.fault)
			client := anthropicClient(srv.URL)
			_, err := client.Messages.New(context.Background(), anthropicParams())
			var apiErr *anthropic.Error
			if !errors.As(err, &apiErr) {
				t.Fatalf("err = %v (%T); want *anthropic.Error", err, err)
			}
			if apiErr.StatusCode != tc.wantStatus || string(apiErr.Type()) != tc.wantType {
				t.Errorf("status %d type %q; want %d %q", apiErr.StatusCode, apiErr.Type(), tc.wantStatus, tc.wantType)
			}
			if want := v.Requests()[0].RequestID; apiErr.RequestID != want {
				t.Errorf("request id = %q; want %q", apiErr.RequestID, want)
			}
		})
	}
}
