package translate

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/detour-proxy/detour/rewrite"
	"github.com/detour-proxy/detour/rewrite/sse"
)

// This file checks an app's translated stream or response the way the
// app's SDK reads it (docs/vendors.md#what-the-go-sdks-insist-on): the order and framing rules each
// SDK depends on, asserted in code so that a golden file rewritten with
// -update cannot hide a broken stream. Each checker also reduces the
// output to what the SDK's accumulator would hand the app (a summary), so
// that tests can compare what the app sees across pairs.

// summary is what an app's SDK makes of an answer.
type summary struct {
	Text   string
	Tools  []toolSummary
	Finish string // in the app's vocabulary
	Input  int64  // prompt tokens, cached included
	Output int64
	Error  string // the in-stream error's message, if any
}

// toolSummary is one tool call as the app sees it; Args is the arguments
// object re-encoded with sorted keys.
type toolSummary struct{ ID, Name, Args string }

// streamCheck is what a stream checker expects beyond its shape's rules.
type streamCheck struct {
	// wantError: the stream must end with the app's error event.
	wantError bool
	// includeUsage: the OpenAI app asked for stream_options.include_usage.
	includeUsage bool
	// model the app asked for; every chunk must name it.
	model string
	// strict adds the checks that hold for well-formed upstreams only
	// (tool arguments that parse, tool names present, nothing after
	// Gemini's finishReason chunk); fuzzing turns it off, since a broken
	// upstream fragment stays broken.
	strict bool
}

// anthropicToolID is the charset Anthropic's SDK and API take for tool ids.
var anthropicToolID = regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)

// checkStream checks an app stream of shape app and returns its summary.
func checkStream(t testing.TB, app rewrite.Shape, out []byte, o streamCheck) summary {
	t.Helper()
	evs := appEvents(t, app, out)
	switch app {
	case rewrite.OpenAI:
		return checkOpenAIStream(t, evs, o)
	case rewrite.Anthropic:
		return checkAnthropicStream(t, evs, o)
	case rewrite.OpenAIResponses:
		return checkResponsesStream(t, evs, o)
	}
	return checkGeminiStream(t, evs, o)
}

// appEvents splits an app stream into events and checks the framing every
// shape shares: each event ends with a blank line, has data, and has no
// line without a field name.
func appEvents(t testing.TB, app rewrite.Shape, out []byte) []sse.Event {
	t.Helper()
	var evs []sse.Event
	for i, ev := range sseEvents(t, out) {
		switch {
		case !bytes.HasSuffix(ev.Raw, []byte("\n\n")):
			t.Errorf("%s event %d is not terminated by a blank line: %q", app, i, ev.Raw)
		case ev.Bare:
			t.Errorf("%s event %d has a line without a field name: %q", app, i, ev.Raw)
		case len(ev.Data) == 0 && !ev.Comment:
			t.Errorf("%s event %d carries no data: %q", app, i, ev.Raw)
		}
		if ev.Comment && app != rewrite.Gemini {
			continue // SDKs skip comments (Gemini's checker refuses them)
		}
		evs = append(evs, ev)
	}
	return evs
}

