package openai

import "encoding/json"

// The Chat Completions wire types. Types ending in In are decoded from what
// apps and upstreams send, and keep polymorphic fields (content as a string
// or parts, stop as a string or list, tool_choice as a string or object) as
// raw JSON for the decoder to look at; types ending in Out are encoded, with
// omitempty wherever OpenAI-compatible servers reject an explicit null or
// empty value. Field order is OpenAI's own, so output is stable for golden
// files.

// rawValue is a JSON value kept as it was sent, like json.RawMessage but
// without the copy: it is a slice of the body being decoded, so it is read
// before the decoding function returns and never kept. The bulk of a
// request is its message content, which this spares a copy and an
// allocation per message.
type rawValue []byte

// UnmarshalJSON implements json.Unmarshaler. encoding/json passes a slice
// of the input it was given.
func (r *rawValue) UnmarshalJSON(b []byte) error {
	*r = b
	return nil
}

// requestIn is the body of POST /v1/chat/completions as far as the IR
// carries it; every other field is ignored.
type requestIn struct {
	Model               string           `json:"model"`
	Messages            []messageIn      `json:"messages"`
	Tools               []toolIn         `json:"tools"`
	ToolChoice          rawValue         `json:"tool_choice"`
	ParallelToolCalls   *bool            `json:"parallel_tool_calls"`
	MaxCompletionTokens *int             `json:"max_completion_tokens"`
	MaxTokens           *int             `json:"max_tokens"`
	Temperature         *float64         `json:"temperature"`
	TopP                *float64         `json:"top_p"`
	Stop                rawValue         `json:"stop"`
	N                   *int             `json:"n"`
	Seed                *int64           `json:"seed"`
	ResponseFormat      *formatIn        `json:"response_format"`
	ReasoningEffort     string           `json:"reasoning_effort"`
	Stream              bool             `json:"stream"`
	StreamOptions       *streamOptionsIO `json:"stream_options"`
	User                string           `json:"user"`
}

type messageIn struct {
	Role       string       `json:"role"`
	Content    rawValue     `json:"content"` // string, parts, or null
	Name       string       `json:"name"`
	Refusal    string       `json:"refusal"`
	ToolCalls  []toolCallIn `json:"tool_calls"`
	ToolCallID string       `json:"tool_call_id"`
	// FunctionCall is the legacy functions API's single call.
	FunctionCall *functionIO `json:"function_call"`
	// ReasoningContent (DeepSeek, vLLM) and Reasoning (OpenRouter) are the
	// thinking text of a response message.
	ReasoningContent looseText `json:"reasoning_content"`
	Reasoning        looseText `json:"reasoning"`
}

// partIn is one element of a content array.
type partIn struct {
	Type     string   `json:"type"`
	Text     string   `json:"text"`
	Refusal  string   `json:"refusal"`
	ImageURL rawValue `json:"image_url"` // {url, detail}; a bare string from some clients
	File     *fileIO  `json:"file"`
}

type imageURLIO struct {
	URL    string `json:"url"`
	Detail string `json:"detail,omitempty"`
}

type fileIO struct {
	FileData string `json:"file_data,omitempty"`
	FileID   string `json:"file_id,omitempty"`
	Filename string `json:"filename,omitempty"`
}

type toolCallIn struct {
	ID       string     `json:"id"`
	Type     string     `json:"type"`
	Function functionIO `json:"function"`
}

// functionIO is a call's function: its arguments are a string of JSON.
type functionIO struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type toolIn struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
		Strict      *bool           `json:"strict"`
	} `json:"function"`
}

type toolChoiceIn struct {
	Type     string `json:"type"`
	Function struct {
		Name string `json:"name"`
	} `json:"function"`
}

type formatIn struct {
	Type       string `json:"type"`
	JSONSchema *struct {
		Name   string          `json:"name"`
		Schema json.RawMessage `json:"schema"`
		Strict *bool           `json:"strict"`
	} `json:"json_schema"`
}

type streamOptionsIO struct {
	IncludeUsage bool `json:"include_usage"`
}

