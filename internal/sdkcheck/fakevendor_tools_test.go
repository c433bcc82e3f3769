package sdkcheck

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"

	fv "github.com/detour-proxy/detour/internal/fakevendor"
	"github.com/detour-proxy/detour/rewrite"
)

// toolOutput is what the tests' tools return: JSON with quotes, a non-ASCII
// character and HTML characters, so that any mangling on the way shows.
const toolOutput = `{"temp":21,"unit":"°C","sky":"<clear> & dry"}`

// --- OpenAI ---

func openaiSDKTools() []openai.ChatCompletionToolUnionParam {
	return []openai.ChatCompletionToolUnionParam{
		openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name: "get_weather",
			Parameters: shared.FunctionParameters{
				"type":       "object",
				"properties": map[string]any{"city": map[string]any{"type": "string"}, "days": map[string]any{"type": "integer"}},
				"required":   []string{"city"},
			},
		}),
		openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name: "get_time",
			Parameters: shared.FunctionParameters{
				"type":       "object",
				"properties": map[string]any{"tz": map[string]any{"type": "string"}, "utc": map[string]any{"type": "boolean"}},
			},
		}),
	}
}

// openaiStream runs a streaming request through ChatCompletionAccumulator
// and returns the accumulated completion and the tool calls that
// JustFinishedToolCall reported.
func openaiStream(t *testing.T, client openai.Client, params openai.ChatCompletionNewParams) (openai.ChatCompletionAccumulator, []openai.FinishedChatCompletionToolCall) {
	t.Helper()
	stream := client.Chat.Completions.NewStreaming(context.Background(), params)
	var acc openai.ChatCompletionAccumulator
	var finished []openai.FinishedChatCompletionToolCall
	for stream.Next() {
		chunk := stream.Current()
		if !acc.AddChunk(chunk) {
			t.Fatalf("accumulator rejected chunk %s", chunk.RawJSON())
		}
		if tc, ok := acc.JustFinishedToolCall(); ok {
			finished = append(finished, tc)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	return acc, finished
}

func TestOpenAISDKToolRoundTrip(t *testing.T) {
	t.Parallel()
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "json", true: "stream"}[stream], func(t *testing.T) {
			v, srv := serve(t, rewrite.OpenAI, fv.Options{Name: "alpha"})
			client := openaiClient(srv.URL)
			params := openaiParams()
			params.Tools = openaiSDKTools()
			params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(stream)}

			// 1. The call.
			var msg openai.ChatCompletionMessage
			var finish string
			var usage openai.CompletionUsage
			if stream {
				acc, finished := openaiStream(t, client, params)
				msg, finish, usage = acc.Choices[0].Message, acc.Choices[0].FinishReason, acc.Usage
				if len(finished) != 1 || finished[0].Name != "get_weather" || finished[0].Arguments != weatherArgs || finished[0].Index != 0 {
					t.Errorf("JustFinishedToolCall reported %+v; want get_weather once", finished)
				}
			} else {
				got, err := client.Chat.Completions.New(context.Background(), params)
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				msg, finish, usage = got.Choices[0].Message, got.Choices[0].FinishReason, got.Usage
			}
			if finish != "tool_calls" || msg.Content != "" || len(msg.ToolCalls) != 1 {
				t.Fatalf("finish %q content %q calls %+v; want one tool call", finish, msg.Content, msg.ToolCalls)
			}
			call := msg.ToolCalls[0]
			if call.ID != "call_fake000001_0" || call.Type != "function" || call.Function.Name != "get_weather" {
				t.Errorf("call = id %q type %q name %q", call.ID, call.Type, call.Function.Name)
			}
			var args struct{ City string }
			if err := json.Unmarshal([]byte(call.Function.Arguments), &args); err != nil || args.City != "Paris" {
				t.Errorf("arguments %q: %v; want city Paris", call.Function.Arguments, err)
			}
			if want := (len("get_weather")+len(weatherArgs))/4 + 1; usage.CompletionTokens != int64(want) || usage.TotalTokens != usage.PromptTokens+usage.CompletionTokens {
				t.Errorf("usage = %+v; want %d completion tokens", usage, want)
			}

			// 2. The result.
			params.Messages = append(params.Messages, msg.ToParam(), openai.ToolMessage(toolOutput, call.ID))
			var text string
			if stream {
				acc, finished := openaiStream(t, client, params)
				text, finish = acc.Choices[0].Message.Content, acc.Choices[0].FinishReason
				if len(finished) != 0 || len(acc.Choices[0].Message.ToolCalls) != 0 {
					t.Errorf("answer to the result calls tools: %+v", acc.Choices[0].Message.ToolCalls)
				}
			} else {
				got, err := client.Chat.Completions.New(context.Background(), params)
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				text, finish = got.Choices[0].Message.Content, got.Choices[0].FinishReason
			}
			if want := "The tool said: " + toolOutput; text != want || finish != "stop" {
				t.Errorf("answer %q finish %q; want %q stop", text, finish, want)
			}

			reqs := v.Requests()
			if !reflect.DeepEqual(reqs[0].Tools, []string{"get_weather", "get_time"}) ||
				!reflect.DeepEqual(reqs[0].ToolCalls, []fv.ToolCall{{ID: "call_fake000001_0", Name: "get_weather", Arguments: weatherArgs}}) {
				t.Errorf("first request: tools %q, calls %+v", reqs[0].Tools, reqs[0].ToolCalls)
			}
			if want := []fv.ToolResult{{ID: "call_fake000001_0", Name: "get_weather", Content: toolOutput}}; !reflect.DeepEqual(reqs[1].ToolResults, want) {
				t.Errorf("second request: results %+v; want %+v", reqs[1].ToolResults, want)
			}
		})
	}
}