// checkAnthropicStream checks the rules anthropic-sdk-go's Message.Accumulate
// depends on: message_start first, every `event:` name equal to the JSON
// type, content blocks 0, 1, 2… one open at a time, deltas and stops only
// for the open block and of its type, message_delta once with every block
// stopped, message_stop once and last; or the error event last.
func checkAnthropicStream(t testing.TB, evs []sse.Event, o streamCheck) summary {
	t.Helper()
	var (
		s                                 summary
		started, delta, stopped, errored  bool
		blocks                            int
		open                              = -1
		openType                          string
		args                              strings.Builder
		startInput, deltaInput, cacheRead int64
	)
	for i, ev := range evs {
		if errored || stopped {
			t.Errorf("anthropic event %d (%s) after the stream ended", i, ev.Name)
			break
		}
		var m struct {
			Type    string `json:"type"`
			Index   *int   `json:"index"`
			Message struct {
				ID    string         `json:"id"`
				Model string         `json:"model"`
				Usage anthropicUsage `json:"usage"`
			} `json:"message"`
			ContentBlock struct {
				Type string `json:"type"`
				ID   string `json:"id"`
				Name string `json:"name"`
				Text string `json:"text"`
			} `json:"content_block"`
			Delta struct {
				Type        string  `json:"type"`
				Text        string  `json:"text"`
				PartialJSON *string `json:"partial_json"`
				StopReason  string  `json:"stop_reason"`
			} `json:"delta"`
			Usage *anthropicUsage `json:"usage"`
			Error struct {
				Type    string `json:"type"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal(ev.Data, &m); err != nil {
			t.Errorf("anthropic event %d: data is not JSON: %v: %s", i, err, ev.Data)
			continue
		}
		if ev.Name != m.Type {
			t.Errorf("anthropic event %d: event: %q but type %q (the SDK dispatches on the name)", i, ev.Name, m.Type)
		}
		if i == 0 && m.Type != "message_start" && m.Type != "error" {
			t.Errorf("anthropic stream starts with %s; want message_start", m.Type)
		}
		index := -1
		if m.Index != nil {
			index = *m.Index
		}
		switch m.Type {
		case "message_start":
			if started {
				t.Errorf("anthropic event %d: a second message_start", i)
			}
			started = true
			if !strings.HasPrefix(m.Message.ID, "msg_") {
				t.Errorf("anthropic message id %q lacks the msg_ prefix", m.Message.ID)
			}
			if o.model != "" && m.Message.Model != o.model {
				t.Errorf("anthropic message_start model %q; want the app's %q", m.Message.Model, o.model)
			}
			startInput = m.Message.Usage.input()
		case "content_block_start":
			if !started {
				t.Errorf("anthropic event %d: content_block_start before message_start", i)
			}
			if open >= 0 {
				t.Errorf("anthropic event %d: block %d starts while block %d is open", i, index, open)
			}
			if index != blocks {
				t.Errorf("anthropic event %d: content_block_start index %d; want %d (indexes 0, 1, 2… in order)", i, index, blocks)
			}
			blocks++
			open, openType = index, m.ContentBlock.Type
			switch openType {
			case "text":
				s.Text += m.ContentBlock.Text
			case "tool_use":
				if !anthropicToolID.MatchString(m.ContentBlock.ID) {
					t.Errorf("anthropic event %d: tool_use id %q outside Anthropic's charset", i, m.ContentBlock.ID)
				}
				if o.strict && m.ContentBlock.Name == "" {
					t.Errorf("anthropic event %d: tool_use without a name", i)
				}
				s.Tools = append(s.Tools, toolSummary{ID: m.ContentBlock.ID, Name: m.ContentBlock.Name})
				args.Reset()
			case "thinking", "redacted_thinking":
			default:
				t.Errorf("anthropic event %d: content block of type %q", i, openType)
			}
		case "content_block_delta":
			if open < 0 || index != open {
				t.Errorf("anthropic event %d: delta for block %d; open block %d", i, index, open)
				continue
			}
			want := map[string]string{"text_delta": "text", "input_json_delta": "tool_use", "thinking_delta": "thinking", "signature_delta": "thinking"}[m.Delta.Type]
			if want != openType {
				t.Errorf("anthropic event %d: %s delta in a %s block", i, m.Delta.Type, openType)
			}
			switch m.Delta.Type {
			case "text_delta":
				s.Text += m.Delta.Text
			case "input_json_delta":
				if m.Delta.PartialJSON == nil {
					t.Errorf("anthropic event %d: input_json_delta without partial_json", i)
				} else {
					args.WriteString(*m.Delta.PartialJSON)
				}
			}
		case "content_block_stop":
			if open < 0 || index != open {
				t.Errorf("anthropic event %d: stop for block %d; open block %d", i, index, open)
				continue
			}
			if openType == "tool_use" {
				s.Tools[len(s.Tools)-1].Args = toolArgs(t, o.strict, args.String(), "{}")
			}
			open = -1
		case "message_delta":
			if delta {
				t.Errorf("anthropic event %d: a second message_delta", i)
			}
			delta = true
			if open >= 0 {
				t.Errorf("anthropic event %d: message_delta while block %d is open", i, open)
			}
			s.Finish = m.Delta.StopReason
			if m.Usage == nil {
				t.Errorf("anthropic event %d: message_delta without usage", i)
			} else {
				s.Output = m.Usage.OutputTokens
				deltaInput, cacheRead = m.Usage.InputTokens, m.Usage.CacheReadInputTokens
			}
		case "message_stop":
			if !delta {
				t.Errorf("anthropic event %d: message_stop without message_delta", i)
			}
			stopped = true
		case "ping":
		case "error":
			errored = true
			s.Error = m.Error.Message
			if m.Error.Type == "" {
				t.Errorf("anthropic error event without error.type: %s", ev.Data)
			}
		default:
			t.Errorf("anthropic event %d: unknown type %q", i, m.Type)
		}
	}
	// The SDK takes message_delta's input figures when it states them.
	s.Input = startInput
	if deltaInput != 0 || cacheRead != 0 {
		s.Input = deltaInput + cacheRead
	}
	endChecks(t, "anthropic", o.wantError, errored, stopped, "message_stop")
	return s
}

// anthropicUsage is the usage of message_start and message_delta.
type anthropicUsage struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
}

func (u anthropicUsage) input() int64 {
	return u.InputTokens + u.CacheReadInputTokens + u.CacheCreationInputTokens
}

// checkOpenAIStream checks the rules openai-go's ChatCompletionAccumulator
// depends on: one id (and created time) for every chunk, no `event:` line,
// tool calls opened with dense indexes 0, 1, 2… in order with their id and
// name once, nothing but usage after the finish chunk, usage exactly once
// when the app asked for it and never otherwise, [DONE] once and last; or
// the error chunk last.
func checkOpenAIStream(t testing.TB, evs []sse.Event, o streamCheck) summary {
	t.Helper()
	var (
		s                summary
		id               string
		done, errored    bool
		finishes, usages int
		args             []string
		created          json.Number
		finishedAt       = -1
	)
	for i, ev := range evs {
		if done || errored {
			t.Errorf("openai event %d after the stream ended: %s", i, ev.Data)
			break
		}
		if ev.Name != "" {
			t.Errorf("openai event %d has an event: line %q", i, ev.Name)
		}
		if string(ev.Data) == "[DONE]" {
			done = true
			continue
		}
		var top map[string]json.RawMessage
		if err := json.Unmarshal(ev.Data, &top); err != nil {
			t.Errorf("openai event %d: data is not a JSON object: %v: %s", i, err, ev.Data)
			continue
		}
		if e, ok := top["error"]; ok && string(e) != "null" {
			errored = true
			var v struct {
				Message string `json:"message"`
				Type    string `json:"type"`
			}
			if err := json.Unmarshal(e, &v); err != nil || v.Type == "" {
				t.Errorf("openai error chunk without error.type: %s", ev.Data)
			}
			s.Error = v.Message
			continue
		}
		var c struct {
			ID      string      `json:"id"`
			Object  string      `json:"object"`
			Created json.Number `json:"created"`
			Model   string      `json:"model"`
			Choices []struct {
				Index int `json:"index"`
				Delta struct {
					Content   *string `json:"content"`
					ToolCalls []struct {
						Index    *int   `json:"index"`
						ID       string `json:"id"`
						Type     string `json:"type"`
						Function struct {
							Name      *string `json:"name"`
							Arguments *string `json:"arguments"`
						} `json:"function"`
					} `json:"tool_calls"`
				} `json:"delta"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
			Usage *struct {
				PromptTokens     int64 `json:"prompt_tokens"`
				CompletionTokens int64 `json:"completion_tokens"`
				TotalTokens      int64 `json:"total_tokens"`
			} `json:"usage"`
		}
		if err := json.Unmarshal(ev.Data, &c); err != nil {
			t.Errorf("openai event %d: not a chunk: %v: %s", i, err, ev.Data)
			continue
		}
		if c.Object != "chat.completion.chunk" {
			t.Errorf("openai event %d: object %q", i, c.Object)
		}
		switch {
		case id == "":
			id, created = c.ID, c.Created
			if id == "" {
				t.Errorf("openai event %d: chunk without an id", i)
			}
		case c.ID != id:
			t.Errorf("openai event %d: chunk id %q; the stream's is %q (the accumulator refuses it)", i, c.ID, id)
		case c.Created != created:
			t.Errorf("openai event %d: created %s; the stream's is %s", i, c.Created, created)
		}
		if o.model != "" && c.Model != o.model {
			t.Errorf("openai event %d: model %q; want the app's %q", i, c.Model, o.model)
		}
		if _, ok := top["usage"]; ok && !o.includeUsage {
			t.Errorf("openai event %d: a usage field, but the app did not ask for usage", i)
		}
		if c.Usage != nil {
			usages++
			if c.Usage.TotalTokens != c.Usage.PromptTokens+c.Usage.CompletionTokens {
				t.Errorf("openai event %d: total_tokens %d ≠ %d + %d", i, c.Usage.TotalTokens, c.Usage.PromptTokens, c.Usage.CompletionTokens)
			}
			s.Input, s.Output = c.Usage.PromptTokens, c.Usage.CompletionTokens
		}
		if len(c.Choices) > 1 {
			t.Errorf("openai event %d: %d choices", i, len(c.Choices))
		}
		for _, ch := range c.Choices {
			if ch.Index != 0 {
				t.Errorf("openai event %d: choice index %d", i, ch.Index)
			}
			if finishedAt >= 0 {
				// The accumulator overwrites finish_reason with every
				// chunk's: a delta after the finish would clear it.
				t.Errorf("openai event %d: a choice after the finish chunk (event %d)", i, finishedAt)
			}
			if ch.Delta.Content != nil {
				s.Text += *ch.Delta.Content
			}
			for _, tc := range ch.Delta.ToolCalls {
				if tc.Index == nil {
					t.Errorf("openai event %d: tool call delta without an index", i)
					continue
				}
				n := *tc.Index
				if tc.ID != "" {
					if n != len(s.Tools) {
						t.Errorf("openai event %d: new tool call at index %d; want %d (dense, in order)", i, n, len(s.Tools))
						continue
					}
					name := ""
					if tc.Function.Name != nil {
						name = *tc.Function.Name
					}
					if o.strict && name == "" {
						t.Errorf("openai event %d: tool call %s opened without a name", i, tc.ID)
					}
					if tc.Type != "function" {
						t.Errorf("openai event %d: tool call type %q", i, tc.Type)
					}
					s.Tools = append(s.Tools, toolSummary{ID: tc.ID, Name: name})
					args = append(args, "")
				} else {
					if n < 0 || n >= len(s.Tools) {
						t.Errorf("openai event %d: arguments for tool call %d, which was never opened", i, n)
						continue
					}
					if tc.Function.Name != nil && *tc.Function.Name != "" {
						t.Errorf("openai event %d: tool call %d named again (the accumulator concatenates names)", i, n)
					}
				}
				if tc.Function.Arguments != nil {
					args[n] += *tc.Function.Arguments
				}
			}
			if ch.FinishReason != nil {
				finishes++
				finishedAt = i
				s.Finish = *ch.FinishReason
			}
		}
	}
	for n := range s.Tools {
		s.Tools[n].Args = toolArgs(t, o.strict, args[n], "")
	}
	if usages > 1 {
		t.Errorf("openai: usage sent %d times (openai-go adds them up)", usages)
	}
	endChecks(t, "openai", o.wantError, errored, done, "[DONE]")
	if !o.wantError {
		if finishes != 1 {
			t.Errorf("openai: %d chunks with a finish_reason; want 1", finishes)
		}
		if o.includeUsage && usages != 1 {
			t.Errorf("openai: usage sent %d times; want 1 (the app asked for it)", usages)
		}
	}
	return s
}

// checkGeminiStream checks what go-genai insists on: every event exactly
// "data: " + one line of JSON + a blank line (no event:, id: or comment
// lines, no [DONE]), one candidate, one responseId, the app's model as
// modelVersion, function call args an object and thought signatures
// base64; and one chunk with a finishReason, last as in Gemini's own
// streams (strict: an upstream that sends content after its finish makes
// the encoder send it after the finishReason chunk); or the error last.
func checkGeminiStream(t testing.TB, evs []sse.Event, o streamCheck) summary {
	t.Helper()
	var (
		s                       summary
		id                      string
		errored, final          bool
		sawUsage, finalHasUsage bool
	)
	for i, ev := range evs {
		if errored || final && o.strict {
			t.Errorf("gemini event %d after the stream ended: %q", i, ev.Raw)
			break
		}
		want := "data: " + string(ev.Data) + "\n\n"
		switch {
		case ev.Comment:
			t.Errorf("gemini event %d is a comment (go-genai fails on it): %q", i, ev.Raw)
			continue
		case ev.Name != "" || bytes.Contains(ev.Raw, []byte("\nevent:")) || bytes.HasPrefix(ev.Raw, []byte("event:")):
			t.Errorf("gemini event %d has an event: line: %q", i, ev.Raw)
		case string(ev.Data) == "[DONE]":
			t.Errorf("gemini event %d is [DONE] (go-genai fails on it)", i)
			continue
		case string(ev.Raw) != want:
			t.Errorf("gemini event %d is not one data line:\n%q", i, ev.Raw)
		}
		var top map[string]json.RawMessage
		if err := json.Unmarshal(ev.Data, &top); err != nil {
			t.Errorf("gemini event %d: data is not a JSON object: %v: %s", i, err, ev.Data)
			continue
		}
		if e, ok := top["error"]; ok && string(e) != "null" {
			errored = true
			var v struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
				Status  string `json:"status"`
			}
			if err := json.Unmarshal(e, &v); err != nil || v.Code == 0 || v.Status == "" {
				t.Errorf("gemini error chunk without code and status: %s", ev.Data)
			}
			s.Error = v.Message
			continue
		}
		var c geminiResponse
		if err := json.Unmarshal(ev.Data, &c); err != nil {
			t.Errorf("gemini event %d: not a GenerateContentResponse: %v: %s", i, err, ev.Data)
			continue
		}
		switch {
		case id == "":
			id = c.ResponseID
			if id == "" {
				t.Errorf("gemini event %d: chunk without a responseId", i)
			}
		case c.ResponseID != id:
			t.Errorf("gemini event %d: responseId %q; the stream's is %q", i, c.ResponseID, id)
		}
		if o.model != "" && c.ModelVersion != o.model {
			t.Errorf("gemini event %d: modelVersion %q; want the app's %q", i, c.ModelVersion, o.model)
		}
		if len(c.Candidates) != 1 {
			t.Errorf("gemini event %d: %d candidates; want 1", i, len(c.Candidates))
			continue
		}
		cand := c.Candidates[0]
		addGeminiParts(t, &s, cand.Content.Parts, o.strict, i)
		if c.UsageMetadata != nil {
			sawUsage = true
			s.Input = c.UsageMetadata.PromptTokenCount
			s.Output = c.UsageMetadata.CandidatesTokenCount + c.UsageMetadata.ThoughtsTokenCount
		}
		if cand.FinishReason != "" {
			if final {
				t.Errorf("gemini event %d: a second chunk with a finishReason", i)
			}
			final, finalHasUsage = true, c.UsageMetadata != nil
			s.Finish = cand.FinishReason
		}
	}
	endChecks(t, "gemini", o.wantError, errored, final, "chunk with a finishReason")
	if final && sawUsage && !finalHasUsage {
		t.Errorf("gemini: the finishReason chunk lacks usageMetadata (Gemini's last chunk carries the totals)")
	}
	return s
}

