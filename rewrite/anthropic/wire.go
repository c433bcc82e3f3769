package anthropic

import "encoding/json"

// Wire types of the Messages API. The in* types are what the decoders read:
// every field any block type may carry, polymorphic values kept raw. The
// out* types are what the encoders write, in the API's documented field
// order so that golden files read like the vendor's examples.

type (
	inRequest struct {
		Model         string          `json:"model"`
		System        json.RawMessage `json:"system"`
		Messages      []inMessage     `json:"messages"`
		Tools         []inTool        `json:"tools"`
		ToolChoice    *inToolChoice   `json:"tool_choice"`
		MaxTokens     int             `json:"max_tokens"`
		Temperature   *float64        `json:"temperature"`
		TopP          *float64        `json:"top_p"`
		TopK          *int            `json:"top_k"`
		StopSequences []string        `json:"stop_sequences"`
		Stream        bool            `json:"stream"`
		Metadata      *inMetadata     `json:"metadata"`
		Thinking      *inThinking     `json:"thinking"`
		OutputConfig  *inOutputConfig `json:"output_config"`
	}
	inMessage struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	inBlock struct {
		Type      string          `json:"type"`
		Text      string          `json:"text"`
		Source    *inSource       `json:"source"`
		Title     string          `json:"title"`
		ID        string          `json:"id"`
		Name      string          `json:"name"`
		Input     json.RawMessage `json:"input"`
		ToolUseID string          `json:"tool_use_id"`
		Content   json.RawMessage `json:"content"`
		IsError   bool            `json:"is_error"`
		Thinking  string          `json:"thinking"`
		Signature string          `json:"signature"`
		Data      string          `json:"data"`
	}
	inSource struct {
		Type      string `json:"type"`
		MediaType string `json:"media_type"`
		Data      string `json:"data"`
		URL       string `json:"url"`
	}
	inTool struct {
		Type        string          `json:"type"`
		Name        string          `json:"name"`
		Description string          `json:"description"`
		InputSchema json.RawMessage `json:"input_schema"`
	}
	inToolChoice struct {
		Type                   string `json:"type"`
		Name                   string `json:"name"`
		DisableParallelToolUse bool   `json:"disable_parallel_tool_use"`
	}
	inMetadata struct {
		UserID string `json:"user_id"`
	}
	inThinking struct {
		Type         string `json:"type"`
		BudgetTokens int    `json:"budget_tokens"`
	}
	inOutputConfig struct {
		Effort string `json:"effort"`
		Format *struct {
			Type   string          `json:"type"`
			Schema json.RawMessage `json:"schema"`
		} `json:"format"`
	}

	// inResponse is a non-streamed message (or an error envelope, which
	// has type "error").
	inResponse struct {
		ID         string    `json:"id"`
		Type       string    `json:"type"`
		Model      string    `json:"model"`
		Content    []inBlock `json:"content"`
		StopReason string    `json:"stop_reason"`
		Usage      inUsage   `json:"usage"`
		Error      *inError  `json:"error"`
	}
	inUsage struct {
		InputTokens              int64 `json:"input_tokens"`
		OutputTokens             int64 `json:"output_tokens"`
		CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
		CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	}
	inError struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	}
)

type (
	outRequest struct {
		Model         string         `json:"model"`
		MaxTokens     int            `json:"max_tokens"`
		System        []outBlock     `json:"system,omitempty"`
		Messages      []outMessage   `json:"messages"`
		Tools         []outTool      `json:"tools,omitempty"`
		ToolChoice    *outToolChoice `json:"tool_choice,omitempty"`
		Temperature   *float64       `json:"temperature,omitempty"`
		TopP          *float64       `json:"top_p,omitempty"`
		TopK          *int           `json:"top_k,omitempty"`
		StopSequences []string       `json:"stop_sequences,omitempty"`
		Stream        bool           `json:"stream,omitempty"`
		Metadata      *outMetadata   `json:"metadata,omitempty"`
		Thinking      *outThinking   `json:"thinking,omitempty"`
	}
	outMessage struct {
		Role    string     `json:"role"`
		Content []outBlock `json:"content"`
	}
	// outBlock is every content block detour sends or answers with; empty
	// fields are omitted, so each block type carries only its own.
	outBlock struct {
		Type      string          `json:"type"`
		Text      string          `json:"text,omitempty"`
		Source    *outSource      `json:"source,omitempty"`
		Title     string          `json:"title,omitempty"`
		ToolUseID string          `json:"tool_use_id,omitempty"`
		Content   string          `json:"content,omitempty"`
		IsError   bool            `json:"is_error,omitempty"`
		ID        string          `json:"id,omitempty"`
		Name      string          `json:"name,omitempty"`
		Input     json.RawMessage `json:"input,omitempty"`
		Thinking  string          `json:"thinking,omitempty"`
		Signature string          `json:"signature,omitempty"`
		Data      string          `json:"data,omitempty"`
	}
	outSource struct {
		Type      string `json:"type"`
		MediaType string `json:"media_type,omitempty"`
		Data      string `json:"data,omitempty"`
		URL       string `json:"url,omitempty"`
	}
	outTool struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		InputSchema json.RawMessage `json:"input_schema"`
	}
	outToolChoice struct {
		Type                   string `json:"type"`
		Name                   string `json:"name,omitempty"`
		DisableParallelToolUse bool   `json:"disable_parallel_tool_use,omitempty"`
	}
	outMetadata struct {
		UserID string `json:"user_id"`
	}
	outThinking struct {
		Type         string `json:"type"`
		BudgetTokens int    `json:"budget_tokens"`
	}

	outResponse struct {
		ID           string     `json:"id"`
		Type         string     `json:"type"`
		Role         string     `json:"role"`
		Model        string     `json:"model"`
		Content      []outBlock `json:"content"`
		StopReason   string     `json:"stop_reason"`
		StopSequence *string    `json:"stop_sequence"`
		Usage        outUsage   `json:"usage"`
	}
	outUsage struct {
		InputTokens              int64 `json:"input_tokens"`
		CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
		CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
		OutputTokens             int64 `json:"output_tokens"`
	}
)
