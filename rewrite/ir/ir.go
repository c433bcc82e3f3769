// Package ir is the vendor-neutral form every translation goes through: a
// request, response or stream event of one shape is decoded into these
// types and encoded into another shape. A translator for a (from, to) pair
// (package rewrite/translate) is a decoder of one vendor package plus an
// encoder of another; each is created per request, holds its own state, and
// is safe to create again for a retry. No vendor wire type appears here:
// those live in rewrite/openai, rewrite/anthropic and rewrite/gemini.
//
// ir imports only rewrite (for AppError); the vendor packages import ir.
package ir

import (
	"encoding/json"

	"github.com/detour-proxy/detour/rewrite"
)

// Role is who speaks a message.
type Role string

// The roles. System prompts are not messages: they are Request.System.
const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	// RoleTool carries tool results. OpenAI sends them as role "tool";
	// Anthropic and Gemini as parts of a user turn. Decoders may produce
	// either a RoleTool message or ToolResult parts in a user message;
	// encoders must accept both.
	RoleTool Role = "tool"
)

// PartKind says which field of a Part is set.
type PartKind string

// The part kinds.
const (
	PartText       PartKind = "text"
	PartImage      PartKind = "image"
	PartDocument   PartKind = "document" // a PDF or other file
	PartToolCall   PartKind = "tool_call"
	PartToolResult PartKind = "tool_result"
	PartThinking   PartKind = "thinking"
)

// Part is one piece of a message.
type Part struct {
	Kind PartKind `json:"kind"`
	// Text is the text of a PartText or PartThinking.
	Text string `json:"text,omitempty"`
	// Media is the content of a PartImage or PartDocument.
	Media *Media `json:"media,omitempty"`
	// ToolCall is set for PartToolCall.
	ToolCall *ToolCall `json:"tool_call,omitempty"`
	// ToolResult is set for PartToolResult.
	ToolResult *ToolResult `json:"tool_result,omitempty"`
	// Signature is Anthropic's thinking signature (PartThinking), which
	// must be replayed verbatim.
	Signature string `json:"signature,omitempty"`
}

// Media is an image or a file, inline or by URL.
type Media struct {
	MediaType string `json:"media_type,omitempty"` // e.g. image/png, application/pdf
	Data      string `json:"data,omitempty"`       // base64, when inline
	URL       string `json:"url,omitempty"`        // when by reference (http(s) or gs://)
	Filename  string `json:"filename,omitempty"`
	Detail    string `json:"detail,omitempty"` // OpenAI image detail
}

// ToolCall is a call the assistant made.
type ToolCall struct {
	// ID is the vendor's call id; Gemini may send none, in which case the
	// decoder generates a stable one (see ToolCallID).
	ID   string `json:"id"`
	Name string `json:"name"`
	// Arguments is a JSON object (never a string of JSON): decoders of
	// OpenAI parse its argument string; unparseable arguments become {}.
	Arguments json.RawMessage `json:"arguments"`
	// ThoughtSignature is Gemini's opaque signature on a function-call part,
	// which Gemini requires back in the next turn.
	ThoughtSignature string `json:"thought_signature,omitempty"`
}

// ToolResult answers a ToolCall.
type ToolResult struct {
	CallID string `json:"call_id"`
	// Name is the tool's name when the source shape carries it (Gemini);
	// encoders that need it (Gemini) look it up from earlier ToolCalls in
	// the request when it is empty.
	Name string `json:"name,omitempty"`
	// Content is the result's text, or JSON text when the tool returned an
	// object (Gemini's response object is kept as its JSON).
	Content string `json:"content"`
	// IsJSON reports that Content is a JSON value.
	IsJSON  bool `json:"is_json,omitempty"`
	IsError bool `json:"is_error,omitempty"`
}

// Message is one turn of the conversation.
type Message struct {
	Role  Role   `json:"role"`
	Parts []Part `json:"parts"`
	// Name is OpenAI's optional participant name.
	Name string `json:"name,omitempty"`
}

