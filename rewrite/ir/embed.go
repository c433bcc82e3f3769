package ir

// EmbedRequest is an embeddings request, vendor-neutral: OpenAI's
// /v1/embeddings and Gemini's embedContent / batchEmbedContents both come
// down to a list of texts and an optional vector size. It rides in
// Request.Embed, so that the chain carries an embeddings request across
// shapes the way it carries a chat request.
type EmbedRequest struct {
	// Inputs are the texts to embed, one vector each, in order.
	Inputs []string `json:"inputs"`
	// Dimensions is the vector size asked for (OpenAI dimensions, Gemini
	// outputDimensionality); 0: the model's default.
	Dimensions int `json:"dimensions,omitempty"`
	// Base64 is OpenAI's encoding_format "base64": the app wants each
	// vector as little-endian float32 bytes in base64, not a JSON array.
	Base64 bool `json:"base64,omitempty"`
	// Batch is whether a Gemini app called batchEmbedContents (answered
	// with "embeddings": […]) rather than embedContent ("embedding": {…}).
	// Other shapes always answer a list.
	Batch bool `json:"batch,omitempty"`
	// TaskType and Title are Gemini's retrieval hints; OpenAI has neither,
	// so encoders towards OpenAI drop them with a note.
	TaskType string `json:"task_type,omitempty"`
	Title    string `json:"title,omitempty"`
}

// EmbedResponse is an embeddings answer: one vector per input, in order.
type EmbedResponse struct {
	Model   string      `json:"model,omitempty"`
	Vectors [][]float32 `json:"vectors"`
	// InputTokens is the upstream's token count (OpenAI usage.prompt_tokens;
	// Gemini's API reports none, so 0 there).
	InputTokens int64 `json:"input_tokens,omitempty"`
}
