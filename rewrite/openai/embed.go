package openai

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"strconv"

	"github.com/detour-proxy/detour/rewrite"
	"github.com/detour-proxy/detour/rewrite/ir"
)

// embedRequestIn is the body of POST /v1/embeddings. Input is a string, an
// array of strings, or token ids (an array of ints, or of arrays of ints).
type embedRequestIn struct {
	Model          string          `json:"model"`
	Input          json.RawMessage `json:"input"`
	Dimensions     int             `json:"dimensions"`
	EncodingFormat string          `json:"encoding_format"`
}

// DecodeEmbedRequest decodes an app's /v1/embeddings body. Token-id input
// has no meaning to another vendor's tokenizer, so it is an
// *ir.UnsupportedError: such a request stays on OpenAI-shaped upstreams.
func DecodeEmbedRequest(body []byte) (*ir.Request, error) {
	if err := expectObject(body); err != nil {
		return nil, fmt.Errorf("openai: embeddings request: %w", err)
	}
	var in embedRequestIn
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, fmt.Errorf("openai: embeddings request: %w", err)
	}
	e := &ir.EmbedRequest{Dimensions: in.Dimensions}
	switch in.EncodingFormat {
	case "", "float":
	case "base64":
		e.Base64 = true
	default:
		return nil, fmt.Errorf("openai: embeddings request: encoding_format %q is not float or base64", in.EncodingFormat)
	}
	if in.Dimensions < 0 {
		return nil, fmt.Errorf("openai: embeddings request: dimensions %d is negative", in.Dimensions)
	}
	in.Input = bytes.TrimSpace(in.Input)
	switch {
	case len(in.Input) == 0 || string(in.Input) == "null":
		return nil, fmt.Errorf("openai: embeddings request: input is required")
	case in.Input[0] == '"':
		var s string
		if err := json.Unmarshal(in.Input, &s); err != nil {
			return nil, fmt.Errorf("openai: embeddings request: input: %w", err)
		}
		e.Inputs = []string{s}
	case in.Input[0] == '[':
		var items []json.RawMessage
		if err := json.Unmarshal(in.Input, &items); err != nil {
			return nil, fmt.Errorf("openai: embeddings request: input: %w", err)
		}
		if len(items) == 0 {
			return nil, fmt.Errorf("openai: embeddings request: input is an empty array")
		}
		e.Inputs = make([]string, len(items))
		for i, it := range items {
			if len(it) == 0 || it[0] != '"' {
				return nil, &ir.UnsupportedError{What: "token-id embeddings input (only text input is translated)"}
			}
			if err := json.Unmarshal(it, &e.Inputs[i]); err != nil {
				return nil, fmt.Errorf("openai: embeddings request: input[%d]: %w", i, err)
			}
		}
	default:
		return nil, fmt.Errorf("openai: embeddings request: input must be a string or an array")
	}
	return &ir.Request{Model: in.Model, Embed: e}, nil
}

// EncodeEmbedRequest encodes an embeddings request for an OpenAI-shaped
// upstream. Vectors are asked for as JSON floats: every OpenAI-compatible
// server speaks that, while base64 is an OpenAI extension some do not.
func EncodeEmbedRequest(r *ir.Request, o ir.EncodeOptions) ([]byte, error) {
	e := r.Embed
	dims := e.Dimensions
	if dims == 0 {
		dims = o.EmbedDimensions
	}
	if e.TaskType != "" && o.Notes != nil {
		o.Notes("embeddings taskType " + e.TaskType + " dropped: OpenAI has no task types")
	}
	if e.Title != "" && o.Notes != nil {
		o.Notes("embeddings title dropped: OpenAI has no document titles")
	}
	b := make([]byte, 0, 64+16*len(e.Inputs))
	b = append(b, `{"model":`...)
	b = appendString(b, o.Model)
	b = append(b, `,"input":[`...)
	for i, s := range e.Inputs {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, s)
	}
	b = append(b, ']')
	if dims > 0 {
		b = append(b, `,"dimensions":`...)
		b = strconv.AppendInt(b, int64(dims), 10)
	}
	b = append(b, `,"encoding_format":"float"}`...)
	return b, nil
}

type embedResponseIn struct {
	Model string `json:"model"`
	Data  []struct {
		Index     int             `json:"index"`
		Embedding json.RawMessage `json:"embedding"`
	} `json:"data"`
	Usage struct {
		PromptTokens int64 `json:"prompt_tokens"`
	} `json:"usage"`
}

// DecodeEmbedResponse decodes an OpenAI-shaped embeddings answer. Each
// vector may be a JSON array or, from a server that answers base64
// anyway, a base64 string of little-endian float32s. Vectors are put in
// index order, whatever order data lists them in.
func DecodeEmbedResponse(body []byte) (*ir.EmbedResponse, error) {
	var in embedResponseIn
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, fmt.Errorf("openai: embeddings response: %w", err)
	}
	r := &ir.EmbedResponse{Model: in.Model, InputTokens: in.Usage.PromptTokens, Vectors: make([][]float32, len(in.Data))}
	for _, d := range in.Data {
		if d.Index < 0 || d.Index >= len(in.Data) || r.Vectors[d.Index] != nil {
			return nil, fmt.Errorf("openai: embeddings response: index %d out of order", d.Index)
		}
		v, err := decodeVector(d.Embedding)
		if err != nil {
			return nil, fmt.Errorf("openai: embeddings response: data[%d]: %w", d.Index, err)
		}
		r.Vectors[d.Index] = v
	}
	return r, nil
}

func decodeVector(raw json.RawMessage) ([]float32, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, err
		}
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil || len(b)%4 != 0 {
			return nil, fmt.Errorf("embedding is not base64 float32s")
		}
		v := make([]float32, len(b)/4)
		for i := range v {
			v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
		return v, nil
	}
	return rewrite.ParseFloat32Array(raw)
}

// EncodeEmbedResponse encodes an embeddings answer for an OpenAI app,
// echoing the app's model. Vectors are base64 when the app asked for it
// (the Python SDK asks by default); usage counts what the upstream
// reported, 0 when it reports nothing (Gemini).
func EncodeEmbedResponse(r *ir.EmbedResponse, req *ir.Request) []byte {
	n := 0
	for _, v := range r.Vectors {
		n += len(v)
	}
	b := make([]byte, 0, 128+12*n)
	b = append(b, `{"object":"list","data":[`...)
	for i, v := range r.Vectors {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"object":"embedding","index":`...)
		b = strconv.AppendInt(b, int64(i), 10)
		b = append(b, `,"embedding":`...)
		if req.Embed.Base64 {
			b = appendBase64Vector(b, v)
		} else {
			b = rewrite.AppendFloat32Array(b, v)
		}
		b = append(b, '}')
	}
	b = append(b, `],"model":`...)
	b = appendString(b, req.Model)
	b = append(b, `,"usage":{"prompt_tokens":`...)
	b = strconv.AppendInt(b, r.InputTokens, 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, r.InputTokens, 10)
	b = append(b, `}}`...)
	return b
}

func appendBase64Vector(b []byte, v []float32) []byte {
	raw := make([]byte, 4*len(v))
	for i, f := range v {
		binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(f))
	}
	b = append(b, '"')
	b = base64.StdEncoding.AppendEncode(b, raw)
	return append(b, '"')
}