func TestOpenAISDKParallelToolStream(t *testing.T) {
	t.Parallel()
	v, srv := serve(t, rewrite.OpenAI, fv.Options{ParallelTools: true})
	client := openaiClient(srv.URL)
	params := openaiParams()
	params.Tools = openaiSDKTools()
	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}

	acc, _ := openaiStream(t, client, params)
	msg := acc.Choices[0].Message
	if acc.Choices[0].FinishReason != "tool_calls" || len(msg.ToolCalls) != 2 {
		t.Fatalf("finish %q calls %+v; want two", acc.Choices[0].FinishReason, msg.ToolCalls)
	}
	for i, want := range []fv.ToolCall{
		{ID: "call_fake000001_0", Name: "get_weather", Arguments: weatherArgs},
		{ID: "call_fake000001_1", Name: "get_time", Arguments: timeArgs},
	} {
		c := msg.ToolCalls[i]
		if c.ID != want.ID || c.Function.Name != want.Name || c.Function.Arguments != want.Arguments {
			t.Errorf("call %d = %q %q %q; want %+v", i, c.ID, c.Function.Name, c.Function.Arguments, want)
		}
	}

	params.Messages = append(params.Messages, msg.ToParam(),
		openai.ToolMessage("sunny", msg.ToolCalls[0].ID),
		openai.ToolMessage([]openai.ChatCompletionContentPartTextParam{{Text: "12:00"}, {Text: " UTC"}}, msg.ToolCalls[1].ID))
	acc, _ = openaiStream(t, client, params)
	if got := acc.Choices[0].Message.Content; got != "The tool said: sunny; 12:00 UTC" {
		t.Errorf("answer = %q", got)
	}
	if got := v.Requests()[1].ToolResults; len(got) != 2 || got[1].Name != "get_time" || got[1].Content != "12:00 UTC" {
		t.Errorf("recorded results %+v", got)
	}

	// parallel_tool_calls false: one call.
	params = openaiParams()
	params.Tools = openaiSDKTools()
	params.ParallelToolCalls = openai.Bool(false)
	acc, _ = openaiStream(t, client, params)
	if n := len(acc.Choices[0].Message.ToolCalls); n != 1 {
		t.Errorf("parallel_tool_calls false: %d calls; want 1", n)
	}
}

