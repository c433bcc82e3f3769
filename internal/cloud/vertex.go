package cloud

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google"

	"github.com/detour-proxy/detour/policy"
	"github.com/detour-proxy/detour/rewrite"
)

// vertexScope is the OAuth2 scope Vertex AI's API takes.
const vertexScope = "https://www.googleapis.com/auth/cloud-platform"

// vertexAnthropicVersion is the anthropic_version Claude on Vertex requires
// in the body (instead of the anthropic-version header).
const vertexAnthropicVersion = "vertex-2023-10-16"

// googleTokens is an OAuth2 access token source from Application Default
// Credentials (or one key file), found on first use and kept: its
// TokenSource is an oauth2.ReuseTokenSource, which hands out the cached
// token and fetches a new one shortly before it expires. A failed search is
// not kept.
type googleTokens struct {
	file string

	mu sync.Mutex
	ts oauth2.TokenSource
}

func (g *googleTokens) token() (string, error) {
	g.mu.Lock()
	ts := g.ts
	if ts == nil {
		var err error
		if ts, err = g.find(); err != nil {
			g.mu.Unlock()
			return "", fmt.Errorf("vertex: Google credentials: %w", err)
		}
		g.ts = ts
	}
	g.mu.Unlock()
	tok, err := ts.Token()
	if err != nil {
		return "", fmt.Errorf("vertex: access token: %w", err)
	}
	return tok.AccessToken, nil
}

// find builds the token source. Its context outlives every request: the
// source refreshes with it long after the request that created it ended.
func (g *googleTokens) find() (oauth2.TokenSource, error) {
	ctx := context.Background()
	if g.file == "" {
		// GOOGLE_APPLICATION_CREDENTIALS, gcloud's file, then the
		// metadata server (GKE workload identity, GCE).
		c, err := google.FindDefaultCredentials(ctx, vertexScope)
		if err != nil {
			return nil, err
		}
		return c.TokenSource, nil
	}
	b, err := os.ReadFile(g.file)
	if err != nil {
		return nil, err
	}
	// The policy's author names the file, so its own type is trusted.
	var head struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(b, &head); err != nil || head.Type == "" {
		return nil, errors.New(g.file + " is not a Google credentials JSON file")
	}
	c, err := google.CredentialsFromJSONWithType(ctx, b, google.CredentialsType(head.Type), vertexScope)
	if err != nil {
		return nil, err
	}
	return c.TokenSource, nil
}

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
	tok, err := v.tokens.token()
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
