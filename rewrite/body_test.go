package rewrite

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/detour-proxy/detour/rewrite/internal/jsonscan"
)

func TestPeekRequest(t *testing.T) {
	tests := []struct {
		body string
		want RequestFacts
	}{
		{`{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}],"stream":true}`, RequestFacts{"gpt-4o", true}},
		{`{"messages":[{"role":"user","content":"{\"model\":\"x\",\"stream\":true}"}],"model":"claude-sonnet-4-5","max_tokens":10}`, RequestFacts{"claude-sonnet-4-5", false}},
		{` { "stream" : false , "model" : "m" } `, RequestFacts{"m", false}},
		{`{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`, RequestFacts{}},
		{`{"model":null,"stream":null}`, RequestFacts{}},
		{`{"model":"gpt-\u00e9\ud83d\ude00\"q\"","stream":true}`, RequestFacts{"gpt-é😀\"q\"", true}},
		{`{"mod\u0065l":"escaped-key","str\u0065am":true}`, RequestFacts{"escaped-key", true}},
		{`{"model":"first","model":"last"}`, RequestFacts{"last", false}},
		{`{"model":1,"model":"last wins, like encoding/json"}`, RequestFacts{"last wins, like encoding/json", false}},
		{`{"Model":"case matters","metadata":{"model":"nested","stream":true}}`, RequestFacts{}},
		{`{}`, RequestFacts{}},
		{"{\"model\":\"m\"}\n", RequestFacts{"m", false}},
		{"{\"model\":\"bad\xffutf8\"}", RequestFacts{"bad\ufffdutf8", false}}, // as encoding/json reads it
	}
	for _, tt := range tests {
		got, err := PeekRequest([]byte(tt.body))
		if err != nil || got != tt.want {
			t.Errorf("PeekRequest(%s) = %+v, %v; want %+v", tt.body, got, err, tt.want)
		}
	}
}

func TestPeekRequestErrors(t *testing.T) {
	cases := []struct {
		body   string
		offset int
		reason string
	}{
		{``, 0, "empty body"},
		{`   `, 3, "empty body"},
		{`[{"model":"m"}]`, 0, "not a JSON object"},
		{` "model"`, 1, "not a JSON object"},
		{`{"model":"m"`, 12, "unexpected end"},
		{`{"model":"m",}`, 13, "unexpected '}'"},
		{`{"model":"m"} x`, 14, "data after the JSON object"},
		{`{"model":"m"}{}`, 13, "data after the JSON object"},
		{`{"model":'m'}`, 9, `unexpected '\''`},
		{`{"model":"m","stream":tru}`, 25, "unexpected '}'"},
		{"{\"model\":\"a\nb\"}", 11, "control character"},
		{`{"model":"\x"}`, 11, "invalid escape"},
		{`{"model":"\u12"}`, 14, `invalid \u escape`},
		{`{"n":01}`, 6, "unexpected '1'"},
		{`{"n":1.}`, 7, "unexpected '}'"},
		{`{"n":-}`, 6, "unexpected '}'"},
		{`{"n":1e}`, 7, "unexpected '}'"},
		{`{"a" 1}`, 5, "unexpected '1'"},
		{`{1:2}`, 1, "unexpected '1'"},
		{`{"model":42}`, 9, `"model" is not a string`},
		{`{"model":{"id":"x"}}`, 9, `"model" is not a string`},
		{`{"stream":"true"}`, 10, `"stream" is not a boolean`},
		{`{"stream":1}`, 10, `"stream" is not a boolean`},
		{`{"a":` + strings.Repeat("[", jsonscan.MaxDepth) + strings.Repeat("]", jsonscan.MaxDepth) + `}`, 5 + jsonscan.MaxDepth - 1, "nested too deeply"},
	}
	for _, tt := range cases {
		_, err := PeekRequest([]byte(tt.body))
		var be *BodyError
		if !errors.As(err, &be) {
			t.Errorf("PeekRequest(%.40q) error = %v; want a *BodyError", tt.body, err)
			continue
		}
		if be.Offset != tt.offset || !strings.Contains(be.Reason, tt.reason) {
			t.Errorf("PeekRequest(%.40q) = %v; want %q at offset %d", tt.body, err, tt.reason, tt.offset)
		}
	}
}

