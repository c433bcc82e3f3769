package fakevendor

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"hash/fnv"
	"math"
	"strconv"
	"strings"

	"github.com/detour-proxy/detour/rewrite"
)

// DefaultEmbedDimensions is the vector size of the fake's embeddings when
// the request asks for none: small, so that tests can compare whole
// vectors, where a real model's default is 768 to 3072.
const DefaultEmbedDimensions = 8

// embedCall is what an embeddings request asked for.
type embedCall struct {
	// batch: Gemini batchEmbedContents (answered "embeddings"), not
	// embedContent ("embedding").
	batch bool
	// inputs are the texts, one vector each.
	inputs []string
	dims   int
	base64 bool
}

// EmbedVector is the fake's embedding of text with dims values: a
// deterministic function of both, so a test can check that the vector an
// app received through detour is the one the fake sent.
func EmbedVector(text string, dims int) []float32 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(text))
	seed := h.Sum64()
	v := make([]float32, dims)
	for i := range v {
		seed = seed*6364136223846793005 + 1442695040888963407
		// Values in (-1, 1) with a few significant digits, like a
		// normalised vector's.
		v[i] = float32(int64(seed>>40)%20000-10000) / 10000
	}
	return v
}

// routeEmbed recognises an embeddings endpoint: OpenAI's /embeddings under
// any prefix, Gemini's embedContent and batchEmbedContents methods.
func routeEmbed(shape rewrite.Shape, path, method string, c *call) bool {
	switch shape {
	case rewrite.OpenAI:
		if strings.HasSuffix(path, "/embeddings") {
			c.embed = &embedCall{}
			return true
		}
	case rewrite.Gemini:
		if method == "embedContent" || method == "batchEmbedContents" {
			c.embed = &embedCall{batch: method == "batchEmbedContents"}
			return true
		}
	}
	return false
}

// parseEmbed reads an embeddings body. It is as strict as the vendors
// about what the fake needs: OpenAI wants model and input, Gemini wants
// each content's parts.
func (v *Vendor) parseEmbed(body []byte, c *call) bool {
	e := c.embed
	if v.shape == rewrite.OpenAI {
		var req struct {
			Model          string          `json:"model"`
			Input          json.RawMessage `json:"input"`
			Dimensions     int             `json:"dimensions"`
			EncodingFormat string          `json:"encoding_format"`
		}
		if json.Unmarshal(body, &req) != nil || req.Model == "" || isAbsent(req.Input) {
			return false
		}
		c.model, e.dims, e.base64 = req.Model, req.Dimensions, req.EncodingFormat == "base64"
		var one string
		if json.Unmarshal(req.Input, &one) == nil {
			e.inputs = []string{one}
		} else if json.Unmarshal(req.Input, &e.inputs) != nil || len(e.inputs) == 0 {
			return false
		}
	} else {
		type content struct {
			Model   string `json:"model"`
			Content struct {
				Parts []struct {
					Text string `json:"text"`
				} `json:"parts"`
			} `json:"content"`
			OutputDimensionality int `json:"outputDimensionality"`
		}
		var reqs []content
		if e.batch {
			var req struct {
				Requests []content `json:"requests"`
			}
			if json.Unmarshal(body, &req) != nil || len(req.Requests) == 0 {
				return false
			}
			reqs = req.Requests
		} else {
			var one content
			if json.Unmarshal(body, &one) != nil {
				return false
			}
			reqs = []content{one}
		}
		for _, r := range reqs {
			if len(r.Content.Parts) == 0 {
				return false
			}
			texts := make([]string, len(r.Content.Parts))
			for i, p := range r.Content.Parts {
				texts[i] = p.Text
			}
			e.inputs = append(e.inputs, strings.Join(texts, "\n"))
			e.dims = r.OutputDimensionality
		}
	}
	if e.dims <= 0 {
		e.dims = DefaultEmbedDimensions
	}
	return true
}

// embedBody is the successful answer to an embeddings request, in the
// vendor's exact shape.
func (v *Vendor) embedBody(c call) []byte {
	e := c.embed
	var b []byte
	if v.shape == rewrite.Gemini {
		if !e.batch {
			b = append(b, `{"embedding":{"values":`...)
			b = rewrite.AppendFloat32Array(b, EmbedVector(e.inputs[0], e.dims))
			return append(b, "}}\n"...)
		}
		b = append(b, `{"embeddings":[`...)
		for i, in := range e.inputs {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"values":`...)
			b = rewrite.AppendFloat32Array(b, EmbedVector(in, e.dims))
			b = append(b, '}')
		}
		return append(b, "]}\n"...)
	}
	tokens := 0
	b = append(b, `{"object":"list","data":[`...)
	for i, in := range e.inputs {
		tokens += max(len(in)/4, 1)
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"object":"embedding","index":`...)
		b = strconv.AppendInt(b, int64(i), 10)
		b = append(b, `,"embedding":`...)
		vec := EmbedVector(in, e.dims)
		if e.base64 {
			raw := make([]byte, 4*len(vec))
			for j, f := range vec {
				binary.LittleEndian.PutUint32(raw[4*j:], math.Float32bits(f))
			}
			b = append(b, '"')
			b = base64.StdEncoding.AppendEncode(b, raw)
			b = append(b, '"')
		} else {
			b = rewrite.AppendFloat32Array(b, vec)
		}
		b = append(b, '}')
	}
	b = append(b, `],"model":`...)
	b = rewrite.AppendJSONString(b, c.model)
	b = append(b, `,"usage":{"prompt_tokens":`...)
	b = strconv.AppendInt(b, int64(tokens), 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, int64(tokens), 10)
	return append(b, "}}\n"...)
}
