package translate

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/detour-proxy/detour/rewrite"
	"github.com/detour-proxy/detour/rewrite/ir"
)

func TestEmbedEndpoint(t *testing.T) {
	for _, tt := range []struct {
		app       rewrite.Shape
		path      string
		ok, batch bool
	}{
		{rewrite.OpenAI, "/embeddings", true, false},
		{rewrite.OpenAI, "/chat/completions", false, false},
		{rewrite.Gemini, "/v1beta/models/gemini-embedding-001:embedContent", true, false},
		{rewrite.Gemini, "/v1beta/models/gemini-embedding-001:batchEmbedContents", true, true},
		{rewrite.Gemini, "/v1beta/models/gemini-2.5-flash:generateContent", false, false},
		{rewrite.Anthropic, "/v1/embeddings", false, false},
	} {
		ok, batch := EmbedEndpoint(tt.app, tt.path)
		if ok != tt.ok || batch != tt.batch {
			t.Errorf("EmbedEndpoint(%s, %s) = %v, %v; want %v, %v", tt.app, tt.path, ok, batch, tt.ok, tt.batch)
		}
	}
}

func TestEmbedRequestOpenAIToGemini(t *testing.T) {
	req, err := DecodeRequest(rewrite.OpenAI, []byte(`{"model":"text-embedding-3-small","input":["a cat","a \"dog\""],"dimensions":256,"encoding_format":"base64","user":"u1"}`), "/embeddings")
	if err != nil {
		t.Fatal(err)
	}
	want := &ir.EmbedRequest{Inputs: []string{"a cat", `a "dog"`}, Dimensions: 256, Base64: true}
	if req.Model != "text-embedding-3-small" || !reflect.DeepEqual(req.Embed, want) {
		t.Fatalf("decoded %q %+v; want %+v", req.Model, req.Embed, want)
	}
	up, err := EncodeRequest(req, rewrite.Gemini, ir.EncodeOptions{Model: "gemini-embedding-001"})
	if err != nil {
		t.Fatal(err)
	}
	if up.Path != "/v1beta/models/gemini-embedding-001:batchEmbedContents" || up.RawQuery != "" {
		t.Errorf("path %q query %q", up.Path, up.RawQuery)
	}
	const body = `{"requests":[{"model":"models/gemini-embedding-001","content":{"parts":[{"text":"a cat"}]},"outputDimensionality":256},{"model":"models/gemini-embedding-001","content":{"parts":[{"text":"a \"dog\""}]},"outputDimensionality":256}]}`
	if string(up.Body) != body {
		t.Errorf("body\n got %s\nwant %s", up.Body, body)
	}
}