func TestSetModelKeepsEveryOtherByte(t *testing.T) {
	tests := []struct {
		body, model, want string
	}{
		{`{"model":"gpt-4o","stream":true}`, "gpt-4.1", `{"model":"gpt-4.1","stream":true}`},
		// Whitespace, key order, escapes and number spellings stay as sent.
		{"{\n  \"messages\": [{\"role\":\"user\",\"content\":\"caf\\u00e9 \\/ <b>\"}],\n  \"model\" :  \"gpt-4o\" ,\n  \"temperature\": 1.0e0\n}\n",
			"claude-sonnet-4-5",
			"{\n  \"messages\": [{\"role\":\"user\",\"content\":\"caf\\u00e9 \\/ <b>\"}],\n  \"model\" :  \"claude-sonnet-4-5\" ,\n  \"temperature\": 1.0e0\n}\n"},
		// A model inside a nested value is not the request's model.
		{`{"metadata":{"model":"x"},"model":"a"}`, "b", `{"metadata":{"model":"x"},"model":"b"}`},
		// Absent: inserted after the brace.
		{`{"messages":[]}`, "m", `{"model":"m","messages":[]}`},
		{` { "messages" : [] } `, "m", ` {"model":"m", "messages" : [] } `},
		{`{}`, "m", `{"model":"m"}`},
		{"{ \n}", "m", "{\"model\":\"m\" \n}"},
		// Any value type is replaced, and every duplicate.
		{`{"model":null}`, "m", `{"model":"m"}`},
		{`{"model":{"id":1},"x":1,"model":42}`, "m", `{"model":"m","x":1,"model":"m"}`},
		{`{"mod\u0065l":"old"}`, "m", `{"mod\u0065l":"m"}`},
		// The new value is escaped as JSON needs; <>& are left alone.
		{`{"model":"a"}`, "x\"y\\z\n\t\x01<&>é", `{"model":"x\"y\\z\n\t\u0001<&>é"}`},
		{`{"model":"a"}`, "bad\xffutf8", `{"model":"bad\ufffdutf8"}`},
		{`{"model":"a"}`, "", `{"model":""}`},
	}
	for _, tt := range tests {
		body := []byte(tt.body)
		orig := bytes.Clone(body)
		got, err := SetModel(body, tt.model)
		if err != nil || string(got) != tt.want {
			t.Errorf("SetModel(%q, %q) = %q, %v; want %q", tt.body, tt.model, got, err, tt.want)
		}
		if !bytes.Equal(body, orig) {
			t.Errorf("SetModel modified its input: %q", body)
		}
		if cap(got) != len(got) {
			t.Errorf("SetModel(%q): cap %d != len %d: the size estimate is off", tt.body, cap(got), len(got))
		}
	}
}

func TestSetModelErrors(t *testing.T) {
	for _, body := range []string{``, `[]`, `"model"`, `{"model":"a"`, `{"model":"a"}}`, `{"model":"a",}`, `nul`} {
		_, err := SetModel([]byte(body), "m")
		var be *BodyError
		if !errors.As(err, &be) {
			t.Errorf("SetModel(%q) error = %v; want a *BodyError", body, err)
		}
	}
}

func TestBodyErrorMessage(t *testing.T) {
	_, err := PeekRequest([]byte(`{"model":"m",}`))
	if got, want := err.Error(), `request body: unexpected '}' at offset 13`; got != want {
		t.Errorf("Error() = %q; want %q", got, want)
	}
}

func TestGeminiModelFromPath(t *testing.T) {
	tests := []struct {
		path, model, method string
		ok                  bool
	}{
		{"/v1beta/models/gemini-2.5-flash:streamGenerateContent", "gemini-2.5-flash", "streamGenerateContent", true},
		{"/v1beta/models/gemini-2.5-pro:generateContent", "gemini-2.5-pro", "generateContent", true},
		{"/v1/models/gemini-2.0-flash-001:countTokens", "gemini-2.0-flash-001", "countTokens", true},
		{"/v1alpha/models/text-embedding-004:batchEmbedContents", "text-embedding-004", "batchEmbedContents", true},
		{"/v1beta/tunedModels/my-model-abc:generateContent", "tunedModels/my-model-abc", "generateContent", true},
		{"/v1beta/models/gemini-2.5-flash", "", "", false},
		{"/v1beta/models/:generateContent", "", "", false},
		{"/v1beta/models/gemini:", "", "", false},
		{"/v1beta/models/a/b:generateContent", "", "", false},
		{"/v1beta/cachedContents/x:generateContent", "", "", false},
		{"/v1beta/models", "", "", false},
		{"/beta/models/m:generateContent", "", "", false},
		{"v1beta/models/m:generateContent", "", "", false},
		{"/v1/chat/completions", "", "", false},
		{"/v1/messages", "", "", false},
		{"", "", "", false},
	}
	for _, tt := range tests {
		model, method, ok := GeminiModelFromPath(tt.path)
		if model != tt.model || method != tt.method || ok != tt.ok {
			t.Errorf("GeminiModelFromPath(%q) = %q, %q, %v; want %q, %q, %v", tt.path, model, method, ok, tt.model, tt.method, tt.ok)
		}
	}
}

