package gemini

import (
	"bytes"
	"encoding/json"
)

// The wire types of requests as apps send them. The REST API parses proto3
// JSON, which accepts each field under its camelCase name and under its
// original snake_case name, and Google's own curl examples use snake_case
// ("system_instruction", "inline_data", "mime_type"). Each multi-word field
// therefore has a twin with the snake_case tag (suffix S); pick returns the
// one that is set. encoding/json matches tags case-insensitively but not
// across underscores, so the twins never collide.
type (
	reqBody struct {
		Contents           []reqContent    `json:"contents"`
		SystemInstruction  json.RawMessage `json:"systemInstruction"`
		SystemInstructionS json.RawMessage `json:"system_instruction"`
		Tools              []reqTool       `json:"tools"`
		ToolConfig         *reqToolConfig  `json:"toolConfig"`
		ToolConfigS        *reqToolConfig  `json:"tool_config"`
		GenerationConfig   *reqGenConfig   `json:"generationConfig"`
		GenerationConfigS  *reqGenConfig   `json:"generation_config"`
	}
	reqContent struct {
		Role  string    `json:"role"`
		Parts []reqPart `json:"parts"`
	}
	reqPart struct {
		Text              string              `json:"text"`
		Thought           bool                `json:"thought"`
		ThoughtSignature  string              `json:"thoughtSignature"`
		ThoughtSignatureS string              `json:"thought_signature"`
		InlineData        *reqBlob            `json:"inlineData"`
		InlineDataS       *reqBlob            `json:"inline_data"`
		FileData          *reqFileData        `json:"fileData"`
		FileDataS         *reqFileData        `json:"file_data"`
		FunctionCall      *wireFunctionCall   `json:"functionCall"`
		FunctionCallS     *wireFunctionCall   `json:"function_call"`
		FunctionResponse  *wireFunctionResult `json:"functionResponse"`
		FunctionResponseS *wireFunctionResult `json:"function_response"`
	}
	reqBlob struct {
		MimeType  string `json:"mimeType"`
		MimeTypeS string `json:"mime_type"`
		Data      string `json:"data"`
	}
	reqFileData struct {
		MimeType  string `json:"mimeType"`
		MimeTypeS string `json:"mime_type"`
		FileURI   string `json:"fileUri"`
		FileURIS  string `json:"file_uri"`
	}
	reqTool struct {
		FunctionDeclarations  []reqFuncDecl `json:"functionDeclarations"`
		FunctionDeclarationsS []reqFuncDecl `json:"function_declarations"`
	}
	reqFuncDecl struct {
		Name                  string          `json:"name"`
		Description           string          `json:"description"`
		Parameters            json.RawMessage `json:"parameters"`
		ParametersJSONSchema  json.RawMessage `json:"parametersJsonSchema"`
		ParametersJSONSchemaS json.RawMessage `json:"parameters_json_schema"`
	}
	reqToolConfig struct {
		FunctionCallingConfig  *reqCallingConfig `json:"functionCallingConfig"`
		FunctionCallingConfigS *reqCallingConfig `json:"function_calling_config"`
	}
	reqCallingConfig struct {
		Mode                  string   `json:"mode"`
		AllowedFunctionNames  []string `json:"allowedFunctionNames"`
		AllowedFunctionNamesS []string `json:"allowed_function_names"`
	}
	reqGenConfig struct {
		MaxOutputTokens     *int            `json:"maxOutputTokens"`
		MaxOutputTokensS    *int            `json:"max_output_tokens"`
		Temperature         *float64        `json:"temperature"`
		TopP                *float64        `json:"topP"`
		TopPS               *float64        `json:"top_p"`
		TopK                *float64        `json:"topK"`
		TopKS               *float64        `json:"top_k"`
		StopSequences       []string        `json:"stopSequences"`
		StopSequencesS      []string        `json:"stop_sequences"`
		CandidateCount      *int            `json:"candidateCount"`
		CandidateCountS     *int            `json:"candidate_count"`
		Seed                *int64          `json:"seed"`
		ResponseMimeType    string          `json:"responseMimeType"`
		ResponseMimeTypeS   string          `json:"response_mime_type"`
		ResponseSchema      json.RawMessage `json:"responseSchema"`
		ResponseSchemaS     json.RawMessage `json:"response_schema"`
		ResponseJSONSchema  json.RawMessage `json:"responseJsonSchema"`
		ResponseJSONSchemaS json.RawMessage `json:"response_json_schema"`
		ThinkingConfig      *reqThinking    `json:"thinkingConfig"`
		ThinkingConfigS     *reqThinking    `json:"thinking_config"`
	}
	reqThinking struct {
		ThinkingBudget  *int   `json:"thinkingBudget"`
		ThinkingBudgetS *int   `json:"thinking_budget"`
		ThinkingLevel   string `json:"thinkingLevel"`
		ThinkingLevelS  string `json:"thinking_level"`
	}
)