// geminiResponse is a GenerateContentResponse as go-genai reads it.
type geminiResponse struct {
	Candidates []struct {
		Content struct {
			Role  string       `json:"role"`
			Parts []geminiPart `json:"parts"`
		} `json:"content"`
		FinishReason string `json:"finishReason"`
	} `json:"candidates"`
	UsageMetadata *struct {
		PromptTokenCount     int64 `json:"promptTokenCount"`
		CandidatesTokenCount int64 `json:"candidatesTokenCount"`
		ThoughtsTokenCount   int64 `json:"thoughtsTokenCount"`
	} `json:"usageMetadata"`
	ModelVersion string `json:"modelVersion"`
	ResponseID   string `json:"responseId"`
}

type geminiPart struct {
	Text         string `json:"text"`
	Thought      bool   `json:"thought"`
	FunctionCall *struct {
		ID   string          `json:"id"`
		Name string          `json:"name"`
		Args json.RawMessage `json:"args"`
	} `json:"functionCall"`
	ThoughtSignature *string `json:"thoughtSignature"`
}

// addGeminiParts adds the text and function calls of parts to s. go-genai
// decodes args into a map and thoughtSignature into []byte (padded
// standard base64), so anything else fails the app's whole chunk.
func addGeminiParts(t testing.TB, s *summary, parts []geminiPart, strict bool, event int) {
	t.Helper()
	for _, p := range parts {
		if p.ThoughtSignature != nil {
			if _, err := base64.StdEncoding.DecodeString(*p.ThoughtSignature); err != nil {
				t.Errorf("gemini event %d: thoughtSignature %q is not base64 (go-genai fails the chunk)", event, *p.ThoughtSignature)
			}
		}
		switch {
		case p.FunctionCall != nil:
			if strict && p.FunctionCall.Name == "" {
				t.Errorf("gemini event %d: functionCall without a name", event)
			}
			s.Tools = append(s.Tools, toolSummary{
				ID:   p.FunctionCall.ID,
				Name: p.FunctionCall.Name,
				Args: toolArgs(t, true, string(p.FunctionCall.Args), ""),
			})
		case p.Thought:
		default:
			s.Text += p.Text
		}
	}
}