func TestEmbedRequestGeminiToOpenAI(t *testing.T) {
	var notes []string
	opts := ir.EncodeOptions{Model: "text-embedding-3-large", EmbedDimensions: 3072, Notes: func(n string) { notes = append(notes, n) }}

	// embedContent: one content, its text parts joined; the upstream's
	// declared size asked for because the app named none.
	req, err := DecodeRequest(rewrite.Gemini, []byte(`{"model":"models/gemini-embedding-001","content":{"parts":[{"text":"first"},{"text":"second"}]},"taskType":"RETRIEVAL_QUERY"}`), "/v1beta/models/gemini-embedding-001:embedContent")
	if err != nil {
		t.Fatal(err)
	}
	up, err := EncodeRequest(req, rewrite.OpenAI, opts)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"model":"text-embedding-3-large","input":["first\nsecond"],"dimensions":3072,"encoding_format":"float"}`; string(up.Body) != want || up.Path != "/embeddings" {
		t.Errorf("got %s %s; want /embeddings %s", up.Path, up.Body, want)
	}
	if len(notes) != 1 || !strings.Contains(notes[0], "RETRIEVAL_QUERY") {
		t.Errorf("notes = %q; want the dropped task type", notes)
	}

	// batchEmbedContents: one input per request; the app's own size wins.
	req, err = DecodeRequest(rewrite.Gemini, []byte(`{"requests":[{"model":"models/m","content":{"parts":[{"text":"x"}]},"outputDimensionality":64},{"model":"models/m","content":{"parts":[{"text":"y"}]},"outputDimensionality":64}]}`), "/v1beta/models/m:batchEmbedContents")
	if err != nil {
		t.Fatal(err)
	}
	if !req.Embed.Batch || !reflect.DeepEqual(req.Embed.Inputs, []string{"x", "y"}) {
		t.Fatalf("decoded %+v", req.Embed)
	}
	up, _ = EncodeRequest(req, rewrite.OpenAI, opts)
	if want := `{"model":"text-embedding-3-large","input":["x","y"],"dimensions":64,"encoding_format":"float"}`; string(up.Body) != want {
		t.Errorf("got %s; want %s", up.Body, want)
	}
}

func TestEmbedRequestsOtherShapesCannotTake(t *testing.T) {
	var un *ir.UnsupportedError
	for _, tt := range []struct {
		name, body, path string
		app              rewrite.Shape
	}{
		{"token ids", `{"model":"m","input":[[1,2,3]]}`, "/embeddings", rewrite.OpenAI},
		{"flat token ids", `{"model":"m","input":[1,2,3]}`, "/embeddings", rewrite.OpenAI},
		{"image part", `{"content":{"parts":[{"inlineData":{"mimeType":"image/png","data":"AA=="}}]}}`, "/v1beta/models/m:embedContent", rewrite.Gemini},
		{"mixed sizes", `{"requests":[{"content":{"parts":[{"text":"a"}]},"outputDimensionality":8},{"content":{"parts":[{"text":"b"}]}}]}`, "/v1beta/models/m:batchEmbedContents", rewrite.Gemini},
	} {
		if _, err := DecodeRequest(tt.app, []byte(tt.body), tt.path); !errors.As(err, &un) {
			t.Errorf("%s: err = %v; want *ir.UnsupportedError", tt.name, err)
		}
	}
	req, _ := DecodeRequest(rewrite.OpenAI, []byte(`{"model":"m","input":"hi"}`), "/embeddings")
	if _, err := EncodeRequest(req, rewrite.Anthropic, ir.EncodeOptions{Model: "claude"}); !errors.As(err, &un) {
		t.Errorf("towards Anthropic: err = %v; want *ir.UnsupportedError", err)
	}
	for _, body := range []string{`{"model":"m"}`, `{"model":"m","input":[]}`, `{"model":"m","input":"x","encoding_format":"int8"}`, `{"model":"m","input":"x","dimensions":-1}`, `[]`} {
		if _, err := DecodeRequest(rewrite.OpenAI, []byte(body), "/embeddings"); err == nil || errors.As(err, &un) {
			t.Errorf("%s: err = %v; want a plain decode error (the app's request is malformed)", body, err)
		}
	}
}

func TestEmbedResponses(t *testing.T) {
	vec := [][]float32{{0.0123, -0.5, 1e-05}, {0.25, 0, -1}}
	gemini := `{"embeddings":[{"values":[0.0123,-0.5,1e-05]},{"values":[0.25,0,-1]}]}`
	openaiFloat := `{"object":"list","data":[{"object":"embedding","index":1,"embedding":[0.25,0,-1]},{"object":"embedding","index":0,"embedding":[0.0123,-0.5,1e-05]}],"model":"text-embedding-3-small","usage":{"prompt_tokens":5,"total_tokens":5}}`

	// Gemini's vectors to an OpenAI app, as floats and as base64.
	for _, b64 := range []bool{false, true} {
		req := &ir.Request{Model: "text-embedding-3-small", Embed: &ir.EmbedRequest{Inputs: []string{"a", "b"}, Base64: b64}}
		out, err := Response(req, rewrite.OpenAI, rewrite.Gemini, []byte(gemini))
		if err != nil {
			t.Fatal(err)
		}
		var got struct {
			Object string `json:"object"`
			Data   []struct {
				Object    string          `json:"object"`
				Index     int             `json:"index"`
				Embedding json.RawMessage `json:"embedding"`
			} `json:"data"`
			Model string `json:"model"`
			Usage struct {
				PromptTokens *int64 `json:"prompt_tokens"`
				TotalTokens  *int64 `json:"total_tokens"`
			} `json:"usage"`
		}
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("%s: %v", out, err)
		}
		if got.Object != "list" || got.Model != "text-embedding-3-small" || len(got.Data) != 2 || got.Usage.PromptTokens == nil {
			t.Fatalf("base64 %v: %s", b64, out)
		}
		for i, d := range got.Data {
			if d.Index != i || d.Object != "embedding" {
				t.Errorf("data[%d] = index %d object %q", i, d.Index, d.Object)
			}
			var v []float32
			if b64 {
				var s string
				_ = json.Unmarshal(d.Embedding, &s)
				raw, err := base64.StdEncoding.DecodeString(s)
				if err != nil {
					t.Fatalf("data[%d] not base64: %s", i, d.Embedding)
				}
				for j := 0; j+4 <= len(raw); j += 4 {
					v = append(v, math.Float32frombits(binary.LittleEndian.Uint32(raw[j:])))
				}
			} else if err := json.Unmarshal(d.Embedding, &v); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(v, vec[i]) {
				t.Errorf("base64 %v: vector %d = %v; want %v", b64, i, v, vec[i])
			}
		}
	}

	// OpenAI's vectors (listed out of order) to a Gemini app: batch and
	// single, digits kept as sent.
	req := &ir.Request{Model: "m", Embed: &ir.EmbedRequest{Inputs: []string{"a", "b"}, Batch: true}}
	out, err := Response(req, rewrite.Gemini, rewrite.OpenAI, []byte(openaiFloat))
	if err != nil || string(out) != gemini {
		t.Errorf("batch: %s, %v; want %s", out, err, gemini)
	}
	req = &ir.Request{Model: "m", Embed: &ir.EmbedRequest{Inputs: []string{"a"}}}
	one := `{"object":"list","data":[{"object":"embedding","index":0,"embedding":"` + b64floats(0.5, -2) + `"}],"model":"x","usage":{"prompt_tokens":1,"total_tokens":1}}`
	out, err = Response(req, rewrite.Gemini, rewrite.OpenAI, []byte(one))
	if want := `{"embedding":{"values":[0.5,-2]}}`; err != nil || string(out) != want {
		t.Errorf("single from base64: %s, %v; want %s", out, err, want)
	}

	// A count that does not match the inputs is an error, never a
	// misaligned list.
	req = &ir.Request{Model: "m", Embed: &ir.EmbedRequest{Inputs: []string{"a", "b", "c"}}}
	if _, err := Response(req, rewrite.OpenAI, rewrite.Gemini, []byte(gemini)); err == nil {
		t.Error("3 inputs, 2 vectors: no error")
	}
	for _, bad := range []string{`{"object":"list","data":[{"index":0,"embedding":[1]},{"index":0,"embedding":[2]}]}`, `{"data":[{"index":5,"embedding":[1]}]}`, `{"data":[{"index":0,"embedding":"!!"}]}`} {
		req = &ir.Request{Model: "m", Embed: &ir.EmbedRequest{Inputs: []string{"a", "b"}, Batch: true}}
		if _, err := Response(req, rewrite.Gemini, rewrite.OpenAI, []byte(bad)); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}

func b64floats(fs ...float32) string {
	raw := make([]byte, 4*len(fs))
	for i, f := range fs {
		binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(f))
	}
	return base64.StdEncoding.EncodeToString(raw)
}

// FuzzEmbedRequest fuzzes an app's embeddings body in either shape:
// whatever decodes must encode, for the other shape, into a body that
// shape's decoder reads back with the same inputs and size.
func FuzzEmbedRequest(f *testing.F) {
	f.Add([]byte(`{"model":"m","input":["a","b"],"dimensions":8}`), true)
	f.Add([]byte(`{"model":"m","input":"x\u0000y"}`), true)
	f.Add([]byte(`{"requests":[{"content":{"parts":[{"text":"a"},{"text":"b"}]}}]}`), false)
	f.Add([]byte(`{"content":{"parts":[{"text":"é"}]},"outputDimensionality":3}`), false)
	f.Fuzz(func(t *testing.T, body []byte, fromOpenAI bool) {
		app, up, path := rewrite.Gemini, rewrite.OpenAI, "/v1beta/models/m:batchEmbedContents"
		if fromOpenAI {
			app, up, path = rewrite.OpenAI, rewrite.Gemini, "/embeddings"
		}
		req, err := DecodeRequest(app, body, path)
		if err != nil {
			return
		}
		enc, err := EncodeRequest(req, up, ir.EncodeOptions{Model: "m2"})
		if err != nil {
			t.Fatalf("decoded %+v but cannot encode for %s: %v", req.Embed, up, err)
		}
		backPath := "/embeddings"
		if up == rewrite.Gemini {
			backPath = enc.Path
		}
		back, err := DecodeRequest(up, enc.Body, backPath)
		if err != nil {
			t.Fatalf("%s cannot read its own encoding %s: %v", up, enc.Body, err)
		}
		if !reflect.DeepEqual(back.Embed.Inputs, req.Embed.Inputs) || back.Embed.Dimensions != req.Embed.Dimensions {
			t.Fatalf("round trip changed the request: %+v → %s → %+v", req.Embed, enc.Body, back.Embed)
		}
	})
}

// BenchmarkEmbed/<pair> translates an embeddings request of 16 inputs and
// its answer of 16 vectors of 1536 floats (text-embedding-3-small's
// default size) — request and response separately; the same-shape fast
// path passes both through. Run with the pairs in bench_test.go.
func BenchmarkEmbed(b *testing.B) {
	inputs := make([]string, 16)
	for i := range inputs {
		inputs[i] = strings.Repeat("a sentence to embed, ", 5)
	}
	vectors := make([][]float32, len(inputs))
	for i := range vectors {
		vectors[i] = make([]float32, 1536)
		for j := range vectors[i] {
			vectors[i][j] = float32(j%200-100) / 1237
		}
	}
	openaiReq, _ := json.Marshal(map[string]any{"model": "text-embedding-3-small", "input": inputs})
	geminiReq := []byte(`{"requests":[`)
	geminiAnswer := []byte(`{"embeddings":[`)
	openaiAnswer := []byte(`{"object":"list","data":[`)
	for i, in := range inputs {
		if i > 0 {
			geminiReq, geminiAnswer, openaiAnswer = append(geminiReq, ','), append(geminiAnswer, ','), append(openaiAnswer, ',')
		}
		geminiReq = append(geminiReq, `{"model":"models/gemini-embedding-001","content":{"parts":[{"text":"`+in+`"}]}}`...)
		geminiAnswer = rewrite.AppendFloat32Array(append(geminiAnswer, `{"values":`...), vectors[i])
		geminiAnswer = append(geminiAnswer, '}')
		openaiAnswer = rewrite.AppendFloat32Array(append(openaiAnswer, `{"object":"embedding","index":`+strconv.Itoa(i)+`,"embedding":`...), vectors[i])
		openaiAnswer = append(openaiAnswer, '}')
	}
	geminiReq = append(geminiReq, "]}"...)
	geminiAnswer = append(geminiAnswer, "]}"...)
	openaiAnswer = append(openaiAnswer, `],"model":"text-embedding-3-small","usage":{"prompt_tokens":400,"total_tokens":400}}`...)

	for _, p := range []struct {
		app, up      rewrite.Shape
		path         string
		body, answer []byte
	}{
		{rewrite.OpenAI, rewrite.Gemini, "/embeddings", openaiReq, geminiAnswer},
		{rewrite.Gemini, rewrite.OpenAI, "/v1beta/models/gemini-embedding-001:batchEmbedContents", geminiReq, openaiAnswer},
	} {
		name := string(p.app) + "_" + string(p.up)
		b.Run(name+"/request", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				req, err := DecodeRequest(p.app, p.body, p.path)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := EncodeRequest(req, p.up, ir.EncodeOptions{Model: "m"}); err != nil {
					b.Fatal(err)
				}
			}
		})
		req, _ := DecodeRequest(p.app, p.body, p.path)
		b.Run(name+"/response", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(p.answer)))
			for b.Loop() {
				if _, err := Response(req, p.app, p.up, p.answer); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
