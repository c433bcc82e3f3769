package fakevendor

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/detour-proxy/detour/rewrite"
)

// OpenAI Chat Completions wire types, in the field order of
// translation.md §2–§3.
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
		Index        int           `json:"index"`
		Message      openaiMessage `json:"message"`
		Logprobs     *struct{}     `json:"logprobs"`
		FinishReason string        `json:"finish_reason"`
	}
	openaiMessage struct {
		Role        string  `json:"role"`
		Content     string  `json:"content"`
		Refusal     *string `json:"refusal"`
		Annotations []any   `json:"annotations"`
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
		Index        int         `json:"index"`
		Delta        openaiDelta `json:"delta"`
		FinishReason *string     `json:"finish_reason"`
	}
	openaiDelta struct {
		Role    string  `json:"role,omitempty"`
		Content *string `json:"content,omitempty"`
	}
)

// completionTokens is the deterministic completion token count: the number
// of words of the answer.
func (v *Vendor) completionTokens() int { return len(strings.Fields(v.text)) }

// openaiID is the completion id of call c; every chunk of a stream carries
// the same one (ChatCompletionAccumulator insists).
func openaiID(c call) string { return "chatcmpl-fake" + pad(c.n) }

// openaiBody is the chat.completion answer to c.
func (v *Vendor) openaiBody(c call) []byte {
	out := v.completionTokens()
	return marshal(openaiCompletion{
		ID: openaiID(c), Object: "chat.completion", Created: v.now().Unix(), Model: c.model,
		Choices: []openaiChoice{{
			Message:      openaiMessage{Role: "assistant", Content: v.text, Annotations: []any{}},
			FinishReason: "stop",
		}},
		Usage: openaiUsage{PromptTokens: c.promptTokens, CompletionTokens: out, TotalTokens: c.promptTokens + out},
	})
}

// openaiScript is the chat.completion.chunk stream answering c: role chunk
// with content "", one chunk per piece, a finish chunk with an empty delta,
// the usage chunk (include_usage only), [DONE].
func (v *Vendor) openaiScript(c call, errClass string) script {
	created := v.now().Unix()
	var usage json.RawMessage
	if c.includeUsage {
		usage = json.RawMessage("null")
	}
	chunk := func(d openaiDelta, finish *string) event {
		return event{data: marshal(openaiChunk{
			ID: openaiID(c), Object: "chat.completion.chunk", Created: created, Model: c.model,
			Choices: []openaiChunkChoice{{Delta: d, FinishReason: finish}}, Usage: usage,
		})}
	}
	s := script{
		open: []event{chunk(openaiDelta{Role: "assistant", Content: ptr("")}, nil)},
		fail: event{data: streamErrorData(rewrite.OpenAI, errClass, c.model, v.now())},
	}
	for _, p := range v.pieces {
		s.deltas = append(s.deltas, chunk(openaiDelta{Content: ptr(p)}, nil))
	}
	s.close = append(s.close, chunk(openaiDelta{}, ptr("stop")))
	if c.includeUsage {
		out := v.completionTokens()
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
func pad(n int) string { return fmt.Sprintf("%06d", n) }
