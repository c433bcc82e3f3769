package sdkcheck

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/shared"

	"github.com/detour-proxy/detour/internal/codectest"
	"github.com/detour-proxy/detour/rewrite"
	"github.com/detour-proxy/detour/rewrite/ir"
	"github.com/detour-proxy/detour/rewrite/openai"
	"github.com/detour-proxy/detour/rewrite/sse"
)

// These tests hold rewrite/openai's encoders to the official openai-go
// SDK: whatever detour translates must be what the SDK would have got from
// OpenAI (docs/vendors.md#openai-go). The answer and the streams are those
// of rewrite/openai's tests, whose request fuzz target (which needs no SDK)
// stays there.

// openaiSDKServer is a stand-in for detour: it records every request body and
// answers with the next canned body.
type openaiSDKServer struct {
	mu      sync.Mutex
	bodies  [][]byte
	answers [][]byte
	stream  bool
}

func (s *openaiSDKServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	n := len(s.bodies)
	s.bodies = append(s.bodies, body)
	s.mu.Unlock()
	if s.stream {
		w.Header().Set("Content-Type", "text/event-stream")
	} else {
		w.Header().Set("Content-Type", "application/json")
	}
	_, _ = w.Write(s.answers[n])
}

func newOpenAISDKClient(t *testing.T, s *openaiSDKServer) oai.Client {
	t.Helper()
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return oai.NewClient(option.WithBaseURL(srv.URL), option.WithAPIKey("sk-test"), option.WithMaxRetries(0))
}