func TestOpenAISDKForcedTool(t *testing.T) {
	t.Parallel()
	_, srv := serve(t, rewrite.OpenAI, fv.Options{ParallelTools: true})
	client := openaiClient(srv.URL)
	params := openaiParams()
	params.Tools = openaiSDKTools()
	params.ToolChoice = openai.ToolChoiceOptionFunctionToolChoice(openai.ChatCompletionNamedToolChoiceFunctionParam{Name: "get_time"})
	got, err := client.Chat.Completions.New(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	if calls := got.Choices[0].Message.ToolCalls; len(calls) != 1 || calls[0].Function.Name != "get_time" || calls[0].Function.Arguments != timeArgs {
		t.Errorf("calls = %+v; want get_time only", calls)
	}
}

// --- Anthropic ---

func anthropicSDKTools() []anthropic.ToolUnionParam {
	return []anthropic.ToolUnionParam{
		{OfTool: &anthropic.ToolParam{Name: "get_weather", InputSchema: anthropic.ToolInputSchemaParam{
			Properties: map[string]any{"city": map[string]any{"type": "string"}, "days": map[string]any{"type": "integer"}},
			Required:   []string{"city"},
		}}},
		{OfTool: &anthropic.ToolParam{Name: "get_time", InputSchema: anthropic.ToolInputSchemaParam{
			Properties: map[string]any{"tz": map[string]any{"type": "string"}, "utc": map[string]any{"type": "boolean"}},
		}}},
	}
}

// anthropicStream runs a streaming request through Message.Accumulate.
func anthropicStream(t *testing.T, client anthropic.Client, params anthropic.MessageNewParams) anthropic.Message {
	t.Helper()
	stream := client.Messages.NewStreaming(context.Background(), params)
	var msg anthropic.Message
	for stream.Next() {
		if err := msg.Accumulate(stream.Current()); err != nil {
			t.Fatalf("Accumulate(%s): %v", stream.Current().Type, err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	return msg
}

func TestAnthropicSDKToolRoundTrip(t *testing.T) {
	t.Parallel()
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "json", true: "stream"}[stream], func(t *testing.T) {
			v, srv := serve(t, rewrite.Anthropic, fv.Options{Name: "beta"})
			client := anthropicClient(srv.URL)
			params := anthropicParams()
			params.Tools = anthropicSDKTools()
			send := func() anthropic.Message {
				if stream {
					return anthropicStream(t, client, params)
				}
				msg, err := client.Messages.New(context.Background(), params)
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				return *msg
			}

			// 1. The call.
			msg := send()
			if msg.StopReason != anthropic.StopReasonToolUse || len(msg.Content) != 1 {
				t.Fatalf("stop_reason %q content %+v; want one tool_use", msg.StopReason, msg.Content)
			}
			block := msg.Content[0]
			if block.Type != "tool_use" || block.ID != "toolu_fake000001_0" || block.Name != "get_weather" {
				t.Errorf("block = type %q id %q name %q", block.Type, block.ID, block.Name)
			}
			if string(block.Input) != weatherArgs {
				t.Errorf("input = %s; want %s", block.Input, weatherArgs)
			}
			if tu := block.AsToolUse(); tu.Name != "get_weather" || string(tu.Input) != weatherArgs {
				t.Errorf("AsToolUse = %+v", tu)
			}
			if want := int64(len("get_weather")+len(weatherArgs))/4 + 1; msg.Usage.OutputTokens != want || msg.Usage.InputTokens < 1 {
				t.Errorf("usage = in %d out %d; want out %d", msg.Usage.InputTokens, msg.Usage.OutputTokens, want)
			}

			// 2. The result.
			params.Messages = append(params.Messages, msg.ToParam(),
				anthropic.NewUserMessage(anthropic.NewToolResultBlock(block.ID, toolOutput, false)))
			msg = send()
			if len(msg.Content) != 1 || msg.Content[0].Text != "The tool said: "+toolOutput || msg.StopReason != anthropic.StopReasonEndTurn {
				t.Errorf("answer %+v stop_reason %q; want %q", msg.Content, msg.StopReason, "The tool said: "+toolOutput)
			}

			reqs := v.Requests()
			if want := []fv.ToolResult{{ID: "toolu_fake000001_0", Name: "get_weather", Content: toolOutput}}; !reflect.DeepEqual(reqs[1].ToolResults, want) {
				t.Errorf("recorded results %+v; want %+v", reqs[1].ToolResults, want)
			}
			if !reflect.DeepEqual(reqs[0].Tools, []string{"get_weather", "get_time"}) {
				t.Errorf("recorded tools %q", reqs[0].Tools)
			}
		})
	}
}

func TestAnthropicSDKParallelToolStream(t *testing.T) {
	t.Parallel()
	v, srv := serve(t, rewrite.Anthropic, fv.Options{ParallelTools: true})
	client := anthropicClient(srv.URL)
	params := anthropicParams()
	params.Tools = anthropicSDKTools()

	msg := anthropicStream(t, client, params)
	if msg.StopReason != anthropic.StopReasonToolUse || len(msg.Content) != 2 {
		t.Fatalf("stop_reason %q content %+v; want two tool_use blocks", msg.StopReason, msg.Content)
	}
	if a, b := msg.Content[0], msg.Content[1]; a.Name != "get_weather" || string(a.Input) != weatherArgs ||
		b.Name != "get_time" || string(b.Input) != timeArgs || b.ID != "toolu_fake000001_1" {
		t.Errorf("blocks = %+v", msg.Content)
	}

	params.Messages = append(params.Messages, msg.ToParam(), anthropic.NewUserMessage(
		anthropic.NewToolResultBlock(msg.Content[0].ID, "sunny", false),
		anthropic.NewToolResultBlock(msg.Content[1].ID, "clock broken", true),
	))
	msg = anthropicStream(t, client, params)
	if len(msg.Content) != 1 || msg.Content[0].Text != "The tool said: sunny; clock broken" {
		t.Errorf("answer = %+v", msg.Content)
	}
	if got := v.Requests()[1].ToolResults; len(got) != 2 || !got[1].IsError || got[1].Name != "get_time" {
		t.Errorf("recorded results %+v", got)
	}

	// disable_parallel_tool_use: one call.
	params = anthropicParams()
	params.Tools = anthropicSDKTools()
	params.ToolChoice = anthropic.ToolChoiceUnionParam{OfAuto: &anthropic.ToolChoiceAutoParam{DisableParallelToolUse: anthropic.Bool(true)}}
	if msg := anthropicStream(t, client, params); len(msg.Content) != 1 {
		t.Errorf("disable_parallel_tool_use: %d blocks; want 1", len(msg.Content))
	}
	if got := v.Requests()[2].ToolChoice; got != "auto" {
		t.Errorf("recorded tool choice %q; want auto", got)
	}
}

func TestAnthropicSDKForcedTool(t *testing.T) {
	t.Parallel()
	v, srv := serve(t, rewrite.Anthropic, fv.Options{})
	client := anthropicClient(srv.URL)
	params := anthropicParams()
	params.Tools = anthropicSDKTools()
	params.ToolChoice = anthropic.ToolChoiceParamOfTool("get_time")
	msg, err := client.Messages.New(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	if len(msg.Content) != 1 || msg.Content[0].Name != "get_time" || string(msg.Content[0].Input) != timeArgs {
		t.Errorf("content = %+v; want get_time", msg.Content)
	}
	if got := v.Requests()[0].ToolChoice; got != "get_time" {
		t.Errorf("recorded tool choice %q", got)
	}
}
