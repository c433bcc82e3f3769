package translate

import (
	"fmt"

	"github.com/detour-proxy/detour/rewrite"
	"github.com/detour-proxy/detour/rewrite/gemini"
	"github.com/detour-proxy/detour/rewrite/ir"
	"github.com/detour-proxy/detour/rewrite/openai"
)

// EmbedEndpoint reports whether path (relative to the shape's API root) is
// an embeddings endpoint of shape app, and for Gemini whether it is the
// batch one. Anthropic has no embeddings API.
func EmbedEndpoint(app rewrite.Shape, path string) (ok, batch bool) {
	switch app {
	case rewrite.OpenAI:
		return path == "/embeddings", false
	case rewrite.Gemini:
		_, method, isModel := rewrite.GeminiModelFromPath(path)
		if !isModel {
			return false, false
		}
		return method == "embedContent" || method == "batchEmbedContents", method == "batchEmbedContents"
	}
	return false, false
}

// decodeEmbedRequest decodes an app's embeddings request; path is known to
// be an embeddings endpoint of app.
func decodeEmbedRequest(app rewrite.Shape, body []byte, path string, batch bool) (*ir.Request, error) {
	if app == rewrite.OpenAI {
		return openai.DecodeEmbedRequest(body)
	}
	model, _, _ := rewrite.GeminiModelFromPath(path)
	return gemini.DecodeEmbedRequest(body, model, batch)
}

// encodeEmbedRequest encodes an embeddings request for an upstream of
// shape up.
func encodeEmbedRequest(req *ir.Request, up rewrite.Shape, o ir.EncodeOptions) (Upstream, error) {
	switch up {
	case rewrite.OpenAI:
		b, err := openai.EncodeEmbedRequest(req, o)
		return Upstream{Path: "/embeddings", Body: b}, err
	case rewrite.Gemini:
		b, err := gemini.EncodeEmbedRequest(req, o)
		return Upstream{Path: gemini.EmbedPath(o.Model), Body: b}, err
	case rewrite.Anthropic:
		return Upstream{}, &ir.UnsupportedError{What: "embeddings (Anthropic has no embeddings API)"}
	}
	return Upstream{}, fmt.Errorf("unknown shape %q", up)
}

// embedResponse translates an upstream's embeddings answer into the app's
// shape. An answer with a different number of vectors than inputs is an
// error rather than a misaligned list handed to the app.
func embedResponse(req *ir.Request, app, up rewrite.Shape, body []byte) ([]byte, error) {
	var r *ir.EmbedResponse
	var err error
	switch up {
	case rewrite.OpenAI:
		r, err = openai.DecodeEmbedResponse(body)
	case rewrite.Gemini:
		r, err = gemini.DecodeEmbedResponse(body)
	default:
		return nil, fmt.Errorf("no embeddings from shape %q", up)
	}
	if err != nil {
		return nil, err
	}
	if len(r.Vectors) != len(req.Embed.Inputs) {
		return nil, fmt.Errorf("%s answered %d embeddings for %d inputs", up, len(r.Vectors), len(req.Embed.Inputs))
	}
	switch app {
	case rewrite.OpenAI:
		return openai.EncodeEmbedResponse(r, req), nil
	case rewrite.Gemini:
		return gemini.EncodeEmbedResponse(r, req)
	}
	return nil, fmt.Errorf("no embeddings for shape %q", app)
}
