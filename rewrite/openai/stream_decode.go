package openai

import (
	"bytes"
	"fmt"

	"github.com/detour-proxy/detour/rewrite"
	"github.com/detour-proxy/detour/rewrite/ir"
	"github.com/detour-proxy/detour/rewrite/sse"
)

// StreamDecoder turns an upstream's chat.completion.chunk stream into IR
// stream events (docs/vendors.md#openai-stream). Create one per attempt; it is not
// safe for concurrent use.
type StreamDecoder struct {
	started  bool // StreamStart was emitted
	finished bool // StreamFinish was emitted
	failed   bool // StreamError was emitted: the rest is ignored
	id       string
	chunk    parsedChunk // reused from event to event
	// calls are the tool calls seen so far; the IR index of a call is its
	// position here.
	calls []streamCall
}

// streamCall is one tool call of the stream.
type streamCall struct {
	upstream int // the upstream's index field; -1 when it sent none
	id       string
}

// NewStreamDecoder returns a decoder for one upstream stream.
func NewStreamDecoder() *StreamDecoder { return &StreamDecoder{} }

var doneMarker = []byte("[DONE]")

// Decode decodes one upstream SSE event into zero or more IR events:
//
//   - the first chunk opens the stream with StreamStart{ID, Model};
//   - delta.reasoning_content (DeepSeek, vLLM) or delta.reasoning
//     (OpenRouter) → StreamThinking; delta.content and delta.refusal →
//     StreamText;
//   - delta.tool_calls → StreamToolStart when a call first appears (with
//     its id and name), then StreamToolArgs for each argument fragment;
//   - finish_reason → StreamFinish (once); usage → StreamUsage;
//   - a chunk with a top-level "error" → StreamError, after which the
//     stream is over;
//   - comments, empty events and [DONE] → nothing.
//
// Only choice 0 is read. Tool calls are numbered from 0 in order of
// appearance: the upstream's index normally is exactly that, but servers
// that omit it, or reuse index 0 for parallel calls that each arrive whole,
// are numbered by call id instead, so that no two calls collide.
//
// Data that is not JSON, or JSON of the wrong form, is an error; the
// stream may go on with the next event.
func (d *StreamDecoder) Decode(ev sse.Event) ([]ir.StreamEvent, error) {
	if ev.Comment || d.failed {
		return nil, nil
	}
	data := bytes.TrimSpace(ev.Data)
	if len(data) == 0 || bytes.Equal(data, doneMarker) {
		return nil, nil
	}
	if data[0] != '{' {
		return nil, fmt.Errorf("openai: stream event is not a JSON object")
	}
	if err := parseChunk(data, &d.chunk, !d.started); err != nil {
		return nil, fmt.Errorf("openai: stream event: %w", err)
	}
	c := &d.chunk
	if c.failed {
		// OpenRouter also sends a choice with finish_reason "error"; the
		// error wins (docs/vendors.md#openai-compatible-servers).
		d.failed = true
		return []ir.StreamEvent{{Kind: ir.StreamError, Err: streamAppError(data)}}, nil
	}
	// Most chunks carry one event, many (role chunks, keep-alive deltas)
	// none: a slice is made only when there is something to return.
	var out []ir.StreamEvent
	if !d.started {
		d.started = true
		d.id = c.id
		out = append(out, ir.StreamEvent{Kind: ir.StreamStart, ID: c.id, Model: c.model})
	}
	for i := range c.choices {
		ch := &c.choices[i]
		if ch.index != 0 {
			continue // detour asks for one choice
		}
		out = d.decodeDelta(out, ch)
		if ch.finish != "" && !d.finished {
			d.finished = true
			out = append(out, ir.StreamEvent{
				Kind:   ir.StreamFinish,
				Finish: decodeFinish(ch.finish, len(d.calls) > 0),
			})
		}
	}
	if c.hasUsage {
		out = append(out, ir.StreamEvent{Kind: ir.StreamUsage, Usage: c.usage})
	}
	return out, nil
}

// decodeDelta appends the events of one choice's delta.
func (d *StreamDecoder) decodeDelta(out []ir.StreamEvent, ch *parsedChoice) []ir.StreamEvent {
	if t := ch.reasoningContent; t != "" {
		out = append(out, ir.StreamEvent{Kind: ir.StreamThinking, Text: t})
	} else if t := ch.reasoning; t != "" {
		out = append(out, ir.StreamEvent{Kind: ir.StreamThinking, Text: t})
	}
	if t := ch.content; t != "" {
		out = append(out, ir.StreamEvent{Kind: ir.StreamText, Text: t})
	}
	if t := ch.refusal; t != "" {
		out = append(out, ir.StreamEvent{Kind: ir.StreamText, Text: t})
	}
	for i := range ch.tools {
		tc := &ch.tools[i]
		up := -1
		if tc.hasIndex {
			up = tc.index
		}
		out = d.toolDelta(out, up, tc.id, tc.function)
	}
	if ch.hasFunction && len(ch.tools) == 0 {
		// The legacy functions API streams one call without an id.
		out = d.toolDelta(out, 0, "", ch.function)
	}
	return out
}

