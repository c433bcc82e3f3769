package probe

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"

	"github.com/detour-proxy/detour/policy"
	"github.com/detour-proxy/detour/rewrite"
)

// probeText is the prompt of a completion probe: one word, for one token.
const probeText = "ping"

// userAgent names detour's probes in the vendor's logs, so that an operator
// reading them can tell probes from the apps' requests.
const userAgent = "detour-probe"

// newRequest builds u's probe: the model list or a one-token completion, in
// u's shape, with u's own credential (a key of the policy's, or none) and
// static headers. It never sees an app's request, so it cannot carry an
// app's key. For a cloud upstream it is the request an attempt would make
// before the cloud round tripper moves it to the cloud's address and
// signs it (Transports.ForUpstream).
func newRequest(ctx context.Context, u *policy.Upstream) (*http.Request, error) {
	target := *u.BaseURL
	target.RawPath, target.RawQuery = "", ""
	method := http.MethodGet
	var body []byte
	switch u.Probe.Request {
	case policy.ProbeCompletion:
		method = http.MethodPost
		var doc any
		switch u.Shape {
		case rewrite.Anthropic:
			target.Path += "/v1/messages"
			doc = map[string]any{"model": u.Probe.Model, "max_tokens": 1,
				"messages": []any{map[string]any{"role": "user", "content": probeText}}}
		case rewrite.Bedrock:
			// Converse, as the chain sends it; the cloud round tripper
			// escapes the model id (its ':' and '/') and signs the request.
			target.Path += "/model/" + u.Probe.Model + "/converse"
			doc = map[string]any{
				"messages":        []any{map[string]any{"role": "user", "content": []any{map[string]any{"text": probeText}}}},
				"inferenceConfig": map[string]any{"maxTokens": 1},
			}
		case rewrite.Gemini:
			// URL.String escapes the model as part of the path.
			target.Path += "/v1beta/models/" + u.Probe.Model + ":generateContent"
			doc = map[string]any{
				"contents":         []any{map[string]any{"role": "user", "parts": []any{map[string]any{"text": probeText}}}},
				"generationConfig": map[string]any{"maxOutputTokens": 1},
			}
		default:
			// max_tokens, not max_completion_tokens: the OpenAI-compatible
			// servers (vLLM, gateways) all take it.
			target.Path += "/chat/completions"
			doc = map[string]any{"model": u.Probe.Model, "max_tokens": 1,
				"messages": []any{map[string]any{"role": "user", "content": probeText}}}
		}
		b, err := json.Marshal(doc)
		if err != nil {
			return nil, err
		}
		body = b
	default:
		// The smallest page each API offers: the answer only has to say
		// that the upstream is there and takes the key.
		switch u.Shape {
		case rewrite.Anthropic:
			target.Path += "/v1/models"
			target.RawQuery = "limit=1"
		case rewrite.Gemini:
			target.Path += "/v1beta/models"
			target.RawQuery = "pageSize=1"
		default:
			target.Path += "/models"
		}
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, target.String(), rd)
	if err != nil {
		return nil, err
	}
	h := req.Header
	for k, vs := range u.Headers {
		h[k] = append([]string(nil), vs...)
	}
	if u.Auth == policy.AuthKey {
		setKey(h, u.Shape, string(u.Key))
	}
	if u.Shape == rewrite.Anthropic && h.Get("Anthropic-Version") == "" {
		h.Set("Anthropic-Version", "2023-06-01")
	}
	if body != nil {
		h.Set("Content-Type", "application/json")
	}
	h.Set("User-Agent", userAgent)
	return req, nil
}

// setKey puts the key where u's vendor reads it: the same headers the chain
// sets for an upstream's own key (internal/chain request.go), so a key that
// works for requests works for probes.
func setKey(h http.Header, shape rewrite.Shape, key string) {
	switch shape {
	case rewrite.Anthropic:
		h.Set("X-Api-Key", key)
	case rewrite.Gemini:
		h.Set("X-Goog-Api-Key", key)
	default:
		h.Set("Authorization", "Bearer "+key)
	}
}
