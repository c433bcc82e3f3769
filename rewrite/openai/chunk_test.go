package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/detour-proxy/detour/rewrite/ir"
	"github.com/detour-proxy/detour/rewrite/sse"
)

// parseChunk replaces encoding/json on the stream's hot path. These tests
// hold it to what encoding/json gives for the same chunk, decoded into the
// typed structs below: the same fields, the same values, and an error
// exactly when encoding/json reports one.

type refChunk struct {
	ID      string          `json:"id"`
	Model   string          `json:"model"`
	Choices []refChoice     `json:"choices"`
	Usage   *usageIO        `json:"usage"`
	Error   json.RawMessage `json:"error"`
}

type refChoice struct {
	Index        int      `json:"index"`
	Delta        refDelta `json:"delta"`
	FinishReason string   `json:"finish_reason"`
}

type refDelta struct {
	Content          refFlexText   `json:"content"`
	ReasoningContent looseText     `json:"reasoning_content"`
	Reasoning        looseText     `json:"reasoning"`
	Refusal          string        `json:"refusal"`
	ToolCalls        []refToolCall `json:"tool_calls"`
	FunctionCall     *functionIO   `json:"function_call"`
}

type refToolCall struct {
	Index    *int       `json:"index"`
	ID       string     `json:"id"`
	Function functionIO `json:"function"`
}

// refFlexText is content as a string, null, or an array of parts whose
// text parts are concatenated.
type refFlexText struct{ s string }

func (t *refFlexText) UnmarshalJSON(b []byte) error {
	switch b[0] {
	case '"':
		return json.Unmarshal(b, &t.s)
	case 'n':
		t.s = ""
		return nil
	case '[':
		var parts []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if err := json.Unmarshal(b, &parts); err != nil {
			return err
		}
		var sb strings.Builder
		for _, p := range parts {
			if p.Type == "text" || p.Type == "" {
				sb.WriteString(p.Text)
			}
		}
		t.s = sb.String()
		return nil
	}
	return errors.New("content of the wrong type")
}

// referenceParse is parseChunk written with encoding/json.
func referenceParse(data []byte) (parsedChunk, error) {
	var in refChunk
	if err := json.Unmarshal(data, &in); err != nil {
		return parsedChunk{}, err
	}
	c := parsedChunk{id: in.ID, model: in.Model, failed: nullToNil(in.Error) != nil}
	for _, ch := range in.Choices {
		p := parsedChoice{
			index: ch.Index, finish: ch.FinishReason, content: ch.Delta.Content.s,
			reasoningContent: string(ch.Delta.ReasoningContent), reasoning: string(ch.Delta.Reasoning),
			refusal: ch.Delta.Refusal,
		}
		if f := ch.Delta.FunctionCall; f != nil {
			p.function, p.hasFunction = *f, true
		}
		for _, tc := range ch.Delta.ToolCalls {
			t := parsedToolDelta{id: tc.ID, function: tc.Function}
			if tc.Index != nil {
				t.index, t.hasIndex = *tc.Index, true
			}
			p.tools = append(p.tools, t)
		}
		c.choices = append(c.choices, p)
	}
	if in.Usage != nil {
		c.usage, c.hasUsage = decodeUsage(in.Usage), true
	}
	return c, nil
}

// knownKeys are the member names parseChunk reads.
var knownKeys = []string{
	"id", "model", "choices", "usage", "error", "index", "delta", "finish_reason",
	"content", "reasoning_content", "reasoning", "refusal", "tool_calls", "function_call",
	"function", "name", "arguments", "type", "text", "prompt_tokens", "completion_tokens",
	"total_tokens", "prompt_tokens_details", "completion_tokens_details", "cached_tokens",
	"reasoning_tokens",
}

// comparable reports whether encoding/json and parseChunk are meant to
// agree on data: it has no duplicate keys in one object (encoding/json
// merges a repeated object into the first, parseChunk takes the last) and
// no key that matches a known name only when case is ignored (which only
// encoding/json accepts).
func comparable(data []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(data))
	type level struct {
		obj  bool
		key  bool // the next string token is a key
		seen map[string]bool
	}
	var stack []*level
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return true
		}
		if err != nil {
			return true // invalid JSON: both must fail
		}
		var top *level
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if s, ok := tok.(string); ok && top != nil && top.obj && top.key {
			if top.seen[s] {
				return false
			}
			top.seen[s] = true
			for _, k := range knownKeys {
				if s != k && strings.EqualFold(s, k) {
					return false
				}
			}
			top.key = false
			continue
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &level{obj: true, key: true, seen: map[string]bool{}})
			continue
		case json.Delim('['):
			stack = append(stack, &level{})
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
		if len(stack) > 0 && stack[len(stack)-1].obj {
			stack[len(stack)-1].key = true // a value ended: a key comes next
		}
	}
}

// sameChunk compares two parsed chunks, treating nil and empty slices alike.
func sameChunk(a, b parsedChunk) bool {
	if a.id != b.id || a.model != b.model || a.failed != b.failed || a.usage != b.usage ||
		a.hasUsage != b.hasUsage || len(a.choices) != len(b.choices) {
		return false
	}
	for i := range a.choices {
		x, y := a.choices[i], b.choices[i]
		if len(x.tools) != len(y.tools) || (len(x.tools) > 0 && !reflect.DeepEqual(x.tools, y.tools)) {
			return false
		}
		x.tools, y.tools = nil, nil
		if !reflect.DeepEqual(x, y) {
			return false
		}
	}
	return true
}