// toolDelta appends the events of one tool-call delta: a StreamToolStart
// when it opens a new call, and a StreamToolArgs for its fragment.
func (d *StreamDecoder) toolDelta(out []ir.StreamEvent, up int, id string, f functionIO) []ir.StreamEvent {
	if id == "" && f.Name == "" && f.Arguments == "" {
		return out // an empty element ({} or null) says nothing
	}
	n := d.findCall(up, id)
	if n < 0 {
		n = len(d.calls)
		if id == "" {
			// Every call needs an id for its result to answer; a stable
			// one, so a retry of the same answer matches.
			id = ir.GeneratedToolID(d.id, n)
		}
		d.calls = append(d.calls, streamCall{upstream: up, id: id})
		out = append(out, ir.StreamEvent{Kind: ir.StreamToolStart, Index: n, ID: id, Name: f.Name})
	}
	if f.Arguments != "" {
		out = append(out, ir.StreamEvent{Kind: ir.StreamToolArgs, Index: n, Text: f.Arguments})
	}
	return out
}

// findCall returns the IR index of the call a delta continues, or -1 when
// the delta opens a new call. A delta with an id continues the call of that
// id; a delta without one continues the call at its upstream index, or,
// with no index either, the latest call.
func (d *StreamDecoder) findCall(up int, id string) int {
	if id != "" {
		for i := len(d.calls) - 1; i >= 0; i-- {
			if d.calls[i].id == id {
				return i
			}
		}
		return -1
	}
	if up < 0 {
		return len(d.calls) - 1
	}
	for i := len(d.calls) - 1; i >= 0; i-- {
		if d.calls[i].upstream == up {
			return i
		}
	}
	return -1
}

// streamAppError reads an in-stream error chunk into the AppError the app's
// encoder renders. The class is a best guess from the envelope alone; the
// chain's own classifier decides failover.
func streamAppError(data []byte) *rewrite.AppError {
	info := rewrite.ParseError(data)
	class, status := classifyError(info)
	return &rewrite.AppError{Status: status, Class: class, Message: info.Message}
}

// classifyError guesses a failure class, and the HTTP status when the
// envelope states one, from an in-stream error's code and type
// (docs/vendors.md#openai-errors, docs/vendors.md#openai-compatible-servers). It is deliberately small: no policy, no
// message matching beyond what the code says.
func classifyError(info rewrite.ErrorInfo) (class string, status int) {
	// A numeric code is an HTTP status (vLLM, llama.cpp, OpenRouter, Azure
	// as a string).
	if n, ok := httpStatus(info.Code); ok {
		status = n
	}
	for _, s := range [...]string{info.Code, info.Type} {
		if c := errorClasses[s]; c != "" {
			return c, status
		}
	}
	if status != 0 {
		return statusClasses(status), status
	}
	return "server_error", 0
}

// errorClasses maps OpenAI (and compatible servers') error codes and types
// to detour failure classes.
var errorClasses = map[string]string{
	"rate_limit_exceeded":                  "rate_limited",
	"requests":                             "rate_limited",
	"tokens":                               "rate_limited",
	"rate_limit_error":                     "rate_limited",
	"insufficient_quota":                   "quota_exhausted",
	"organization_spend_limit_exceeded":    "quota_exhausted",
	"project_spend_limit_exceeded":         "quota_exhausted",
	"credit_balance_exhausted":             "quota_exhausted",
	"organization_usage_limit_exceeded":    "quota_exhausted",
	"server_is_overloaded":                 "overloaded",
	"slow_down":                            "overloaded",
	"overloaded_error":                     "overloaded",
	"unavailable_error":                    "overloaded",
	"server_error":                         "server_error",
	"api_error":                            "server_error",
	"timeout":                              "timeout",
	"context_length_exceeded":              "context_too_long",
	"exceed_context_size_error":            "context_too_long",
	"content_filter":                       "content_filter",
	"content_policy_violation":             "content_filter",
	"invalid_prompt":                       "content_filter",
	"invalid_api_key":                      "auth",
	"authentication_error":                 "auth",
	"invalid_request_error":                "invalid_request",
	"model_not_found":                      "invalid_request",
	"BadRequestError":                      "invalid_request",
	"not_found_error":                      "invalid_request",
	"request_too_large":                    "invalid_request",
	"unsupported_country_region_territory": "auth",
}

// statusClasses is the class of an HTTP status alone.
func statusClasses(status int) string {
	switch {
	case status == 429:
		return "rate_limited"
	case status == 402:
		return "quota_exhausted"
	case status == 503 || status == 529:
		return "overloaded"
	case status == 408 || status == 504:
		return "timeout"
	case status == 401 || status == 403:
		return "auth"
	case status >= 400 && status < 500:
		return "invalid_request"
	}
	return "server_error"
}

// httpStatus reads an error code that is an HTTP status.
func httpStatus(code string) (int, bool) {
	if len(code) != 3 {
		return 0, false
	}
	n := 0
	for i := 0; i < 3; i++ {
		c := code[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, n >= 400 && n <= 599
}