// wireFunctionCall is a functionCall part's value, in requests and
// responses. ID is sent by Gemini 3 only.
type wireFunctionCall struct {
	ID   string          `json:"id,omitempty"`
	Name string          `json:"name"`
	Args json.RawMessage `json:"args,omitempty"`
}

// wireFunctionResult is a functionResponse part's value.
type wireFunctionResult struct {
	ID       string          `json:"id,omitempty"`
	Name     string          `json:"name"`
	Response json.RawMessage `json:"response"`
}

// pick returns a unless it is the zero value, else b: the camelCase field
// of a twin pair wins when both are set.
func pick[T comparable](a, b T) T {
	var zero T
	if a != zero {
		return a
	}
	return b
}

// pickRaw is pick for raw JSON, where JSON null counts as unset.
func pickRaw(a, b json.RawMessage) json.RawMessage {
	if isNull(a) {
		return b
	}
	return a
}

// pickSlice is pick for slices.
func pickSlice[T any](a, b []T) []T {
	if a != nil {
		return a
	}
	return b
}

// isNull reports whether raw is absent or the JSON null.
func isNull(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || string(raw) == "null"
}

// The wire types of responses and stream chunks, as Gemini sends them
// (always camelCase).
type (
	respBody struct {
		Candidates     []respCandidate `json:"candidates"`
		PromptFeedback *promptFeedback `json:"promptFeedback"`
		UsageMetadata  *usageMetadata  `json:"usageMetadata"`
		ModelVersion   string          `json:"modelVersion"`
		ResponseID     string          `json:"responseId"`
		// Error is set on an error envelope, which Gemini also sends inside
		// a 200 stream (docs/vendors.md#gemini-errors).
		Error json.RawMessage `json:"error"`
	}
	respCandidate struct {
		Content      *respContent `json:"content"`
		FinishReason string       `json:"finishReason"`
		Index        int          `json:"index"`
	}
	respContent struct {
		Parts []respPart `json:"parts"`
	}
	respPart struct {
		Text             string            `json:"text"`
		Thought          bool              `json:"thought"`
		ThoughtSignature string            `json:"thoughtSignature"`
		InlineData       *outBlob          `json:"inlineData"`
		FileData         *outFileData      `json:"fileData"`
		FunctionCall     *wireFunctionCall `json:"functionCall"`
	}
	promptFeedback struct {
		BlockReason string `json:"blockReason"`
	}
	usageMetadata struct {
		PromptTokenCount        int64 `json:"promptTokenCount"`
		CachedContentTokenCount int64 `json:"cachedContentTokenCount"`
		CandidatesTokenCount    int64 `json:"candidatesTokenCount"`
		ThoughtsTokenCount      int64 `json:"thoughtsTokenCount"`
		TotalTokenCount         int64 `json:"totalTokenCount"`
	}
	// wireError is google.rpc.Status as Gemini sends it.
	wireError struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Status  string `json:"status"`
	}
)