// checkParseChunk fails when parseChunk and encoding/json disagree on data.
func checkParseChunk(t *testing.T, data []byte) {
	t.Helper()
	data = bytes.TrimSpace(data)
	if len(data) == 0 || data[0] != '{' || !comparable(data) {
		return
	}
	var got, noMeta parsedChunk
	gotErr := parseChunk(data, &got, true)
	if err := parseChunk(data, &noMeta, false); (err == nil) != (gotErr == nil) {
		t.Fatalf("chunk %s: parseChunk error %v with meta, %v without", data, gotErr, err)
	}
	want, wantErr := referenceParse(data)
	if (gotErr == nil) != (wantErr == nil) {
		t.Fatalf("chunk %s: parseChunk error %v; encoding/json error %v", data, gotErr, wantErr)
	}
	if gotErr == nil && !sameChunk(got, want) {
		t.Fatalf("chunk %s:\nparseChunk    %+v\nencoding/json %+v", data, got, want)
	}
}

var chunkCases = []string{
	`{}`,
	`{"id":"x","model":"m","choices":[],"usage":null}`,
	`{"id":null,"model":null,"choices":null,"usage":null,"error":null}`,
	`{"choices":[null,{"index":1},{"index":-0,"delta":null,"finish_reason":null}]}`,
	`{"choices":[{"index":0,"delta":{"content":"a\"b\\u00e9\ud83d\ude00 \ud800 x","refusal":null}}]}`,
	`{"choices":[{"delta":{"content":[{"type":"text","text":"a"},null,{"type":"image","text":"no"},{"text":"b"}]}}]}`,
	`{"choices":[{"delta":{"reasoning_content":{"x":1},"reasoning":["a"],"content":null}}]}`,
	`{"choices":[{"delta":{"tool_calls":[null,{},{"index":null,"id":null,"function":null},{"index":3,"id":"c","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]}}]}`,
	`{"choices":[{"delta":{"function_call":{}}}]}`,
	`{"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3,"prompt_tokens_details":null,"completion_tokens_details":{"reasoning_tokens":9223372036854775807}}}`,
	`{"usage":{"prompt_tokens":-9223372036854775808}}`,
	`{"u\u0073age":{"prompt_tokens":5},"\u0069d":"esc"}`,
	`{"error":{},"choices":[]}`,
	`{"error":0}`,
	"{\"id\":\"bad utf8 \xff\xfe\"}",
	// wrong types: encoding/json fails, and so must parseChunk
	`{"id":5}`,
	`{"choices":{}}`,
	`{"choices":[5]}`,
	`{"choices":[{"index":"0"}]}`,
	`{"choices":[{"index":1.0}]}`,
	`{"choices":[{"index":1e2}]}`,
	`{"choices":[{"index":9223372036854775808}]}`,
	`{"choices":[{"delta":[]}]}`,
	`{"choices":[{"delta":{"content":5}}]}`,
	`{"choices":[{"delta":{"content":[5]}}]}`,
	`{"choices":[{"delta":{"content":[{"type":5}]}}]}`,
	`{"choices":[{"delta":{"refusal":true}}]}`,
	`{"choices":[{"delta":{"tool_calls":{}}}]}`,
	`{"choices":[{"delta":{"tool_calls":[{"index":"1"}]}}]}`,
	`{"choices":[{"delta":{"tool_calls":[{"function":{"arguments":{}}}]}}]}`,
	`{"choices":[{"finish_reason":1}]}`,
	`{"usage":[]}`,
	`{"usage":{"total_tokens":"3"}}`,
	`{"usage":{"prompt_tokens_details":{"cached_tokens":1.5}}}`,
	// invalid JSON
	`{"id":"x"`,
	`{"id":"x"} {}`,
	`{"id":"\x"}`,
	`{"id":"\u12"}`,
	"{\"id\":\"a\tb\"}",
	`{"n":01}`,
	`{"n":-}`,
	`{"n":1.}`,
	`{"n":1e}`,
	`{"n":tru}`,
	`{"a":[1,]}`,
	`{,}`,
	`{"a" 1}`,
}

func TestParseChunkMatchesEncodingJSON(t *testing.T) {
	for _, c := range chunkCases {
		checkParseChunk(t, []byte(c))
	}
	files, _ := filepath.Glob(filepath.Join("testdata", "streams", "*.sse"))
	for _, file := range files {
		f, err := os.Open(file)
		if err != nil {
			t.Fatal(err)
		}
		rd := sse.NewReader(f)
		for {
			ev, err := rd.Next()
			if err != nil {
				break
			}
			checkParseChunk(t, ev.Data)
		}
		f.Close()
	}
}

// FuzzParseChunk checks parseChunk against encoding/json on arbitrary
// input.
func FuzzParseChunk(f *testing.F) {
	for _, c := range chunkCases {
		f.Add([]byte(c))
	}
	addSeeds(f, "streams/*.sse")
	f.Fuzz(func(t *testing.T, data []byte) {
		checkParseChunk(t, data)
	})
}

// TestParseChunkReusesMemory: a decoder's chunk buffers are reused, and a
// choice's tool calls from one chunk do not leak into the next.
func TestParseChunkReusesMemory(t *testing.T) {
	var c parsedChunk
	if err := parseChunk([]byte(`{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"a"},{"index":1,"id":"b"}]}}]}`), &c, true); err != nil {
		t.Fatal(err)
	}
	if err := parseChunk([]byte(`{"choices":[{"delta":{"content":"x"}}]}`), &c, false); err != nil {
		t.Fatal(err)
	}
	if len(c.choices) != 1 || len(c.choices[0].tools) != 0 || c.choices[0].content != "x" {
		t.Errorf("second chunk %+v", c)
	}
	want := ir.TokenUsage{}
	if c.usage != want || c.hasUsage {
		t.Errorf("usage %+v", c.usage)
	}
}