// openaiToolAnswer is an answer as another vendor's decoder gives it: thinking,
// text, then a tool call, with Anthropic's end_turn-style "stop" finish.
var openaiToolAnswer = &ir.Response{
	ID: "msg_01", Model: "claude-sonnet-4-5", Created: testCreated,
	Parts: []ir.Part{
		{Kind: ir.PartThinking, Text: "The user wants weather.", Signature: "sig"},
		{Kind: ir.PartText, Text: "Let me look."},
		{Kind: ir.PartToolCall, ToolCall: &ir.ToolCall{ID: "toolu_01", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Paris","units":"c"}`)}},
	},
	Finish: ir.FinishStop,
	Usage:  ir.TokenUsage{Input: 120, Output: 30, CachedInput: 100, Reasoning: 7},
}

// TestOpenAICodecSDKDecodesEncodedResponse: a translated answer decodes into
// openai.ChatCompletion with the text, the tool call, the finish reason
// and the usage where the SDK puts them.
func TestOpenAICodecSDKDecodesEncodedResponse(t *testing.T) {
	body, err := openai.EncodeResponse(openaiToolAnswer, "gpt-4o")
	if err != nil {
		t.Fatal(err)
	}
	var c oai.ChatCompletion
	if err := json.Unmarshal(body, &c); err != nil {
		t.Fatalf("openai-go cannot decode %s: %v", body, err)
	}
	if c.ID != "chatcmpl-msg_01" || c.Model != "gpt-4o" || c.Created != testCreated || len(c.Choices) != 1 {
		t.Fatalf("envelope: id %q model %q created %d choices %d", c.ID, c.Model, c.Created, len(c.Choices))
	}
	ch := c.Choices[0]
	if ch.Message.Content != "Let me look." {
		t.Errorf("content %q", ch.Message.Content)
	}
	if ch.FinishReason != "tool_calls" {
		t.Errorf("finish_reason %q; want tool_calls after a tool call (docs/vendors.md#finish-after-tool-calls)", ch.FinishReason)
	}
	if len(ch.Message.ToolCalls) != 1 {
		t.Fatalf("tool calls: %+v", ch.Message.ToolCalls)
	}
	tc := ch.Message.ToolCalls[0]
	if tc.ID != "toolu_01" || tc.Type != "function" || tc.Function.Name != "get_weather" {
		t.Errorf("tool call %+v", tc)
	}
	var args map[string]string
	if err := json.Unmarshal([]byte(tc.Function.Arguments), &args); err != nil || args["city"] != "Paris" {
		t.Errorf("arguments %q: %v", tc.Function.Arguments, err)
	}
	u := c.Usage
	if u.PromptTokens != 120 || u.CompletionTokens != 30 || u.TotalTokens != 150 ||
		u.PromptTokensDetails.CachedTokens != 100 || u.CompletionTokensDetails.ReasoningTokens != 7 {
		t.Errorf("usage %+v", u)
	}

	// Only tool calls: content is null, which the SDK reads as "".
	onlyTool := *openaiToolAnswer
	onlyTool.Parts = onlyTool.Parts[2:]
	body, err = openai.EncodeResponse(&onlyTool, "gpt-4o")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(body, []byte(`"content":null`)) {
		t.Errorf("content not null for a tool-only answer: %s", body)
	}
	c = oai.ChatCompletion{}
	if err := json.Unmarshal(body, &c); err != nil || c.Choices[0].Message.Content != "" || len(c.Choices[0].Message.ToolCalls) != 1 {
		t.Errorf("tool-only answer: %v %+v", err, c.Choices)
	}
}

// TestOpenAICodecSDKToolRoundTrip runs a whole tool round trip through the real
// client: the app asks, gets a translated tool call, appends it with
// ToParam and a tool result, and asks again. The second request decodes
// into the IR another vendor's encoder needs (arguments as an object, the
// result tied to the call's id and name).
func TestOpenAICodecSDKToolRoundTrip(t *testing.T) {
	first, err := openai.EncodeResponse(openaiToolAnswer, "gpt-4o")
	if err != nil {
		t.Fatal(err)
	}
	final, err := openai.EncodeResponse(&ir.Response{
		ID: "msg_02", Created: testCreated,
		Parts:  []ir.Part{{Kind: ir.PartText, Text: "18°C in Paris."}},
		Finish: ir.FinishStop, Usage: ir.TokenUsage{Input: 150, Output: 8},
	}, "gpt-4o")
	if err != nil {
		t.Fatal(err)
	}
	s := &openaiSDKServer{answers: [][]byte{first, final}}
	client := newOpenAISDKClient(t, s)
	ctx := context.Background()
	params := oai.ChatCompletionNewParams{
		Model: "gpt-4o",
		Messages: []oai.ChatCompletionMessageParamUnion{
			oai.SystemMessage("You are a weather bot."),
			oai.DeveloperMessage("Use Celsius."),
			oai.UserMessage([]oai.ChatCompletionContentPartUnionParam{
				oai.TextContentPart("Weather here?"),
				oai.ImageContentPart(oai.ChatCompletionContentPartImageImageURLParam{URL: "data:image/png;base64,iVBORw0KGgo=", Detail: "low"}),
			}),
		},
		Tools: []oai.ChatCompletionToolUnionParam{oai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name:        "get_weather",
			Description: oai.String("Weather for a city"),
			Parameters:  shared.FunctionParameters{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}},
			Strict:      oai.Bool(true),
		})},
		ToolChoice:          oai.ToolChoiceOptionFunctionToolChoice(oai.ChatCompletionNamedToolChoiceFunctionParam{Name: "get_weather"}),
		ParallelToolCalls:   oai.Bool(false),
		MaxCompletionTokens: oai.Int(300),
		Temperature:         oai.Float(0.2),
		Seed:                oai.Int(5),
		User:                oai.String("u-9"),
	}
	resp, err := client.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	msg := resp.Choices[0].Message
	if len(msg.ToolCalls) != 1 || resp.Choices[0].FinishReason != "tool_calls" {
		t.Fatalf("first answer: %+v", resp.Choices[0])
	}
	params.Messages = append(params.Messages, msg.ToParam(), oai.ToolMessage(`{"temp":18}`, msg.ToolCalls[0].ID))
	resp, err = client.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Choices[0].Message.Content; got != "18°C in Paris." {
		t.Errorf("final answer %q", got)
	}

	r, err := openai.DecodeRequest(s.bodies[1])
	if err != nil {
		t.Fatalf("DecodeRequest(%s): %v", s.bodies[1], err)
	}
	want := &ir.Request{
		Model:  "gpt-4o",
		System: []string{"You are a weather bot.", "Use Celsius."},
		Messages: []ir.Message{
			{Role: ir.RoleUser, Parts: []ir.Part{
				{Kind: ir.PartText, Text: "Weather here?"},
				{Kind: ir.PartImage, Media: &ir.Media{MediaType: "image/png", Data: "iVBORw0KGgo=", Detail: "low"}},
			}},
			{Role: ir.RoleAssistant, Parts: []ir.Part{
				{Kind: ir.PartText, Text: "Let me look."},
				{Kind: ir.PartToolCall, ToolCall: &ir.ToolCall{ID: "toolu_01", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Paris","units":"c"}`)}},
			}},
			{Role: ir.RoleTool, Parts: []ir.Part{{Kind: ir.PartToolResult, ToolResult: &ir.ToolResult{CallID: "toolu_01", Name: "get_weather", Content: `{"temp":18}`}}}},
		},
		Tools:             []ir.Tool{{Name: "get_weather", Description: "Weather for a city", Parameters: json.RawMessage(`{"properties":{"city":{"type":"string"}},"type":"object"}`), Strict: true}},
		ToolChoice:        &ir.ToolChoice{Mode: ir.ToolChoiceTool, Name: "get_weather"},
		ParallelToolCalls: ptr(false),
		MaxTokens:         300,
		Temperature:       ptr(0.2),
		Seed:              ptr(int64(5)),
		User:              "u-9",
	}
	if !reflect.DeepEqual(codectest.NormalizeRequest(t, r), codectest.NormalizeRequest(t, want)) {
		t.Errorf("decoded SDK request\n got %s\nwant %s", codectest.MarshalIndent(t, r), codectest.MarshalIndent(t, want))
	}
}

// openaiAccumulate feeds every chunk of an encoded stream to a
// ChatCompletionAccumulator, as an app does, and checks the stream ends
// with [DONE].
func openaiAccumulate(t *testing.T, stream []byte) oai.ChatCompletionAccumulator {
	t.Helper()
	var acc oai.ChatCompletionAccumulator
	lines := codectest.OpenAIDataLines(t, stream)
	if string(lines[len(lines)-1]) != "[DONE]" {
		t.Fatalf("stream does not end with [DONE]: %q", lines[len(lines)-1])
	}
	for _, line := range lines[:len(lines)-1] {
		var c oai.ChatCompletionChunk
		if err := json.Unmarshal(line, &c); err != nil {
			t.Fatalf("chunk %s: %v", line, err)
		}
		if !acc.AddChunk(c) {
			t.Fatalf("accumulator refused chunk %s", line)
		}
	}
	return acc
}

func TestOpenAICodecSDKAccumulatesTextStream(t *testing.T) {
	for _, includeUsage := range []bool{true, false} {
		stream := openaiEncodeEvents(codectest.OpenAITextStream, ir.StreamOptions{Model: "gpt-4o", IncludeUsage: includeUsage, Created: testCreated})
		acc := openaiAccumulate(t, stream)
		if acc.ID != "chatcmpl-msg_01" || acc.Model != "gpt-4o" || len(acc.Choices) != 1 {
			t.Fatalf("include_usage=%v: id %q model %q choices %d", includeUsage, acc.ID, acc.Model, len(acc.Choices))
		}
		ch := acc.Choices[0]
		if ch.Message.Content != "Hi there, \"friend\" <3\n" || ch.Message.Role != "assistant" {
			t.Errorf("include_usage=%v: message %+v", includeUsage, ch.Message)
		}
		if ch.FinishReason != "stop" {
			t.Errorf("include_usage=%v: finish_reason %q", includeUsage, ch.FinishReason)
		}
		want := oai.CompletionUsage{PromptTokens: 9, CompletionTokens: 6, TotalTokens: 15}
		if !includeUsage {
			want = oai.CompletionUsage{}
		}
		if got := acc.Usage; got.PromptTokens != want.PromptTokens || got.CompletionTokens != want.CompletionTokens || got.TotalTokens != want.TotalTokens {
			t.Errorf("include_usage=%v: usage %d/%d/%d; want %d/%d/%d", includeUsage,
				got.PromptTokens, got.CompletionTokens, got.TotalTokens, want.PromptTokens, want.CompletionTokens, want.TotalTokens)
		}
		if includeUsage != bytes.Contains(stream, []byte(`"usage":null`)) {
			t.Errorf("include_usage=%v but \"usage\":null presence differs:\n%s", includeUsage, stream)
		}
	}
}

func TestOpenAICodecSDKAccumulatesParallelToolCalls(t *testing.T) {
	stream := openaiEncodeEvents(codectest.OpenAIParallelToolStream, ir.StreamOptions{Model: "gpt-4o", IncludeUsage: true, Created: testCreated})
	acc := openaiAccumulate(t, stream)
	ch := acc.Choices[0]
	if ch.FinishReason != "tool_calls" {
		t.Errorf("finish_reason %q; want tool_calls", ch.FinishReason)
	}
	if len(ch.Message.ToolCalls) != 2 {
		t.Fatalf("tool calls %+v", ch.Message.ToolCalls)
	}
	want := []struct{ id, name, args string }{
		{"call_a", "get_weather", `{"city":"Paris"}`},
		{"call_b", "get_time", `{"tz":"Europe/Rome"}`},
	}
	for i, w := range want {
		tc := ch.Message.ToolCalls[i]
		if tc.ID != w.id || tc.Function.Name != w.name || tc.Type != "function" {
			t.Errorf("call %d: id %q name %q type %q; want %q %q", i, tc.ID, tc.Function.Name, tc.Type, w.id, w.name)
		}
		if !json.Valid([]byte(tc.Function.Arguments)) || tc.Function.Arguments != w.args {
			t.Errorf("call %d: arguments %q; want %q", i, tc.Function.Arguments, w.args)
		}
	}
	if acc.Usage.PromptTokens != 20 || acc.Usage.CompletionTokens != 12 || acc.Usage.TotalTokens != 32 {
		t.Errorf("usage %+v", acc.Usage)
	}
}

// TestOpenAICodecSDKStreamThroughClient reads translated streams with the real
// client's NewStreaming: the text arrives, [DONE] ends the stream cleanly,
// and an in-stream error ends it with an ssestream.StreamError.
func TestOpenAICodecSDKStreamThroughClient(t *testing.T) {
	ok := openaiEncodeEvents(codectest.OpenAITextStream, ir.StreamOptions{Model: "gpt-4o", IncludeUsage: true})
	e := openai.NewStreamEncoder(ir.StreamOptions{Model: "gpt-4o"})
	var failed []byte
	failed = e.Encode(failed, ir.StreamEvent{Kind: ir.StreamStart, ID: "x"})
	failed = e.Encode(failed, ir.StreamEvent{Kind: ir.StreamText, Text: "par"})
	failed = e.Encode(failed, ir.StreamEvent{Kind: ir.StreamError, Err: &rewrite.AppError{Class: "overloaded", Message: "upstream overloaded"}})
	failed = e.Close(failed)

	s := &openaiSDKServer{stream: true, answers: [][]byte{ok, failed}}
	client := newOpenAISDKClient(t, s)
	params := oai.ChatCompletionNewParams{
		Model:         "gpt-4o",
		Messages:      []oai.ChatCompletionMessageParamUnion{oai.UserMessage("hi")},
		StreamOptions: oai.ChatCompletionStreamOptionsParam{IncludeUsage: oai.Bool(true)},
	}

	stream := client.Chat.Completions.NewStreaming(context.Background(), params)
	var acc oai.ChatCompletionAccumulator
	for stream.Next() {
		if !acc.AddChunk(stream.Current()) {
			t.Fatalf("accumulator refused %+v", stream.Current())
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if acc.Choices[0].Message.Content != "Hi there, \"friend\" <3\n" || acc.Usage.TotalTokens != 15 {
		t.Errorf("accumulated %q, usage %+v", acc.Choices[0].Message.Content, acc.Usage)
	}

	stream = client.Chat.Completions.NewStreaming(context.Background(), params)
	var text strings.Builder
	for stream.Next() {
		for _, c := range stream.Current().Choices {
			text.WriteString(c.Delta.Content)
		}
	}
	var se *ssestream.StreamError
	if !errors.As(stream.Err(), &se) || !strings.Contains(se.Message, "upstream overloaded") {
		t.Errorf("stream error %v; want an ssestream.StreamError with the message", stream.Err())
	}
	if text.String() != "par" {
		t.Errorf("text before the error %q", text.String())
	}

	r, err := openai.DecodeRequest(s.bodies[0])
	if err != nil || !r.Stream || !r.IncludeUsage {
		t.Errorf("the SDK's streaming request decodes to stream=%v include_usage=%v (%v)", r.Stream, r.IncludeUsage, err)
	}
}

// The fuzz targets hold the decoders to: no panic, and either an error or
// an IR that encodes to valid JSON which decodes again (for streams: which
// openai-go accumulates without refusing a chunk). Run one with, e.g.,
// go test -run '^$' -fuzz FuzzOpenAICodecStreamDecoder -fuzztime 30s ./internal/sdkcheck/

func FuzzOpenAICodecDecodeResponse(f *testing.F) {
	addSeeds(f, openaiTestdata, "responses/*.json")
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := openai.DecodeResponse(body)
		if err != nil {
			return
		}
		out, err := openai.EncodeResponse(r, "gpt-4o")
		if err != nil {
			t.Fatalf("EncodeResponse of a decoded response: %v", err)
		}
		if !json.Valid(out) {
			t.Fatalf("EncodeResponse wrote invalid JSON: %s", out)
		}
		var c oai.ChatCompletion
		if err := json.Unmarshal(out, &c); err != nil {
			t.Fatalf("openai-go cannot decode %s: %v", out, err)
		}
		if _, err := openai.DecodeResponse(out); err != nil {
			t.Fatalf("own output %s does not decode: %v", out, err)
		}
	})
}

func FuzzOpenAICodecStreamDecoder(f *testing.F) {
	addSeeds(f, openaiTestdata, "streams/*.sse")
	f.Add([]byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":7,\"function\":{\"arguments\":\"x\"}}]}}]}\n\n"))
	f.Fuzz(func(t *testing.T, stream []byte) {
		rd := sse.NewReader(bytes.NewReader(stream))
		d := openai.NewStreamDecoder()
		e := openai.NewStreamEncoder(ir.StreamOptions{Model: "gpt-4o", IncludeUsage: true, Created: testCreated})
		var out []byte
		for {
			ev, err := rd.Next()
			if err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				return
			}
			evs, err := d.Decode(ev)
			if err != nil {
				continue
			}
			for _, x := range evs {
				out = e.Encode(out, x)
			}
		}
		out = e.Close(out)
		checkOpenAIAppStream(t, out)
	})
}