// Tool is a function the model may call.
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"` // JSON Schema object
	Strict      bool            `json:"strict,omitempty"`
}

// ToolChoiceMode is how the model must use tools.
type ToolChoiceMode string

// The tool choice modes.
const (
	ToolChoiceAuto     ToolChoiceMode = "auto"
	ToolChoiceNone     ToolChoiceMode = "none"
	ToolChoiceRequired ToolChoiceMode = "required" // any tool (Anthropic "any", Gemini ANY)
	ToolChoiceTool     ToolChoiceMode = "tool"     // the named tool
)

// ToolChoice constrains tool use.
type ToolChoice struct {
	Mode ToolChoiceMode `json:"mode"`
	Name string         `json:"name,omitempty"`
}

// ResponseFormat asks for JSON output.
type ResponseFormat struct {
	// Type is "json_object" or "json_schema".
	Type   string          `json:"type"`
	Name   string          `json:"name,omitempty"`
	Schema json.RawMessage `json:"schema,omitempty"`
	Strict bool            `json:"strict,omitempty"`
}

// Request is a chat request in vendor-neutral form.
type Request struct {
	Model string `json:"model"`
	// System is every system (and OpenAI developer) prompt, in order.
	System   []string  `json:"system,omitempty"`
	Messages []Message `json:"messages"`
	Tools    []Tool    `json:"tools,omitempty"`
	// ToolChoice nil: the target's default.
	ToolChoice        *ToolChoice `json:"tool_choice,omitempty"`
	ParallelToolCalls *bool       `json:"parallel_tool_calls,omitempty"`
	// MaxTokens 0: not set (the Anthropic encoder then uses its default).
	MaxTokens      int             `json:"max_tokens,omitempty"`
	Temperature    *float64        `json:"temperature,omitempty"`
	TopP           *float64        `json:"top_p,omitempty"`
	TopK           *int            `json:"top_k,omitempty"`
	Stop           []string        `json:"stop,omitempty"`
	N              int             `json:"n,omitempty"`
	Seed           *int64          `json:"seed,omitempty"`
	ResponseFormat *ResponseFormat `json:"response_format,omitempty"`
	// ReasoningEffort is OpenAI's low|medium|high ("" unset); ThinkingBudget
	// is Anthropic's budget_tokens or Gemini's thinkingBudget (0 unset).
	// Encoders convert one into the other (low 1024, medium 2048, high 4096).
	ReasoningEffort string `json:"reasoning_effort,omitempty"`
	ThinkingBudget  int    `json:"thinking_budget,omitempty"`
	Stream          bool   `json:"stream,omitempty"`
	// IncludeUsage is OpenAI's stream_options.include_usage as the app sent
	// it (encoders towards OpenAI force it on regardless, to count tokens).
	IncludeUsage bool `json:"include_usage,omitempty"`
	// User is an end-user id (OpenAI user, Anthropic metadata.user_id).
	User string `json:"user,omitempty"`
	// Embed is set, and nothing above but Model, for an embeddings request
	// (embed.go).
	Embed *EmbedRequest `json:"embed,omitempty"`
}

// FinishReason is why generation stopped, vendor-neutral.
type FinishReason string

// The finish reasons (docs/vendors.md#finish-reasons maps each vendor's onto these).
const (
	FinishStop          FinishReason = "stop"
	FinishLength        FinishReason = "length"
	FinishToolCalls     FinishReason = "tool_calls"
	FinishContentFilter FinishReason = "content_filter"
)

// TokenUsage is a response's token accounting, vendor-neutral. Input
// includes cached tokens (Anthropic's input_tokens excludes them: its
// decoder adds cache reads and writes back).
type TokenUsage struct {
	Input       int64 `json:"input"`
	Output      int64 `json:"output"`
	CachedInput int64 `json:"cached_input,omitempty"`
	Reasoning   int64 `json:"reasoning,omitempty"`
}

