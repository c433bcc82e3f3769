package rewrite

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"testing"
)

const (
	openaiPath       = "/v1/chat/completions"
	anthropicPath    = "/v1/messages"
	geminiPath       = "/v1beta/models/gemini-2.5-flash:generateContent"
	geminiStreamPath = "/v1beta/models/gemini-2.5-flash:streamGenerateContent"
)

// baseOpenAI is an OpenAI chat request as an SDK might send it.
const baseOpenAI = `{"model":"gpt-4o","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Weather in Paris?"}],"temperature":0.2,"max_tokens":100,"stream":false}`

func mustKey(t *testing.T, shape Shape, path, body string) [32]byte {
	t.Helper()
	k, _, _, err := CacheKey(shape, path, []byte(body))
	if err != nil {
		t.Fatalf("CacheKey(%s, %s, %s): %v", shape, path, body, err)
	}
	return k
}

// TestCacheKeyIgnoresSpellingAndStreaming: requests an upstream cannot tell
// apart, or that differ only in how the answer is delivered, share a key.
func TestCacheKeyIgnoresSpellingAndStreaming(t *testing.T) {
	tests := []struct {
		name         string
		shape        Shape
		path1, body1 string
		path2, body2 string
	}{
		{"reordered keys", OpenAI,
			openaiPath, baseOpenAI,
			openaiPath, `{"stream":false,"max_tokens":100,"temperature":0.2,"messages":[{"content":"Be brief.","role":"system"},{"content":"Weather in Paris?","role":"user"}],"model":"gpt-4o"}`},
		{"whitespace", OpenAI,
			openaiPath, baseOpenAI,
			openaiPath, "{\n  \"model\": \"gpt-4o\",\n  \"messages\": [ {\"role\": \"system\", \"content\": \"Be brief.\"},\n\t{\"role\": \"user\", \"content\": \"Weather in Paris?\"} ],\n  \"temperature\": 0.2, \"max_tokens\": 100, \"stream\": false }\r\n"},
		{"stream true", OpenAI,
			openaiPath, baseOpenAI,
			openaiPath, `{"model":"gpt-4o","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Weather in Paris?"}],"temperature":0.2,"max_tokens":100,"stream":true,"stream_options":{"include_usage":true}}`},
		{"stream absent", OpenAI,
			openaiPath, baseOpenAI,
			openaiPath, `{"model":"gpt-4o","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Weather in Paris?"}],"temperature":0.2,"max_tokens":100}`},
		{"stream_options without usage", OpenAI,
			openaiPath, `{"model":"gpt-4o","messages":[],"stream":true,"stream_options":{"include_usage":false}}`,
			openaiPath, `{"model":"gpt-4o","messages":[]}`},
		{"string escapes", OpenAI,
			openaiPath, `{"model":"gpt-4o","messages":[{"role":"user","content":"<b>é</b>"}]}`,
			openaiPath, `{"model":"gpt-4o","messages":[{"role":"user","content":"\u003cb\u003e\u00e9</b>"}]}`},
		{"duplicate key: the last wins", OpenAI,
			openaiPath, `{"model":"gpt-3.5","model":"gpt-4o","messages":[]}`,
			openaiPath, `{"model":"gpt-4o","messages":[]}`},
		{"anthropic stream", Anthropic,
			anthropicPath, `{"model":"claude-sonnet-4-5","max_tokens":1024,"messages":[{"role":"user","content":"Hi"}]}`,
			anthropicPath, `{"stream":true,"model":"claude-sonnet-4-5","max_tokens":1024,"messages":[{"role":"user","content":"Hi"}]}`},
		{"gemini stream path", Gemini,
			geminiPath, `{"contents":[{"role":"user","parts":[{"text":"Hi"}]}]}`,
			geminiStreamPath, `{"contents":[{"parts":[{"text":"Hi"}],"role":"user"}]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k1 := mustKey(t, tt.shape, tt.path1, tt.body1)
			k2 := mustKey(t, tt.shape, tt.path2, tt.body2)
			if k1 != k2 {
				t.Errorf("keys differ:\n%s %s\n%s %s", tt.path1, tt.body1, tt.path2, tt.body2)
			}
		})
	}
}

// TestCacheKeyTellsRequestsApart: anything that may change the answer
// changes the key.
func TestCacheKeyTellsRequestsApart(t *testing.T) {
	base := mustKey(t, OpenAI, openaiPath, baseOpenAI)
	tests := []struct {
		name  string
		shape Shape
		path  string
		body  string
	}{
		{"message", OpenAI, openaiPath, `{"model":"gpt-4o","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Weather in Rome?"}],"temperature":0.2,"max_tokens":100,"stream":false}`},
		{"model", OpenAI, openaiPath, `{"model":"gpt-4o-mini","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Weather in Paris?"}],"temperature":0.2,"max_tokens":100,"stream":false}`},
		{"temperature", OpenAI, openaiPath, `{"model":"gpt-4o","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Weather in Paris?"}],"temperature":0.3,"max_tokens":100,"stream":false}`},
		{"number spelling", OpenAI, openaiPath, `{"model":"gpt-4o","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Weather in Paris?"}],"temperature":0.20,"max_tokens":100,"stream":false}`},
		{"message order", OpenAI, openaiPath, `{"model":"gpt-4o","messages":[{"role":"user","content":"Weather in Paris?"},{"role":"system","content":"Be brief."}],"temperature":0.2,"max_tokens":100,"stream":false}`},
		{"added field", OpenAI, openaiPath, `{"model":"gpt-4o","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Weather in Paris?"}],"temperature":0.2,"max_tokens":100,"stream":false,"seed":1}`},
		{"nested stream is content", OpenAI, openaiPath, `{"model":"gpt-4o","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Weather in Paris?","stream":true}],"temperature":0.2,"max_tokens":100,"stream":false}`},
		{"path", OpenAI, "/v1/completions", baseOpenAI},
		{"shape", Anthropic, openaiPath, baseOpenAI},
	}
	seen := map[[32]byte]string{base: "base"}
	for _, tt := range tests {
		k := mustKey(t, tt.shape, tt.path, tt.body)
		if prev, ok := seen[k]; ok {
			t.Errorf("%s: same key as %s", tt.name, prev)
		}
		seen[k] = tt.name
	}

	// Gemini names the model in the path.
	g := `{"contents":[{"role":"user","parts":[{"text":"Hi"}]}]}`
	if mustKey(t, Gemini, geminiPath, g) == mustKey(t, Gemini, "/v1beta/models/gemini-2.5-pro:generateContent", g) {
		t.Error("gemini: another model in the path gives the same key")
	}
}

func TestCacheKeyTemperature(t *testing.T) {
	tests := []struct {
		name  string
		shape Shape
		body  string
		want  float64
		has   bool
	}{
		{"openai", OpenAI, baseOpenAI, 0.2, true},
		{"openai zero", OpenAI, `{"model":"m","temperature":0}`, 0, true},
		{"openai absent", OpenAI, `{"model":"m"}`, 0, false},
		{"openai null", OpenAI, `{"model":"m","temperature":null}`, 0, false},
		{"openai string", OpenAI, `{"model":"m","temperature":"0.5"}`, 0, false},
		{"openai out of range", OpenAI, `{"model":"m","temperature":1e400}`, 0, false},
		{"anthropic", Anthropic, `{"model":"m","max_tokens":5,"temperature":1}`, 1, true},
		{"anthropic nested is not it", Anthropic, `{"model":"m","generationConfig":{"temperature":0.5}}`, 0, false},
		{"gemini", Gemini, `{"contents":[],"generationConfig":{"temperature":0.7,"topP":0.9}}`, 0.7, true},
		{"gemini snake case", Gemini, `{"contents":[],"generation_config":{"temperature":1.5}}`, 1.5, true},
		{"gemini top level is not it", Gemini, `{"contents":[],"temperature":0.5}`, 0, false},
		{"gemini config not an object", Gemini, `{"contents":[],"generationConfig":[1]}`, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, got, has, err := CacheKey(tt.shape, "/p", []byte(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want || has != tt.has {
				t.Errorf("temperature %v, %v; want %v, %v", got, has, tt.want, tt.has)
			}
		})
	}
}

func TestCacheKeyErrors(t *testing.T) {
	for _, body := range []string{``, ` `, `{`, `{"a":1}x`, `{"a":1}{"b":2}`, `[]`, `null`, `"s"`, `1`, `{"a":tru}`} {
		if _, _, _, err := CacheKey(OpenAI, openaiPath, []byte(body)); err == nil {
			t.Errorf("CacheKey(%q): no error", body)
		}
	}
	if _, _, _, err := CacheKey("cohere", "/x", []byte(`{}`)); err == nil {
		t.Error("unknown shape: no error")
	}
}

// TestCacheKeyLengthPrefixed: the path's end and the body's start cannot
// trade bytes.
func TestCacheKeyLengthPrefixed(t *testing.T) {
	if mustKey(t, OpenAI, "/a", `{}`) == mustKey(t, OpenAI, "/a{}", `{}`) {
		t.Error("keys collide")
	}
}

// FuzzCacheKey: re-encoding a JSON object (indenting, compacting, or
// decoding and marshalling it again with its numbers kept) never changes
// its key.
func FuzzCacheKey(f *testing.F) {
	for _, s := range cacheKeySeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, shape := range Shapes {
			k, temp, has, err := CacheKey(shape, geminiStreamPath, body)
			if err != nil {
				return
			}
			var v any
			dec := json.NewDecoder(bytes.NewReader(body))
			dec.UseNumber()
			if err := dec.Decode(&v); err != nil {
				t.Fatalf("CacheKey took a body encoding/json refuses: %v", err)
			}
			again, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			var indented, compact bytes.Buffer
			if err := json.Indent(&indented, body, "", "\t"); err != nil {
				t.Fatal(err)
			}
			if err := json.Compact(&compact, body); err != nil {
				t.Fatal(err)
			}
			for _, re := range [][]byte{again, indented.Bytes(), compact.Bytes()} {
				k2, temp2, has2, err := CacheKey(shape, geminiStreamPath, re)
				if err != nil {
					t.Fatalf("re-encoded %q: %v", re, err)
				}
				if k2 != k || has2 != has || (has && temp2 != temp) {
					t.Fatalf("%s: key or temperature changed by re-encoding\n%q\n%q", shape, body, re)
				}
			}
		}
	})
}

// referenceCanonical is the canonical form CacheKey documents, made the
// plain way: decode with UseNumber into map[string]any, drop the streaming
// members, encode again. The scanner must write exactly this.
func referenceCanonical(shape Shape, body []byte) (canon []byte, temperature float64, has bool, err error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, 0, false, err
	}
	if m == nil {
		return nil, 0, false, errors.New("null")
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, 0, false, errors.New("data after the object")
	}
	delete(m, "stream")
	delete(m, "stream_options")
	var v any = m["temperature"]
	if shape == Gemini {
		cfg, ok := m["generationConfig"].(map[string]any)
		if !ok {
			cfg, _ = m["generation_config"].(map[string]any)
		}
		v = cfg["temperature"]
	}
	if n, ok := v.(json.Number); ok {
		if f, err := n.Float64(); err == nil {
			temperature, has = f, true
		}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(m); err != nil {
		return nil, 0, false, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), temperature, has, nil
}

// scannerCanonical is what CacheKey hashes after its header.
func scannerCanonical(shape Shape, body []byte) ([]byte, float64, bool, error) {
	c := new(canonicalizer)
	if err := c.canonicalize(body); err != nil {
		return nil, 0, false, err
	}
	t, has := c.temperature(shape)
	return c.out, t, has, nil
}

// TestCanonicalMatchesEncodingJSON pins the cases where a hand-written
// canonical form could drift from encoding/json's.
func TestCanonicalMatchesEncodingJSON(t *testing.T) {
	bodies := []string{
		baseOpenAI,
		`{}`,
		` { "b" : [ 1 , 2.50 , -0 , 1E+2 , true , false , null , { } , [ ] ] , "a" : { "y" : 1 , "x" : 2 } } `,
		`{"dup":1,"a":0,"dup":{"z":1,"a":2},"dup2":[],"dup2":"last"}`,
		`{"\u0062":1,"a":2,"\u0061":3}`,
		`{"s":"quote \" backslash \\ slash \/ ctl \b\f\n\r\t \u0001 \u001f <>& \u003c"}`,
		`{"s":"line\u2028para\u2029 raw    é \u00e9 😀 \ud83d\ude00"}`,
		"{\"s\":\"bad \xff\xfe utf8 \xe2\x80\",\"\xc3\":1}",
		`{"s":"lone \ud800 high, lone \udc00 low, high then text \ud800x, two highs \ud800\ud800, reversed \udc00\ud800"}`,
		`{"stream":true,"stream_options":{"include_usage":true},"z":1,"stream":false}`,
		`{"z":{"stream":true},"a":1}`,
		`{"temperature":0.5,"temperature":0.7}`,
		`{"generationConfig":null,"generation_config":{"temperature":1}}`,
		`{"generationConfig":{"temperature":"x"},"generation_config":{"temperature":1}}`,
		`{"generationConfig":{"temp\u0065rature":0.25}}`,
	}
	for _, body := range bodies {
		for _, shape := range Shapes {
			want, wt, wh, werr := referenceCanonical(shape, []byte(body))
			got, gt, gh, gerr := scannerCanonical(shape, []byte(body))
			if werr != nil || gerr != nil {
				t.Fatalf("%s %q: reference %v, scanner %v", shape, body, werr, gerr)
			}
			if !bytes.Equal(got, want) || gt != wt || gh != wh {
				t.Errorf("%s %q:\n got %s (%v %v)\nwant %s (%v %v)", shape, body, got, gt, gh, want, wt, wh)
			}
		}
	}
}

// FuzzCacheKeyMatchesEncodingJSON: the scanner accepts exactly the bodies
// encoding/json accepts as one object, and writes exactly its canonical
// form and temperature.
func FuzzCacheKeyMatchesEncodingJSON(f *testing.F) {
	for _, s := range cacheKeySeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, shape := range Shapes {
			want, wt, wh, werr := referenceCanonical(shape, body)
			got, gt, gh, gerr := scannerCanonical(shape, body)
			if (werr == nil) != (gerr == nil) {
				t.Fatalf("%q: encoding/json says %v, the scanner %v", body, werr, gerr)
			}
			if werr != nil {
				return
			}
			if !bytes.Equal(got, want) || gt != wt || gh != wh {
				t.Fatalf("%s %q:\n got %s (%v %v)\nwant %s (%v %v)", shape, body, got, gt, gh, want, wt, wh)
			}
		}
	})
}

func cacheKeySeeds() [][]byte {
	return [][]byte{
		[]byte(baseOpenAI),
		[]byte(`{"contents":[{"role":"user","parts":[{"text":"Hi \u00e9 <x>"}]}],"generationConfig":{"temperature":0.7}}`),
		[]byte(`{"a":{"z":1,"b":[1.50,2e3,-0]},"a":"dup","stream":true}`),
		[]byte(`{"k":"\ud800 bad surrogate","n":123456789012345678901234567890}`),
		[]byte("{\"\xff\":\"\xfe\u2028\"}"),
		chatBody(2 << 10),
	}
}

func BenchmarkCacheKey(b *testing.B) {
	body := chatBody(10 << 10)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, _, err := CacheKey(OpenAI, openaiPath, body); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCacheKeyEncodingJSON is the plain way, for comparison.
func BenchmarkCacheKeyEncodingJSON(b *testing.B) {
	body := chatBody(10 << 10)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, _, err := referenceCanonical(OpenAI, body); err != nil {
			b.Fatal(err)
		}
	}
}