func TestSetGeminiModelInPath(t *testing.T) {
	tests := []struct {
		path, model, want string
		ok                bool
	}{
		{"/v1beta/models/gemini-2.5-flash:streamGenerateContent", "gemini-2.5-pro", "/v1beta/models/gemini-2.5-pro:streamGenerateContent", true},
		{"/v1/models/gemini-2.5-flash:generateContent", "models/gemini-2.0-flash", "/v1/models/gemini-2.0-flash:generateContent", true},
		{"/v1beta/models/gemini-2.5-flash:generateContent", "tunedModels/mine", "/v1beta/tunedModels/mine:generateContent", true},
		{"/v1beta/tunedModels/mine:generateContent", "gemini-2.5-flash", "/v1beta/models/gemini-2.5-flash:generateContent", true},
		{"/v1beta/models/gemini-2.5-flash:generateContent", "", "", false},
		{"/v1beta/models/gemini-2.5-flash:generateContent", "a/b", "", false},
		{"/v1beta/models/gemini-2.5-flash:generateContent", "a:b", "", false},
		{"/v1beta/models/gemini-2.5-flash:generateContent", "models/", "", false},
		{"/v1/chat/completions", "gemini-2.5-pro", "", false},
	}
	for _, tt := range tests {
		got, ok := SetGeminiModelInPath(tt.path, tt.model)
		if got != tt.want || ok != tt.ok {
			t.Errorf("SetGeminiModelInPath(%q, %q) = %q, %v; want %q, %v", tt.path, tt.model, got, ok, tt.want, tt.ok)
		}
	}
	// What GeminiModelFromPath returns, SetGeminiModelInPath puts back.
	for _, p := range []string{"/v1beta/models/gemini-2.5-flash:streamGenerateContent", "/v1beta/tunedModels/mine:generateContent"} {
		m, _, _ := GeminiModelFromPath(p)
		if got, ok := SetGeminiModelInPath(p, m); !ok || got != p {
			t.Errorf("round trip of %q via %q = %q, %v", p, m, got, ok)
		}
	}
}

// checkSetModel is FuzzSetModel's property, also run on the table inputs.
func checkSetModel(t *testing.T, body []byte, model string) {
	t.Helper()
	out, err := SetModel(body, model)
	isObject := json.Valid(body) && bytes.TrimLeft(body, " \t\r\n")[0] == '{'
	if !isObject {
		if err == nil {
			t.Fatalf("SetModel(%q) accepted invalid input", body)
		}
		return
	}
	if err != nil {
		t.Fatalf("SetModel(%q): %v", body, err)
	}
	if !json.Valid(out) {
		t.Fatalf("SetModel(%q, %q) = %q: invalid JSON", body, model, out)
	}
	var in, got map[string]json.RawMessage
	if err := json.Unmarshal(body, &in); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	// The model must read back as model does through encoding/json (which
	// turns invalid UTF-8 into U+FFFD).
	var want, gotModel string
	m, _ := json.Marshal(model)
	json.Unmarshal(m, &want)
	if err := json.Unmarshal(got["model"], &gotModel); err != nil || gotModel != want {
		t.Fatalf("SetModel(%q, %q): model reads %q, %v; want %q", body, model, gotModel, err, want)
	}
	delete(in, "model")
	delete(got, "model")
	if len(in) != len(got) {
		t.Fatalf("SetModel(%q): keys %d -> %d", body, len(in), len(got))
	}
	for k, v := range in {
		var a, b bytes.Buffer
		json.Compact(&a, v)
		json.Compact(&b, got[k])
		if !bytes.Equal(a.Bytes(), b.Bytes()) {
			t.Fatalf("SetModel(%q): %q changed from %s to %s", body, k, v, got[k])
		}
	}
	// And the facts read back (when the rest of the body allows).
	if before, err := PeekRequest(body); err == nil {
		f, err := PeekRequest(out)
		if err != nil || f.Model != want || f.Stream != before.Stream {
			t.Fatalf("PeekRequest(SetModel(%q)) = %+v, %v", body, f, err)
		}
	}
}