// firstCandidate returns the candidate with index 0, the one the IR
// carries. With candidateCount > 1 a stream chunk may hold only another
// candidate's delta, which must not be mixed in; a response whose
// candidates carry no index 0 at all gives its first.
func firstCandidate(cands []respCandidate, stream bool) *respCandidate {
	for i := range cands {
		if cands[i].Index == 0 {
			return &cands[i]
		}
	}
	if !stream && len(cands) > 0 {
		return &cands[0]
	}
	return nil
}

// The wire types detour writes, in the field order Gemini and go-genai use,
// so that output is stable for golden files.
type (
	outRequest struct {
		Contents          []outContent   `json:"contents"`
		SystemInstruction *outContent    `json:"systemInstruction,omitempty"`
		Tools             []outTool      `json:"tools,omitempty"`
		ToolConfig        *outToolConfig `json:"toolConfig,omitempty"`
		GenerationConfig  *outGenConfig  `json:"generationConfig,omitempty"`
	}
	outContent struct {
		Role  string    `json:"role,omitempty"`
		Parts []outPart `json:"parts"`
	}
	outPart struct {
		Text             string              `json:"text,omitempty"`
		Thought          bool                `json:"thought,omitempty"`
		InlineData       *outBlob            `json:"inlineData,omitempty"`
		FileData         *outFileData        `json:"fileData,omitempty"`
		FunctionCall     *wireFunctionCall   `json:"functionCall,omitempty"`
		FunctionResponse *wireFunctionResult `json:"functionResponse,omitempty"`
		ThoughtSignature string              `json:"thoughtSignature,omitempty"`
	}
	outBlob struct {
		MimeType string `json:"mimeType"`
		Data     string `json:"data"`
	}
	outFileData struct {
		MimeType string `json:"mimeType,omitempty"`
		FileURI  string `json:"fileUri"`
	}
	outTool struct {
		FunctionDeclarations []outFuncDecl `json:"functionDeclarations"`
	}
	outFuncDecl struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters,omitempty"`
	}
	outToolConfig struct {
		FunctionCallingConfig outCallingConfig `json:"functionCallingConfig"`
	}
	outCallingConfig struct {
		Mode                 string   `json:"mode"`
		AllowedFunctionNames []string `json:"allowedFunctionNames,omitempty"`
	}
	outGenConfig struct {
		StopSequences    []string        `json:"stopSequences,omitempty"`
		ResponseMimeType string          `json:"responseMimeType,omitempty"`
		ResponseSchema   json.RawMessage `json:"responseSchema,omitempty"`
		CandidateCount   int             `json:"candidateCount,omitempty"`
		MaxOutputTokens  int             `json:"maxOutputTokens,omitempty"`
		Temperature      *float64        `json:"temperature,omitempty"`
		TopP             *float64        `json:"topP,omitempty"`
		TopK             *int            `json:"topK,omitempty"`
		Seed             *int64          `json:"seed,omitempty"`
		ThinkingConfig   *outThinking    `json:"thinkingConfig,omitempty"`
	}
	outThinking struct {
		IncludeThoughts bool `json:"includeThoughts,omitempty"`
		ThinkingBudget  *int `json:"thinkingBudget,omitempty"`
	}
	outResponse struct {
		Candidates    []outCandidate `json:"candidates"`
		UsageMetadata *outUsage      `json:"usageMetadata,omitempty"`
		ModelVersion  string         `json:"modelVersion"`
		ResponseID    string         `json:"responseId"`
	}
	outCandidate struct {
		Content      outContent `json:"content"`
		FinishReason string     `json:"finishReason,omitempty"`
		Index        int        `json:"index"`
	}
	outUsage struct {
		PromptTokenCount        int64 `json:"promptTokenCount"`
		CandidatesTokenCount    int64 `json:"candidatesTokenCount"`
		TotalTokenCount         int64 `json:"totalTokenCount"`
		CachedContentTokenCount int64 `json:"cachedContentTokenCount,omitempty"`
		ThoughtsTokenCount      int64 `json:"thoughtsTokenCount,omitempty"`
	}
)

// marshal encodes v as one line of JSON without HTML escaping: the bodies
// are read by SDKs, and "<" should reach the model as the app wrote it.
// encoding/json still escapes control characters, so the result never
// contains a line break.
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
