package gemini

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/detour-proxy/detour/rewrite"
	"github.com/detour-proxy/detour/rewrite/ir"
)

// embedContentIn is one embedContent request: the body of
// models/{model}:embedContent, or one element of batchEmbedContents'
// requests.
type embedContentIn struct {
	Model   string `json:"model"`
	Content struct {
		Parts []map[string]json.RawMessage `json:"parts"`
	} `json:"content"`
	TaskType             string `json:"taskType"`
	Title                string `json:"title"`
	OutputDimensionality int    `json:"outputDimensionality"`
}

// DecodeEmbedRequest decodes a Gemini app's embedContent (batch false) or
// batchEmbedContents (batch true) body; model comes from the path. A
// content's text parts are joined with a newline into one input, as
// Gemini embeds a content whole; any other part (an image, a file) is an
// *ir.UnsupportedError. OpenAI takes one vector size and no task type per
// call, so a batch whose requests differ in those is unsupported too.
func DecodeEmbedRequest(body []byte, model string, batch bool) (*ir.Request, error) {
	var reqs []embedContentIn
	if batch {
		var in struct {
			Requests []embedContentIn `json:"requests"`
		}
		if err := json.Unmarshal(body, &in); err != nil {
			return nil, fmt.Errorf("gemini: batchEmbedContents request: %w", err)
		}
		if len(in.Requests) == 0 {
			return nil, fmt.Errorf("gemini: batchEmbedContents request: requests is empty")
		}
		reqs = in.Requests
	} else {
		var in embedContentIn
		if err := json.Unmarshal(body, &in); err != nil {
			return nil, fmt.Errorf("gemini: embedContent request: %w", err)
		}
		reqs = []embedContentIn{in}
	}
	first := reqs[0]
	e := &ir.EmbedRequest{Batch: batch, Dimensions: first.OutputDimensionality, TaskType: first.TaskType, Title: first.Title, Inputs: make([]string, len(reqs))}
	if first.OutputDimensionality < 0 {
		return nil, fmt.Errorf("gemini: embed request: outputDimensionality %d is negative", first.OutputDimensionality)
	}
	for i, rq := range reqs {
		if rq.OutputDimensionality != first.OutputDimensionality || rq.TaskType != first.TaskType {
			return nil, &ir.UnsupportedError{What: "a batch of embed requests with different outputDimensionality or taskType"}
		}
		var texts []string
		for _, p := range rq.Content.Parts {
			raw, ok := p["text"]
			if !ok || len(p) != 1 {
				return nil, &ir.UnsupportedError{What: "an embed content part that is not text"}
			}
			var s string
			if err := json.Unmarshal(raw, &s); err != nil {
				return nil, fmt.Errorf("gemini: embed request: text: %w", err)
			}
			texts = append(texts, s)
		}
		if len(texts) == 0 {
			return nil, fmt.Errorf("gemini: embed request %d: content has no parts", i)
		}
		e.Inputs[i] = strings.Join(texts, "\n")
	}
	return &ir.Request{Model: model, Embed: e}, nil
}

// EmbedPath is the upstream path of an embeddings request for model:
// always batchEmbedContents, which takes one input or many (the genai SDK
// calls it for single inputs too).
func EmbedPath(model string) string {
	return "/v1beta/models/" + model + ":batchEmbedContents"
}

// EncodeEmbedRequest encodes an embeddings request as a batchEmbedContents
// body for model.
func EncodeEmbedRequest(r *ir.Request, o ir.EncodeOptions) ([]byte, error) {
	e := r.Embed
	dims := e.Dimensions
	if dims == 0 {
		dims = o.EmbedDimensions
	}
	name := "models/" + strings.TrimPrefix(o.Model, "models/")
	b := make([]byte, 0, 64+48*len(e.Inputs))
	b = append(b, `{"requests":[`...)
	for i, s := range e.Inputs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"model":`...)
		b = appendString(b, name)
		b = append(b, `,"content":{"parts":[{"text":`...)
		b = appendString(b, s)
		b = append(b, `}]}`...)
		if e.TaskType != "" {
			b = append(b, `,"taskType":`...)
			b = appendString(b, e.TaskType)
		}
		if e.Title != "" {
			b = append(b, `,"title":`...)
			b = appendString(b, e.Title)
		}
		if dims > 0 {
			b = append(b, `,"outputDimensionality":`...)
			b = strconv.AppendInt(b, int64(dims), 10)
		}
		b = append(b, '}')
	}
	return append(b, `]}`...), nil
}

type embeddingIn struct {
	Values json.RawMessage `json:"values"`
}

// DecodeEmbedResponse decodes a batchEmbedContents answer ("embeddings")
// or an embedContent one ("embedding"). Gemini's API reports no token
// count for embeddings.
func DecodeEmbedResponse(body []byte) (*ir.EmbedResponse, error) {
	var in struct {
		Embedding  *embeddingIn  `json:"embedding"`
		Embeddings []embeddingIn `json:"embeddings"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, fmt.Errorf("gemini: embed response: %w", err)
	}
	list := in.Embeddings
	switch {
	case in.Embedding != nil:
		list = []embeddingIn{*in.Embedding}
	case in.Embeddings == nil:
		return nil, fmt.Errorf("gemini: embed response: neither embedding nor embeddings")
	}
	r := &ir.EmbedResponse{Vectors: make([][]float32, len(list))}
	for i, e := range list {
		v, err := rewrite.ParseFloat32Array(e.Values)
		if err != nil {
			return nil, fmt.Errorf("gemini: embed response: embedding %d: %w", i, err)
		}
		r.Vectors[i] = v
	}
	return r, nil
}

// EncodeEmbedResponse encodes an embeddings answer for a Gemini app: the
// embeddings list for batchEmbedContents, one embedding for embedContent.
func EncodeEmbedResponse(r *ir.EmbedResponse, req *ir.Request) ([]byte, error) {
	n := 0
	for _, v := range r.Vectors {
		n += len(v)
	}
	b := make([]byte, 0, 64+12*n)
	if !req.Embed.Batch {
		if len(r.Vectors) != 1 {
			return nil, fmt.Errorf("gemini: embed response: %d vectors for one content", len(r.Vectors))
		}
		b = append(b, `{"embedding":{"values":`...)
		b = rewrite.AppendFloat32Array(b, r.Vectors[0])
		return append(b, `}}`...), nil
	}
	b = append(b, `{"embeddings":[`...)
	for i, v := range r.Vectors {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"values":`...)
		b = rewrite.AppendFloat32Array(b, v)
		b = append(b, '}')
	}
	return append(b, `]}`...), nil
}