// endChecks checks how a stream ended: with the error event when one was
// expected, else with its closing event.
func endChecks(t testing.TB, shape string, wantError, errored, closed bool, closing string) {
	t.Helper()
	switch {
	case wantError && !errored:
		t.Errorf("%s: the stream does not end with the app's error event", shape)
	case !wantError && errored:
		t.Errorf("%s: an error event in a stream without an upstream error", shape)
	case !wantError && !closed:
		t.Errorf("%s: the stream does not end with its %s", shape, closing)
	}
}

// toolArgs parses accumulated tool arguments, which must be a JSON object
// (every SDK parses them into one), and returns them with sorted keys.
// empty is what no arguments at all stand for ("" when they are required).
func toolArgs(t testing.TB, strict bool, args, empty string) string {
	t.Helper()
	if args == "" && empty != "" {
		args = empty
	}
	var v map[string]any
	if err := json.Unmarshal([]byte(args), &v); err != nil || v == nil {
		if strict {
			t.Errorf("tool arguments %q are not a JSON object: %v", args, err)
		}
		return args
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// summarizeResponse checks a whole (non-streamed) answer of shape app and
// returns what its SDK hands the app.
func summarizeResponse(t testing.TB, app rewrite.Shape, body []byte, model string) summary {
	t.Helper()
	var s summary
	switch app {
	case rewrite.OpenAI:
		var r struct {
			ID      string `json:"id"`
			Object  string `json:"object"`
			Created int64  `json:"created"`
			Model   string `json:"model"`
			Choices []struct {
				Index   int `json:"index"`
				Message struct {
					Role      string  `json:"role"`
					Content   *string `json:"content"`
					ToolCalls []struct {
						ID       string `json:"id"`
						Type     string `json:"type"`
						Function struct {
							Name      string `json:"name"`
							Arguments string `json:"arguments"`
						} `json:"function"`
					} `json:"tool_calls"`
				} `json:"message"`
				FinishReason string `json:"finish_reason"`
			} `json:"choices"`
			Usage struct {
				PromptTokens     int64 `json:"prompt_tokens"`
				CompletionTokens int64 `json:"completion_tokens"`
				TotalTokens      int64 `json:"total_tokens"`
			} `json:"usage"`
		}
		mustUnmarshal(t, body, &r)
		if r.Object != "chat.completion" || !strings.HasPrefix(r.ID, "chatcmpl-") || r.Created == 0 || r.Model != model || len(r.Choices) != 1 {
			t.Errorf("openai response head: object %q id %q created %d model %q, %d choices", r.Object, r.ID, r.Created, r.Model, len(r.Choices))
		}
		if len(r.Choices) == 0 {
			return s
		}
		c := r.Choices[0]
		if c.Message.Role != "assistant" {
			t.Errorf("openai response role %q", c.Message.Role)
		}
		if c.Message.Content != nil {
			s.Text = *c.Message.Content
		} else if len(c.Message.ToolCalls) == 0 {
			t.Errorf("openai response: content null without tool calls")
		}
		for _, tc := range c.Message.ToolCalls {
			if tc.Type != "function" || tc.ID == "" {
				t.Errorf("openai response tool call %+v", tc)
			}
			s.Tools = append(s.Tools, toolSummary{ID: tc.ID, Name: tc.Function.Name, Args: toolArgs(t, true, tc.Function.Arguments, "")})
		}
		if r.Usage.TotalTokens != r.Usage.PromptTokens+r.Usage.CompletionTokens {
			t.Errorf("openai response usage %+v: total ≠ prompt + completion", r.Usage)
		}
		s.Finish, s.Input, s.Output = c.FinishReason, r.Usage.PromptTokens, r.Usage.CompletionTokens
	case rewrite.Anthropic:
		var r struct {
			ID      string `json:"id"`
			Type    string `json:"type"`
			Role    string `json:"role"`
			Model   string `json:"model"`
			Content []struct {
				Type  string          `json:"type"`
				Text  string          `json:"text"`
				ID    string          `json:"id"`
				Name  string          `json:"name"`
				Input json.RawMessage `json:"input"`
			} `json:"content"`
			StopReason string         `json:"stop_reason"`
			Usage      anthropicUsage `json:"usage"`
		}
		mustUnmarshal(t, body, &r)
		if r.Type != "message" || r.Role != "assistant" || !strings.HasPrefix(r.ID, "msg_") || r.Model != model {
			t.Errorf("anthropic response head: type %q role %q id %q model %q", r.Type, r.Role, r.ID, r.Model)
		}
		for _, b := range r.Content {
			switch b.Type {
			case "text":
				if b.Text == "" {
					t.Errorf("anthropic response: empty text block")
				}
				s.Text += b.Text
			case "tool_use":
				if !anthropicToolID.MatchString(b.ID) {
					t.Errorf("anthropic response: tool_use id %q outside Anthropic's charset", b.ID)
				}
				s.Tools = append(s.Tools, toolSummary{ID: b.ID, Name: b.Name, Args: toolArgs(t, true, string(b.Input), "")})
			}
		}
		s.Finish, s.Input, s.Output = r.StopReason, r.Usage.input(), r.Usage.OutputTokens
	case rewrite.Gemini:
		var r geminiResponse
		mustUnmarshal(t, body, &r)
		if r.ModelVersion != model || len(r.Candidates) != 1 {
			t.Errorf("gemini response head: modelVersion %q, %d candidates", r.ModelVersion, len(r.Candidates))
		}
		if len(r.Candidates) == 0 {
			return s
		}
		c := r.Candidates[0]
		if c.Content.Role != "model" {
			t.Errorf("gemini response role %q", c.Content.Role)
		}
		addGeminiParts(t, &s, c.Content.Parts, true, 0)
		s.Finish = c.FinishReason
		if u := r.UsageMetadata; u != nil {
			s.Input, s.Output = u.PromptTokenCount, u.CandidatesTokenCount+u.ThoughtsTokenCount
		}
	}
	return s
}

func mustUnmarshal(t testing.TB, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("not JSON of the expected form: %v\n%s", err, b)
	}
}