// Response is a complete (non-streamed) answer.
type Response struct {
	ID      string       `json:"id"`
	Model   string       `json:"model"`
	Created int64        `json:"created,omitempty"` // unix seconds
	Parts   []Part       `json:"parts"`             // text, thinking, tool calls, in order
	Finish  FinishReason `json:"finish"`
	Usage   TokenUsage   `json:"usage"`
}

// StreamEventKind says what a StreamEvent carries.
type StreamEventKind int

// The stream event kinds, in the order a stream may carry them: one Start,
// then deltas (a tool call's Start before its ArgsDelta), then Finish and
// Usage (in either order), each at most once.
const (
	// StreamStart opens the message: ID, Model, and input usage if known.
	StreamStart StreamEventKind = iota + 1
	// StreamText is a fragment of text.
	StreamText
	// StreamThinking is a fragment of reasoning text (or, with Signature,
	// the block's signature).
	StreamThinking
	// StreamToolStart opens tool call Index with its ID and Name.
	StreamToolStart
	// StreamToolArgs is a fragment of tool call Index's JSON arguments.
	StreamToolArgs
	// StreamFinish carries the finish reason.
	StreamFinish
	// StreamUsage carries usage (cumulative: the latest wins).
	StreamUsage
	// StreamError is an in-stream error from the upstream.
	StreamError
)

// StreamEvent is one vendor-neutral stream event.
type StreamEvent struct {
	Kind  StreamEventKind
	ID    string // StreamStart: message id; StreamToolStart: tool call id
	Model string // StreamStart
	Text  string // StreamText, StreamThinking, StreamToolArgs (fragment)
	// Signature is a thinking block's signature, or a Gemini tool call's
	// thoughtSignature on StreamToolStart.
	Signature string
	Name      string // StreamToolStart
	// Index numbers tool calls within the message, from 0, in order of
	// appearance.
	Index  int
	Finish FinishReason      // StreamFinish
	Usage  TokenUsage        // StreamUsage (and StreamStart when known)
	Err    *rewrite.AppError // StreamError
}

// UnsupportedError is returned by a request encoder when the request holds
// something the target cannot take (an image URL the target refuses, n > 1
// for Anthropic). The chain skips that upstream with class invalid_request,
// for that upstream only, and goes on.
type UnsupportedError struct{ What string }

func (e *UnsupportedError) Error() string { return "not supported by the target: " + e.What }

// EncodeOptions are what an upstream's policy tells a request encoder.
type EncodeOptions struct {
	// Model is the upstream's model (after the policy's models mapping).
	Model string
	// DefaultMaxTokens is used when the request sets none and the target
	// requires it (Anthropic). 0 → DefaultAnthropicMaxTokens.
	DefaultMaxTokens int
	// EmbedDimensions is the upstream's declared embeddings vector size,
	// asked for when an embeddings request names none; 0 none declared.
	EmbedDimensions int
	// Notes, when set, is told of every lossy change the encoder made
	// (clamped temperature, dropped stop sequence), for the log line.
	Notes func(note string)
}

// DefaultAnthropicMaxTokens is max_tokens for an Anthropic upstream when
// neither the app's request nor the policy sets one (litellm and one-api use
// the same).
const DefaultAnthropicMaxTokens = 4096

// StreamOptions are what a stream encoder needs to know about the app's
// request and the answer, before the first event.
type StreamOptions struct {
	// Model is the model the app asked for (echoed in OpenAI chunks and
	// Anthropic's message_start, so the SDK sees its own model name).
	Model string
	// IncludeUsage is OpenAI's stream_options.include_usage: the OpenAI
	// encoder sends the usage chunk only when the app asked for it.
	IncludeUsage bool
	// Created stamps OpenAI chunks (unix seconds).
	Created int64
}
