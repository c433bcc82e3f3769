package chain

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/detour-proxy/detour/policy"
	"github.com/detour-proxy/detour/rewrite"
	"github.com/detour-proxy/detour/rewrite/ir"
	"github.com/detour-proxy/detour/rewrite/sse"
	"github.com/detour-proxy/detour/rewrite/translate"
)

// conversion carries one attempt across vendor shapes. A nil *conversion is
// the same-shape fast path: every method then passes bytes through.
type conversion struct {
	req    *ir.Request
	up     translate.Upstream
	stream *translate.Stream
	notes  []string
	buf    []byte
}

// convert translates the app's request for an upstream of another shape. It
// decodes the app's body afresh for every attempt, so nothing an encoder
// does to the request can leak into the next upstream's. A nil result comes
// with the reason the upstream cannot take the request.
func (s *session) convert(u *policy.Upstream, model string) (*conversion, string) {
	if u.Auth == policy.AuthClient && u.Shape.Vendor() != s.app.Vendor() {
		// The policy compiler refuses this; kept as a guard because the
		// app's key must never reach another vendor. (A Responses request
		// translated for a chat_only OpenAI upstream stays with its vendor.)
		return nil, "auth from client, but the app speaks " + string(s.app)
	}
	rel := strings.TrimPrefix(s.req.URL.Path, s.app.APIRoot())
	if !translatable(s.app, rel) {
		// Only the chat endpoints (the Responses API among them) and
		// embeddings have a meaning in other shapes; token counting and
		// the rest fall over only to upstreams of the app's own shape.
		return nil, "only chat and embeddings requests are translated; " + s.req.URL.Path + " goes to " + string(s.app) + "-shaped upstreams only"
	}
	req, err := translate.DecodeRequest(s.app, s.body, rel)
	if err != nil {
		return nil, "cannot translate the request: " + err.Error()
	}
	c := &conversion{req: req}
	up, err := translate.EncodeRequest(req, u.Shape, ir.EncodeOptions{
		Model:            model,
		DefaultMaxTokens: u.MaxTokens,
		EmbedDimensions:  u.EmbeddingDimensions,
		Notes:            func(n string) { c.notes = append(c.notes, n) },
	})
	if err != nil {
		var un *ir.UnsupportedError
		if errors.As(err, &un) {
			return nil, string(u.Shape) + " cannot take this request: " + un.What
		}
		return nil, "cannot translate the request: " + err.Error()
	}
	c.up = up
	return c, ""
}

// embedSkip is why u is not sent this request: an embeddings request goes
// to an upstream of another shape only when the upstream declares its
// vector size. That is an opt-in rather than a translation failure: an
// upstream that declares none may serve chat only, and its chat model
// would answer with a 400 that hides the primary's real failure from the
// app, so it is skipped like an upstream with no models entry.
func (s *session) embedSkip(u *policy.Upstream) string {
	if u.Shape == s.app || u.Shape == policy.ShapeStatic || u.EmbeddingDimensions > 0 {
		return ""
	}
	if ok, _ := translate.EmbedEndpoint(s.app, strings.TrimPrefix(s.req.URL.Path, s.app.APIRoot())); ok {
		return "embeddings go to another vendor's upstream only when it declares embedding_dimensions"
	}
	return ""
}

// translatable reports whether a request path (relative to the shape's API
// root) is a chat request that every shape can express, or an embeddings
// request (OpenAI and Gemini; an Anthropic upstream refuses it in its
// encoder, so the chain skips it with that reason).
func translatable(app rewrite.Shape, rel string) bool {
	if ok, _ := translate.EmbedEndpoint(app, rel); ok {
		return true
	}
	switch app {
	case rewrite.OpenAI:
		return rel == "/chat/completions"
	case rewrite.Anthropic:
		return rel == "/v1/messages"
	case rewrite.Gemini:
		_, method, ok := rewrite.GeminiModelFromPath(rel)
		return ok && (method == "generateContent" || method == "streamGenerateContent")
	case rewrite.OpenAIResponses:
		return rel == rewrite.ResponsesPath
	}
	return false
}

// event returns the app's bytes for one upstream event. The bytes are
// valid until the next call: callers write or copy them at once, so the
// per-event path allocates no output buffer.
func (c *conversion) event(ev sse.Event) []byte {
	if c == nil {
		return ev.Raw
	}
	out, _, err := c.stream.Event(c.buf[:0], ev)
	if err != nil {
		// An event the decoder cannot read carries nothing the app can
		// use; the stream goes on (a broken stream ends in an error
		// event when it stops).
		return nil
	}
	c.buf = out[:0]
	return out
}

// closing returns the app stream's closing events (nothing on the fast
// path, where the upstream's own closing events went through).
func (c *conversion) closing() []byte {
	if c == nil {
		return nil
	}
	return c.stream.Close(nil)
}

// errorEvent returns an in-stream error in the app's shape.
func (c *conversion) errorEvent(app rewrite.Shape, e rewrite.AppError) []byte {
	if c == nil {
		return rewrite.StreamErrorEvent(app, e)
	}
	return c.stream.Error(nil, e)
}

// translatedHeaders are the app's headers that still mean something to
// another vendor. Everything else (anthropic-version, openai-beta, the
// SDKs' x-stainless-* telemetry) belongs to the app's vendor.
var translatedHeaders = []string{"User-Agent", "Traceparent", "Tracestate", "Accept-Language"}

// buildTranslated builds the request for an upstream of another shape.
func (s *session) buildTranslated(ctx context.Context, u *policy.Upstream, c *conversion, p *upstreamParts) (*http.Request, error) {
	target := &p.url
	*target = *u.BaseURL
	target.Path = u.BaseURL.Path + c.up.Path
	target.RawPath = ""
	target.RawQuery = c.up.RawQuery
	h := http.Header{}
	for _, k := range translatedHeaders {
		copyHeader(h, s.req.Header, k)
	}
	h.Set("Content-Type", "application/json")
	if c.req.Stream {
		h.Set("Accept", "text/event-stream")
	} else {
		h.Set("Accept", "application/json")
	}
	for k, vs := range u.Headers {
		h[k] = append([]string(nil), vs...)
	}
	switch u.Auth {
	case policy.AuthKey:
		setKey(h, u.Shape.Vendor(), string(u.Key))
	case policy.AuthClient:
		copyClientCredential(h, s.req.Header, "", u.Shape.Vendor())
	}
	if u.Shape == rewrite.Anthropic && h.Get("Anthropic-Version") == "" {
		h.Set("Anthropic-Version", "2023-06-01")
	}
	return newUpstreamRequest(ctx, target, h, c.up.Body, &p.body)
}
