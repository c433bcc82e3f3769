package fakevendor

import (
	"encoding/json"

	"github.com/detour-proxy/detour/rewrite"
)

// OpenAI Chat Completions wire types, in the field order of
// docs/vendors.md#whole-answers and docs/vendors.md#openai-stream.
type (
	openaiCompletion struct {
		ID      string         `json:"id"`
		Object  string         `json:"object"`
		Created int64          `json:"created"`
		Model   string         `json:"model"`
		Choices []openaiChoice `json:"choices"`
		Usage   openaiUsage    `json:"usage"`
	}
	openaiChoice struct {
		Index int `json:"index"`
		// Message is an openaiMessage or an openaiToolMessage.
		Message      any       `json:"message"`
		Logprobs     *struct{} `json:"logprobs"`
		FinishReason string    `json:"finish_reason"`
	}
	openaiMessage struct {
		Role        string  `json:"role"`
		Content     string  `json:"content"`
		Refusal     *string `json:"refusal"`
		Annotations []any   `json:"annotations"`
	}
	// openaiToolMessage is an assistant message of tool calls: content
	// null, then tool_calls.
	openaiToolMessage struct {
		Role        string           `json:"role"`
		Content     *string          `json:"content"`
		ToolCalls   []openaiToolCall `json:"tool_calls"`
		Refusal     *string          `json:"refusal"`
		Annotations []any            `json:"annotations"`
	}
	openaiToolCall struct {
		ID       string         `json:"id"`
		Type     string         `json:"type"`
		Function openaiFunction `json:"function"`
	}
	openaiFunction struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	}
	openaiUsage struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
		TotalTokens      int `json:"total_tokens"`
	}
	openaiChunk struct {
		ID      string              `json:"id"`
		Object  string              `json:"object"`
		Created int64               `json:"created"`
		Model   string              `json:"model"`
		Choices []openaiChunkChoice `json:"choices"`
		// Usage is null on every chunk but the usage chunk when
		// include_usage is set, and absent otherwise.
		Usage json.RawMessage `json:"usage,omitempty"`
	}
	openaiChunkChoice struct {
		Index int `json:"index"`
		// Delta is an openaiDelta or an openaiToolDelta.
		Delta        any     `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	}
	openaiDelta struct {
		Role    string  `json:"role,omitempty"`
		Content *string `json:"content,omitempty"`
	}
	// openaiToolDelta is a delta of tool calls; the first of a stream
	// carries role and a null content too.
	openaiToolDelta struct {
		Role      string                `json:"role,omitempty"`
		Content   json.RawMessage       `json:"content,omitempty"`
		ToolCalls []openaiToolCallDelta `json:"tool_calls"`
	}
	// openaiToolCallDelta is one call's delta: index, id, type and name
	// once in its first delta (arguments ""), then index and argument
	// fragments.
	openaiToolCallDelta struct {
		Index    int                 `json:"index"`
		ID       string              `json:"id,omitempty"`
		Type     string              `json:"type,omitempty"`
		Function openaiFunctionDelta `json:"function"`
	}
	openaiFunctionDelta struct {
		Name      string `json:"name,omitempty"`
		Arguments string `json:"arguments"`
	}
)

// openaiID is the completion id of call c; every chunk of a stream carries
// the same one (ChatCompletionAccumulator insists).
func openaiID(c call) string { return "chatcmpl-fake" + pad(c.n) }

// openaiBody is the chat.completion answer to c: its text, or its tool
// calls with finish_reason tool_calls.
func (v *Vendor) openaiBody(c call) []byte {
	if b, ok := v.openaiTextBody(c); ok {
		return b
	}
	out := c.plan.outputTokens()
	choice := openaiChoice{
		Message:      openaiMessage{Role: "assistant", Content: c.plan.text, Annotations: []any{}},
		FinishReason: "stop",
	}
	if len(c.plan.calls) > 0 {
		calls := make([]openaiToolCall, len(c.plan.calls))
		for i, tc := range c.plan.calls {
			calls[i] = openaiToolCall{ID: tc.ID, Type: "function", Function: openaiFunction{Name: tc.Name, Arguments: tc.Arguments}}
		}
		choice.Message = openaiToolMessage{Role: "assistant", ToolCalls: calls, Annotations: []any{}}
		choice.FinishReason = "tool_calls"
	}
	return marshal(openaiCompletion{
		ID: openaiID(c), Object: "chat.completion", Created: v.now().Unix(), Model: c.model,
		Choices: []openaiChoice{choice},
		Usage:   openaiUsage{PromptTokens: c.promptTokens, CompletionTokens: out, TotalTokens: c.promptTokens + out},
	})
}

// openaiScript is the chat.completion.chunk stream answering c: role chunk
// with content "", one chunk per piece, a finish chunk with an empty delta,
// the usage chunk (include_usage only), [DONE]. A tool-call answer replaces
// the role chunk and the pieces as docs/vendors.md#openai-stream shows: the first call's
// opening delta (role, content null, index, id, type, name, arguments "")
// with the role, then its argument fragments, then each further call's
// opening delta and fragments; the finish chunk says tool_calls.
func (v *Vendor) openaiScript(c call, errClass string) script {
	created := v.now().Unix()
	var usage json.RawMessage
	if c.includeUsage {
		usage = json.RawMessage("null")
	}
	chunk := func(d any, finish *string) event {
		return event{data: marshal(openaiChunk{
			ID: openaiID(c), Object: "chat.completion.chunk", Created: created, Model: c.model,
			Choices: []openaiChunkChoice{{Delta: d, FinishReason: finish}}, Usage: usage,
		})}
	}
	s := script{fail: event{data: streamErrorData(rewrite.OpenAI, errClass, c.model, v.now())}}
	finish := "stop"
	if len(c.plan.calls) == 0 {
		s.open = []event{chunk(openaiDelta{Role: "assistant", Content: ptr("")}, nil)}
		for _, p := range c.plan.pieces {
			s.deltas = append(s.deltas, chunk(openaiDelta{Content: ptr(p)}, nil))
		}
	} else {
		finish = "tool_calls"
		for i, tc := range c.plan.calls {
			first := openaiToolDelta{ToolCalls: []openaiToolCallDelta{{
				Index: i, ID: tc.ID, Type: "function", Function: openaiFunctionDelta{Name: tc.Name},
			}}}
			if i == 0 {
				first.Role, first.Content = "assistant", json.RawMessage("null")
				s.open = []event{chunk(first, nil)}
			} else {
				s.deltas = append(s.deltas, chunk(first, nil))
			}
			for _, frag := range splitArgs(tc.Arguments) {
				s.deltas = append(s.deltas, chunk(openaiToolDelta{ToolCalls: []openaiToolCallDelta{{
					Index: i, Function: openaiFunctionDelta{Arguments: frag},
				}}}, nil))
			}
		}
	}
	s.close = append(s.close, chunk(openaiDelta{}, ptr(finish)))
	if c.includeUsage {
		out := c.plan.outputTokens()
		s.close = append(s.close, event{data: marshal(openaiChunk{
			ID: openaiID(c), Object: "chat.completion.chunk", Created: created, Model: c.model,
			Choices: []openaiChunkChoice{},
			Usage:   marshal(openaiUsage{PromptTokens: c.promptTokens, CompletionTokens: out, TotalTokens: c.promptTokens + out}),
		})})
	}
	s.close = append(s.close, event{data: []byte("[DONE]")})
	return s
}

// pad formats a call number for ids.
func pad(n int) string { return zeroPad(n, 6) }