// checkOpenAIAppStream checks an encoded stream the way openai-go reads it: every
// event one data line of JSON (or [DONE]), every chunk accepted by the
// accumulator, and detour's own decoder reading it without error.
func checkOpenAIAppStream(t *testing.T, out []byte) {
	t.Helper()
	var acc oai.ChatCompletionAccumulator
	d := openai.NewStreamDecoder()
	rd := sse.NewReader(bytes.NewReader(out))
	for {
		ev, err := rd.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(ev.Raw, []byte("data: ")) || bytes.Count(ev.Raw, []byte("\n")) != 2 {
			t.Fatalf("event is not one data line: %q", ev.Raw)
		}
		if string(ev.Data) == "[DONE]" {
			continue
		}
		if !json.Valid(ev.Data) {
			t.Fatalf("invalid JSON %s", ev.Data)
		}
		if _, err := d.Decode(ev); err != nil {
			t.Fatalf("own output %s does not decode: %v", ev.Data, err)
		}
		var c oai.ChatCompletionChunk
		if err := json.Unmarshal(ev.Data, &c); err != nil {
			t.Fatalf("openai-go cannot decode %s: %v", ev.Data, err)
		}
		if bytes.Contains(ev.Data, []byte(`"error"`)) && c.ID == "" {
			continue // the in-stream error event, which ends the SDK's stream
		}
		if !acc.AddChunk(c) {
			t.Fatalf("accumulator refused %s", ev.Data)
		}
	}
}
