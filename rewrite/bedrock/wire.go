package bedrock

import "encoding/json"

// The Converse request (API_runtime_Converse), as far as detour sends it.
type outRequest struct {
	Messages        []message        `json:"messages"`
	System          []systemBlock    `json:"system,omitempty"`
	InferenceConfig *inferenceConfig `json:"inferenceConfig,omitempty"`
	ToolConfig      *toolConfig      `json:"toolConfig,omitempty"`
	// AdditionalModelRequestFields carries what only the model family
	// knows: top_k for Anthropic's models.
	AdditionalModelRequestFields map[string]any `json:"additionalModelRequestFields,omitempty"`
}

type systemBlock struct {
	Text string `json:"text"`
}

type message struct {
	Role    string  `json:"role"`
	Content []block `json:"content"`
}

// block is a ContentBlock: a union, exactly one member set.
type block struct {
	Text             *string           `json:"text,omitempty"`
	Image            *imageBlock       `json:"image,omitempty"`
	Document         *documentBlock    `json:"document,omitempty"`
	ToolUse          *toolUse          `json:"toolUse,omitempty"`
	ToolResult       *toolResult       `json:"toolResult,omitempty"`
	ReasoningContent *reasoningContent `json:"reasoningContent,omitempty"`
}

type imageBlock struct {
	Format string `json:"format"`
	Source source `json:"source"`
}

type documentBlock struct {
	Format string `json:"format"`
	Name   string `json:"name"`
	Source source `json:"source"`
}

// source is a blob: base64 in the JSON protocol.
type source struct {
	Bytes string `json:"bytes"`
}

type toolUse struct {
	ToolUseID string          `json:"toolUseId"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
}

type toolResult struct {
	ToolUseID string              `json:"toolUseId"`
	Content   []toolResultContent `json:"content"`
	Status    string              `json:"status,omitempty"`
}

type toolResultContent struct {
	Text *string         `json:"text,omitempty"`
	JSON json.RawMessage `json:"json,omitempty"`
}

type reasoningContent struct {
	ReasoningText   *reasoningText `json:"reasoningText,omitempty"`
	RedactedContent string         `json:"redactedContent,omitempty"`
}

type reasoningText struct {
	Text      string `json:"text"`
	Signature string `json:"signature,omitempty"`
}

type inferenceConfig struct {
	MaxTokens     int      `json:"maxTokens,omitempty"`
	Temperature   *float64 `json:"temperature,omitempty"`
	TopP          *float64 `json:"topP,omitempty"`
	StopSequences []string `json:"stopSequences,omitempty"`
}

type toolConfig struct {
	Tools      []tool      `json:"tools"`
	ToolChoice *toolChoice `json:"toolChoice,omitempty"`
}

type tool struct {
	ToolSpec toolSpec `json:"toolSpec"`
}

type toolSpec struct {
	Name        string      `json:"name"`
	Description string      `json:"description,omitempty"`
	InputSchema inputSchema `json:"inputSchema"`
}

type inputSchema struct {
	JSON json.RawMessage `json:"json"`
}

// toolChoice is a union of auto, any and tool.
type toolChoice struct {
	Auto *struct{}       `json:"auto,omitempty"`
	Any  *struct{}       `json:"any,omitempty"`
	Tool *toolChoiceTool `json:"tool,omitempty"`
}

type toolChoiceTool struct {
	Name string `json:"name"`
}

// The Converse answer.
type inResponse struct {
	Output struct {
		Message *inMessage `json:"message"`
	} `json:"output"`
	StopReason string  `json:"stopReason"`
	Usage      inUsage `json:"usage"`
}

type inMessage struct {
	Role    string    `json:"role"`
	Content []inBlock `json:"content"`
}

type inBlock struct {
	Text    *string `json:"text"`
	ToolUse *struct {
		ToolUseID string          `json:"toolUseId"`
		Name      string          `json:"name"`
		Input     json.RawMessage `json:"input"`
	} `json:"toolUse"`
	ReasoningContent *struct {
		ReasoningText *struct {
			Text      string `json:"text"`
			Signature string `json:"signature"`
		} `json:"reasoningText"`
		RedactedContent string `json:"redactedContent"`
	} `json:"reasoningContent"`
}

type inUsage struct {
	InputTokens           int64 `json:"inputTokens"`
	OutputTokens          int64 `json:"outputTokens"`
	TotalTokens           int64 `json:"totalTokens"`
	CacheReadInputTokens  int64 `json:"cacheReadInputTokens"`
	CacheWriteInputTokens int64 `json:"cacheWriteInputTokens"`
}
