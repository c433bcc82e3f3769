package fakevendor

import (
	"net/http"
	"strings"

	"github.com/detour-proxy/detour/rewrite"
)

// The model list is what detour's active probes ask for by default: the
// cheapest request each vendor answers with the caller's key checked, and no
// tokens spent. Its faults come from the same script, random draws and
// default as the model endpoints', so a test fails a probe the way it fails
// a request.

// modelListPath reports whether a GET of path is the shape's model list:
// OpenAI's GET /v1/models (any prefix, as for chat completions, so that an
// OpenAI-compatible server under /openai/v1 is one too), Anthropic's GET
// /v1/models, Gemini's GET /v1beta/models (or /v1/models).
func modelListPath(shape rewrite.Shape, method, path string) bool {
	if method != http.MethodGet {
		return false
	}
	switch shape {
	case rewrite.OpenAI:
		return strings.HasSuffix(path, "/models")
	case rewrite.Anthropic:
		return path == "/v1/models"
	case rewrite.Gemini:
		return path == "/v1beta/models" || path == "/v1/models"
	}
	return false
}

// modelListBody is the vendor's model list: one model, the shape's usual
// one, in the list envelope of its API reference.
func (v *Vendor) modelListBody() []byte {
	switch v.shape {
	case rewrite.Anthropic:
		return marshal(map[string]any{
			"data": []any{map[string]any{
				"type": "model", "id": "claude-sonnet-4-5", "display_name": "Claude Sonnet 4.5",
				"created_at": "2025-09-29T00:00:00Z",
			}},
			"has_more": false, "first_id": "claude-sonnet-4-5", "last_id": "claude-sonnet-4-5",
		})
	case rewrite.Gemini:
		return marshal(map[string]any{
			"models": []any{map[string]any{
				"name": "models/gemini-2.5-flash", "version": "001", "displayName": "Gemini 2.5 Flash",
				"inputTokenLimit": 1048576, "outputTokenLimit": 65536,
				"supportedGenerationMethods": []string{"generateContent", "countTokens"},
			}},
		})
	}
	return marshal(map[string]any{
		"object": "list",
		"data": []any{map[string]any{
			"id": "gpt-4o", "object": "model", "created": 1715367049, "owned_by": "system",
		}},
	})
}
