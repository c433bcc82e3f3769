package responses

import (
	"encoding/json"
	"strconv"

	"github.com/detour-proxy/detour/rewrite"
)

// requestIn is the part of a Responses request the IR carries, plus the
// stateful fields whose presence keeps the request on OpenAI.
type requestIn struct {
	Model              string          `json:"model"`
	Input              json.RawMessage `json:"input"`
	Instructions       *string         `json:"instructions"`
	Tools              []toolIn        `json:"tools"`
	ToolChoice         json.RawMessage `json:"tool_choice"`
	ParallelToolCalls  *bool           `json:"parallel_tool_calls"`
	MaxOutputTokens    *int            `json:"max_output_tokens"`
	Temperature        *float64        `json:"temperature"`
	TopP               *float64        `json:"top_p"`
	Text               *textConfig     `json:"text"`
	Reasoning          *reasoning      `json:"reasoning"`
	Stream             bool            `json:"stream"`
	User               string          `json:"user"`
	SafetyIdentifier   string          `json:"safety_identifier"`
	PreviousResponseID *string         `json:"previous_response_id"`
	Conversation       json.RawMessage `json:"conversation"`
	Background         *bool           `json:"background"`
}

// toolIn is one entry of tools. Only function tools have a meaning at
// another vendor.
type toolIn struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      *bool           `json:"strict"`
}

// textConfig is the request's text member: its output format.
type textConfig struct {
	Format *textFormat `json:"format,omitempty"`
}

// textFormat is text.format: text, json_object or json_schema (whose
// name, schema and strict sit beside type, not nested as in Chat
// Completions' response_format).
type textFormat struct {
	Type        string          `json:"type"`
	Name        string          `json:"name,omitempty"`
	Description string          `json:"description,omitempty"`
	Schema      json.RawMessage `json:"schema,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
}

// reasoning is the request's reasoning member.
type reasoning struct {
	Effort  string `json:"effort,omitempty"`
	Summary string `json:"summary,omitempty"`
}

// itemIn is one input item, with the members of every kind detour reads.
// A message may come without a type (the SDKs' "easy" input message).
type itemIn struct {
	Type      string          `json:"type"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Arguments string          `json:"arguments"`
	Output    json.RawMessage `json:"output"`
	ID        string          `json:"id"`
	Summary   []summaryPart   `json:"summary"`
}

// contentIn is one content part of an input message.
type contentIn struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	Refusal  string `json:"refusal"`
	ImageURL string `json:"image_url"`
	FileID   string `json:"file_id"`
	Detail   string `json:"detail"`
	FileData string `json:"file_data"`
	FileURL  string `json:"file_url"`
	Filename string `json:"filename"`
}

// summaryPart is one entry of a reasoning item's summary.
type summaryPart struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// responseIn is a whole Responses answer, as an upstream sends it (and
// the response member of the stream's lifecycle events).
type responseIn struct {
	ID                string             `json:"id"`
	Model             string             `json:"model"`
	CreatedAt         float64            `json:"created_at"`
	Status            string             `json:"status"`
	Error             *errorObject       `json:"error"`
	IncompleteDetails *incompleteDetails `json:"incomplete_details"`
	Output            []outputItemIn     `json:"output"`
	Usage             *usageWire         `json:"usage"`
}

// outputItemIn is one output item: a message, a function call or a
// reasoning item (others are skipped).
type outputItemIn struct {
	Type      string         `json:"type"`
	ID        string         `json:"id"`
	Role      string         `json:"role"`
	Content   []outputPartIn `json:"content"`
	CallID    string         `json:"call_id"`
	Name      string         `json:"name"`
	Arguments string         `json:"arguments"`
	Summary   []summaryPart  `json:"summary"`
	Status    string         `json:"status"`
}

// outputPartIn is one content part of an output message.
type outputPartIn struct {
	Type    string `json:"type"`
	Text    string `json:"text"`
	Refusal string `json:"refusal"`
}

// incompleteDetails says why a response stopped early.
type incompleteDetails struct {
	Reason string `json:"reason"`
}

// errorObject is the error of a failed response, and of the stream's
// error event.
type errorObject struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// usageWire is the Responses usage object.
type usageWire struct {
	InputTokens        int64 `json:"input_tokens"`
	InputTokensDetails struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokens        int64 `json:"output_tokens"`
	OutputTokensDetails struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
	TotalTokens int64 `json:"total_tokens"`
}

// appendString appends s to dst as a JSON string (rewrite.AppendJSONString).
func appendString(dst []byte, s string) []byte { return rewrite.AppendJSONString(dst, s) }

// appendInt appends n in decimal.
func appendInt(dst []byte, n int64) []byte { return strconv.AppendInt(dst, n, 10) }
