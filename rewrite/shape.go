// Package rewrite knows the wire formats of the LLM vendors detour speaks to:
// their request and response shapes, their error envelopes, their SSE
// framing, and (later) the translators between them.
//
// rewrite must not import any other detour package: policy and proxy depend
// on it, never the other way round.
package rewrite

// Shape names a vendor wire format. An app speaks one shape (chosen by the
// host it calls); an upstream speaks one shape (set in policy).
type Shape string

// The shapes detour understands.
const (
	// OpenAI is the Chat Completions shape of api.openai.com and of every
	// "OpenAI-compatible" server (vLLM, Ollama, gateways).
	OpenAI Shape = "openai"
	// Anthropic is the Messages shape of api.anthropic.com.
	Anthropic Shape = "anthropic"
	// Gemini is the generateContent shape of generativelanguage.googleapis.com.
	Gemini Shape = "gemini"
	// OpenAIResponses is the Responses API (POST /v1/responses) of
	// api.openai.com and of Responses-only deployments (shape_responses.go).
	OpenAIResponses Shape = "openai-responses"
)

// Shapes lists every shape, in a stable order for messages and docs.
var Shapes = []Shape{OpenAI, Anthropic, Gemini}

// Valid reports whether s is a shape detour knows.
func (s Shape) Valid() bool {
	switch s {
	case OpenAI, Anthropic, Gemini, OpenAIResponses:
		return true
	}
	return false
}

// APIRoot is the path prefix that the shape's SDKs put in front of every
// endpoint and that a policy's base_url is expected to include or exclude.
// OpenAI SDK base URLs end in /v1 (so the root is included in base_url);
// Anthropic and Gemini base URLs are bare hosts, so their root is "".
func (s Shape) APIRoot() string {
	if s == OpenAI || s == OpenAIResponses {
		return "/v1"
	}
	return ""
}

// DefaultHost is the vendor's own API host for the shape.
func (s Shape) DefaultHost() string {
	switch s {
	case OpenAI, OpenAIResponses:
		return "api.openai.com"
	case Anthropic:
		return "api.anthropic.com"
	case Gemini:
		return "generativelanguage.googleapis.com"
	}
	return ""
}

// ShapeOfHost returns the shape of a vendor's own API host, or "" when the
// host is not one of the three vendors.
func ShapeOfHost(host string) Shape {
	for _, s := range Shapes {
		if s.DefaultHost() == host {
			return s
		}
	}
	return ""
}
