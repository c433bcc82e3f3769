package cloud

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/detour-proxy/detour/policy"
	"github.com/detour-proxy/detour/rewrite"
)

// vertexScope is the OAuth2 scope Vertex AI's API takes.
const vertexScope = "https://www.googleapis.com/auth/cloud-platform"

// vertexAnthropicVersion is the anthropic_version Claude on Vertex requires
// in the body (instead of the anthropic-version header).
const vertexAnthropicVersion = "vertex-2023-10-16"

func (r *Registry) vertex(u *policy.Upstream, next http.RoundTripper) http.RoundTripper {
	r.mu.Lock()
	defer r.mu.Unlock()
	g, ok := r.google[u.Cloud.CredentialsFile]
	if !ok {
		if r.google == nil {
			r.google = map[string]*googleTokens{}
		}
		g = &googleTokens{file: u.Cloud.CredentialsFile}
		r.google[u.Cloud.CredentialsFile] = g
	}
	return &vertex{u: u, next: next, tokens: g}
}

// vertex moves a Gemini or Anthropic request to its Vertex AI address
// (docs/vendors.md#vertex-ai-upstreams) and sends it with an access token.
type vertex struct {
	u      *policy.Upstream
	next   http.RoundTripper
	tokens *googleTokens
}

func (v *vertex) RoundTrip(req *http.Request) (*http.Response, error) {
	r := cloneRequest(req)
	c := v.u.Cloud
	base := v.u.BaseURL.Path + "/v1/projects/" + c.Project + "/locations/" + c.Region + "/publishers/"
	rel := strings.TrimPrefix(req.URL.Path, v.u.BaseURL.Path)
	u := *req.URL
	u.RawPath = ""
	switch v.u.Shape {
	case rewrite.Gemini:
		model, method, ok := rewrite.GeminiModelFromPath(rel)
		if !ok {
			return nil, fmt.Errorf("vertex: %s is not a Gemini model endpoint", rel)
		}
		u.Path = base + "google/models/" + model + ":" + method
		r.Header.Del("X-Goog-Api-Key")
	case rewrite.Anthropic:
		if rel != "/v1/messages" {
			return nil, fmt.Errorf("vertex: %s has no Vertex equivalent (only /v1/messages)", rel)
		}
		body, err := readBody(req)
		if err != nil {
			return nil, err
		}
		model, stream, out, err := vertexAnthropicBody(body)
		if err != nil {
			return nil, err
		}
		method := ":rawPredict"
		if stream {
			method = ":streamRawPredict"
		}
		u.Path = base + "anthropic/models/" + model + method
		setBody(r, out)
		r.Header.Del("X-Api-Key")
		r.Header.Del("Anthropic-Version")
	default:
		return nil, fmt.Errorf("vertex: shape %s", v.u.Shape)
	}
	r.URL = &u
	tok, err := v.tokens.token(req.Context())
	if err != nil {
		return nil, err
	}
	r.Header.Set("Authorization", "Bearer "+tok)
	return v.next.RoundTrip(r)
}

// vertexAnthropicBody moves a Messages body to Vertex's form: the model
// goes into the path, anthropic_version into the body.
func vertexAnthropicBody(body []byte) (model string, stream bool, out []byte, err error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		return "", false, nil, fmt.Errorf("vertex: request body: %w", err)
	}
	if err := json.Unmarshal(m["model"], &model); err != nil || model == "" {
		return "", false, nil, errors.New("vertex: the request names no model")
	}
	if s, ok := m["stream"]; ok {
		_ = json.Unmarshal(s, &stream)
	}
	delete(m, "model")
	if _, ok := m["anthropic_version"]; !ok {
		m["anthropic_version"] = json.RawMessage(`"` + vertexAnthropicVersion + `"`)
	}
	out, err = json.Marshal(m)
	return model, stream, out, err
}