func FuzzSetModel(f *testing.F) {
	for _, s := range []string{
		`{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}],"stream":true}`,
		`{}`, ` { } `, `{"model":null}`, `{"a":{"model":1},"model":[1,2]}`, `{"mod\u0065l":"x","model":"y"}`,
		`{"x":"\ud83d\ude00","y":-1.5e+10,"z":[true,false,null]}`, `[]`, `{"a":`, "{\"a\":\"\xff\"}",
	} {
		f.Add([]byte(s), "claude-sonnet-4-5")
	}
	f.Fuzz(func(t *testing.T, body []byte, model string) {
		checkSetModel(t, body, model)
	})
}

func FuzzPeekRequest(f *testing.F) {
	for _, s := range []string{
		`{"model":"gpt-4o","stream":true}`, `{"model":null,"stream":null}`, `{"model":1}`, `{"stream":"x"}`,
		`{"model":"a","model":"b"}`, `{"m\u006fdel":"x"}`, ` {"a":[{"b":{}}]} `, `{"a":1}x`, `[1]`, ``,
		`{"n":-0.0e-0}`, `{"s":"\"\\\/\b\f\n\r\t\u00AF"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		got, err := PeekRequest(body)
		// encoding/json is the reference: same validity, same values.
		if !json.Valid(body) || bytes.TrimLeft(body, " \t\r\n")[0] != '{' {
			if err == nil {
				t.Fatalf("PeekRequest(%q) accepted invalid input", body)
			}
			var be *BodyError
			if !errors.As(err, &be) || be.Offset < 0 || be.Offset > len(body) {
				t.Fatalf("PeekRequest(%q) error %v", body, err)
			}
			return
		}
		var ref struct {
			Model  any `json:"-"`
			Stream any `json:"-"`
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(body, &m); err != nil {
			t.Fatal(err)
		}
		var wantErr bool
		var want RequestFacts
		if raw, ok := m["model"]; ok {
			json.Unmarshal(raw, &ref.Model)
			switch v := ref.Model.(type) {
			case string:
				want.Model = v
			case nil:
			default:
				wantErr = true
			}
		}
		if raw, ok := m["stream"]; ok {
			json.Unmarshal(raw, &ref.Stream)
			switch v := ref.Stream.(type) {
			case bool:
				want.Stream = v
			case nil:
			default:
				wantErr = true
			}
		}
		if wantErr != (err != nil) || (!wantErr && got != want) {
			t.Fatalf("PeekRequest(%q) = %+v, %v; want %+v (error %v)", body, got, err, want, wantErr)
		}
		checkSetModel(t, body, "m")
	})
}

// chatBody builds an OpenAI chat request of about size bytes, shaped like a
// real one: a system prompt, turns, a tool, and the model near the end.
func chatBody(size int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"messages":[{"role":"system","content":"You are a helpful assistant.\nAnswer briefly."}`)
	for i := 0; b.Len() < size-400; i++ {
		fmt.Fprintf(&b, `,{"role":"user","content":"Question %d: what is the weather like in Paris, and should I take an umbrella \u2602?"}`, i)
		fmt.Fprintf(&b, `,{"role":"assistant","content":"Answer %d: it is mild, with a chance of rain \u2014 take one."}`, i)
	}
	b.WriteString(`],"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}],`)
	b.WriteString(`"temperature":0.7,"max_tokens":1024,"stream":true,"stream_options":{"include_usage":true},"model":"gpt-4o"}`)
	return b.Bytes()
}

func TestChatBodyIsRealistic(t *testing.T) {
	body := chatBody(10 << 10)
	if !json.Valid(body) || len(body) < 9<<10 || len(body) > 11<<10 {
		t.Fatalf("chatBody: %d bytes, valid %v", len(body), json.Valid(body))
	}
	checkSetModel(t, body, "claude-sonnet-4-5")
	if n := testing.AllocsPerRun(20, func() { SetModel(body, "claude-sonnet-4-5") }); n != 1 {
		t.Errorf("SetModel allocates %v times; want 1 (the result)", n)
	}
}

func BenchmarkSetModel(b *testing.B) {
	body := chatBody(10 << 10)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := SetModel(body, "claude-sonnet-4-5"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkPeekRequest(b *testing.B) {
	body := chatBody(10 << 10)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := PeekRequest(body); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkJSONValid is the floor to compare with: encoding/json's own
// validation of the same body, which builds nothing either.
func BenchmarkJSONValid(b *testing.B) {
	body := chatBody(10 << 10)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		json.Valid(body)
	}
}