// requestOut is the body detour sends to an OpenAI-compatible upstream.
type requestOut struct {
	Model               string           `json:"model"`
	Messages            []messageOut     `json:"messages"`
	Tools               []toolOut        `json:"tools,omitempty"`
	ToolChoice          any              `json:"tool_choice,omitempty"` // string or toolChoiceOut
	ParallelToolCalls   *bool            `json:"parallel_tool_calls,omitempty"`
	MaxCompletionTokens int              `json:"max_completion_tokens,omitempty"`
	Temperature         *float64         `json:"temperature,omitempty"`
	TopP                *float64         `json:"top_p,omitempty"`
	Stop                []string         `json:"stop,omitempty"`
	N                   int              `json:"n,omitempty"`
	Seed                *int64           `json:"seed,omitempty"`
	ResponseFormat      *formatOut       `json:"response_format,omitempty"`
	ReasoningEffort     string           `json:"reasoning_effort,omitempty"`
	Stream              bool             `json:"stream,omitempty"`
	StreamOptions       *streamOptionsIO `json:"stream_options,omitempty"`
	User                string           `json:"user,omitempty"`
}

type messageOut struct {
	Role string `json:"role"`
	// Content is a string or []partOut; nil (omitted) only on an assistant
	// message that has tool calls.
	Content    any           `json:"content,omitempty"`
	Name       string        `json:"name,omitempty"`
	ToolCalls  []toolCallOut `json:"tool_calls,omitempty"`
	ToolCallID string        `json:"tool_call_id,omitempty"`
}

type partOut struct {
	Type     string      `json:"type"`
	Text     *string     `json:"text,omitempty"`
	ImageURL *imageURLIO `json:"image_url,omitempty"`
	File     *fileIO     `json:"file,omitempty"`
}

type toolCallOut struct {
	ID       string     `json:"id"`
	Type     string     `json:"type"`
	Function functionIO `json:"function"`
}

type toolOut struct {
	Type     string          `json:"type"`
	Function toolFunctionOut `json:"function"`
}

type toolFunctionOut struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Strict      bool            `json:"strict,omitempty"`
}

type toolChoiceOut struct {
	Type     string `json:"type"`
	Function struct {
		Name string `json:"name"`
	} `json:"function"`
}

type formatOut struct {
	Type       string         `json:"type"`
	JSONSchema *jsonSchemaOut `json:"json_schema,omitempty"`
}

type jsonSchemaOut struct {
	Name   string          `json:"name"`
	Schema json.RawMessage `json:"schema,omitempty"`
	Strict bool            `json:"strict,omitempty"`
}

// completionIn is a chat.completion from an upstream.
type completionIn struct {
	ID      string     `json:"id"`
	Created int64      `json:"created"`
	Model   string     `json:"model"`
	Choices []choiceIn `json:"choices"`
	Usage   *usageIO   `json:"usage"`
	Error   rawValue   `json:"error"` // OpenRouter answers some failures with a 200
}

type choiceIn struct {
	Index        int       `json:"index"`
	Message      messageIn `json:"message"`
	FinishReason string    `json:"finish_reason"`
}

type usageIO struct {
	PromptTokens            int64                `json:"prompt_tokens"`
	CompletionTokens        int64                `json:"completion_tokens"`
	TotalTokens             int64                `json:"total_tokens"`
	PromptTokensDetails     *promptDetailsIO     `json:"prompt_tokens_details,omitempty"`
	CompletionTokensDetails *completionDetailsIO `json:"completion_tokens_details,omitempty"`
}

type promptDetailsIO struct {
	CachedTokens int64 `json:"cached_tokens"`
}

type completionDetailsIO struct {
	ReasoningTokens int64 `json:"reasoning_tokens"`
}

// completionOut is a chat.completion for the app.
type completionOut struct {
	ID      string      `json:"id"`
	Object  string      `json:"object"`
	Created int64       `json:"created"`
	Model   string      `json:"model"`
	Choices []choiceOut `json:"choices"`
	Usage   usageIO     `json:"usage"`
}

type choiceOut struct {
	Index        int              `json:"index"`
	Message      responseMessage  `json:"message"`
	Logprobs     *json.RawMessage `json:"logprobs"` // always null
	FinishReason string           `json:"finish_reason"`
}

type responseMessage struct {
	Role    string  `json:"role"`
	Content *string `json:"content"` // null when the answer is only tool calls
	Refusal *string `json:"refusal"` // always null: a refusal arrives as text
	// ReasoningContent is the thinking text, under the name DeepSeek and
	// vLLM use; openai-go keeps it in the message's extra fields.
	ReasoningContent string        `json:"reasoning_content,omitempty"`
	ToolCalls        []toolCallOut `json:"tool_calls,omitempty"`
}
