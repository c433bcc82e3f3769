package openai

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/detour-proxy/detour/rewrite"
	"github.com/detour-proxy/detour/rewrite/ir"
	"github.com/detour-proxy/detour/rewrite/sse"
)

// decodeData runs data events through one decoder.
func decodeData(t *testing.T, data ...string) []ir.StreamEvent {
	t.Helper()
	d := NewStreamDecoder()
	var all []ir.StreamEvent
	for _, s := range data {
		evs, err := d.Decode(sse.Event{Data: []byte(s)})
		if err != nil {
			t.Fatalf("Decode(%s): %v", s, err)
		}
		all = append(all, evs...)
	}
	return all
}

func TestStreamDecoder(t *testing.T) {
	start := ir.StreamEvent{Kind: ir.StreamStart, ID: "c", Model: "m"}
	for _, tc := range []struct {
		name string
		data []string
		want []ir.StreamEvent
	}{
		{"role chunk opens, [DONE] and empty data say nothing",
			[]string{`{"id":"c","model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""}}],"usage":null}`, "", "[DONE]"},
			[]ir.StreamEvent{start}},
		{"finish only once; a later finish is ignored",
			[]string{`{"id":"c","model":"m","choices":[{"index":0,"delta":{},"finish_reason":"length"}]}`,
				`{"id":"c","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`},
			[]ir.StreamEvent{start, {Kind: ir.StreamFinish, Finish: ir.FinishLength}}},
		{"stop after tool calls is tool_calls; function_call is tool_calls",
			[]string{`{"id":"c","model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"t","function":{"name":"f","arguments":"{}"}}]},"finish_reason":"stop"}]}`},
			[]ir.StreamEvent{start,
				{Kind: ir.StreamToolStart, ID: "t", Name: "f"},
				{Kind: ir.StreamToolArgs, Text: "{}"},
				{Kind: ir.StreamFinish, Finish: ir.FinishToolCalls}}},
		{"other choices are ignored",
			[]string{`{"id":"c","model":"m","choices":[{"index":1,"delta":{"content":"B"}},{"index":0,"delta":{"content":"A"}}]}`},
			[]ir.StreamEvent{start, {Kind: ir.StreamText, Text: "A"}}},
		{"OpenRouter reasoning and refusal",
			[]string{`{"id":"c","model":"m","choices":[{"index":0,"delta":{"reasoning":"r","refusal":"no"}}]}`},
			[]ir.StreamEvent{start, {Kind: ir.StreamThinking, Text: "r"}, {Kind: ir.StreamText, Text: "no"}}},
		{"content as an array of parts",
			[]string{`{"id":"c","model":"m","choices":[{"index":0,"delta":{"content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}}]}`},
			[]ir.StreamEvent{start, {Kind: ir.StreamText, Text: "ab"}}},
		{"arguments before any id get a generated id",
			[]string{`{"id":"c","model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{"}}]}}]}`},
			[]ir.StreamEvent{start,
				{Kind: ir.StreamToolStart, ID: ir.GeneratedToolID("c", 0)},
				{Kind: ir.StreamToolArgs, Text: "{"}}},
		{"a repeated id and name do not open a second call",
			[]string{`{"id":"c","model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"t","function":{"name":"f","arguments":"{"}}]}}]}`,
				`{"id":"c","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"t","function":{"name":"f","arguments":"}"}}]}}]}`},
			[]ir.StreamEvent{start,
				{Kind: ir.StreamToolStart, ID: "t", Name: "f"},
				{Kind: ir.StreamToolArgs, Text: "{"},
				{Kind: ir.StreamToolArgs, Text: "}"}}},
		{"legacy function_call",
			[]string{`{"id":"c","model":"m","choices":[{"index":0,"delta":{"function_call":{"name":"f","arguments":"{\"a\""}}}]}`,
				`{"id":"c","choices":[{"index":0,"delta":{"function_call":{"arguments":":1}"}},"finish_reason":"function_call"}]}`},
			[]ir.StreamEvent{start,
				{Kind: ir.StreamToolStart, ID: ir.GeneratedToolID("c", 0), Name: "f"},
				{Kind: ir.StreamToolArgs, Text: `{"a"`},
				{Kind: ir.StreamToolArgs, Text: ":1}"},
				{Kind: ir.StreamFinish, Finish: ir.FinishToolCalls}}},
		{"usage with details",
			[]string{`{"id":"c","model":"m","choices":[],"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15,"prompt_tokens_details":{"cached_tokens":4},"completion_tokens_details":{"reasoning_tokens":2}}}`},
			[]ir.StreamEvent{start, {Kind: ir.StreamUsage, Usage: ir.TokenUsage{Input: 10, Output: 5, CachedInput: 4, Reasoning: 2}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := decodeData(t, tc.data...)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %s\nwant %s", eventLines(t, got), eventLines(t, tc.want))
			}
		})
	}
}

func TestStreamDecoderErrors(t *testing.T) {
	d := NewStreamDecoder()
	if evs, err := d.Decode(sse.Event{Comment: true, Raw: []byte(": keep-alive\n\n")}); err != nil || evs != nil {
		t.Errorf("comment: %v %v", evs, err)
	}
	for _, data := range []string{`not json`, `{"choices":`, `{"choices":{}}`, `{"choices":[{"delta":{"content":5}}]}`, `[1]`} {
		if evs, err := d.Decode(sse.Event{Data: []byte(data)}); err == nil {
			t.Errorf("Decode(%s) = %v; want an error", data, evs)
		}
	}
	for _, tc := range []struct {
		data   string
		class  string
		status int
	}{
		{`{"error":{"message":"m","type":"server_error"}}`, "server_error", 0},
		{`{"error":{"message":"slow","type":"tokens","code":"rate_limit_exceeded"}}`, "rate_limited", 0},
		{`{"error":{"message":"ctx","type":"invalid_request_error","code":"context_length_exceeded"}}`, "context_too_long", 0},
		{`{"error":{"code":503,"message":"busy"}}`, "overloaded", 503},
		{`{"error":{"code":"429","message":"azure"}}`, "rate_limited", 429},
		{`{"error":{"code":418,"message":"teapot"}}`, "invalid_request", 418},
		{`{"error":"plain"}`, "server_error", 0},
	} {
		d := NewStreamDecoder()
		evs, err := d.Decode(sse.Event{Data: []byte(tc.data)})
		if err != nil || len(evs) != 1 || evs[0].Kind != ir.StreamError || evs[0].Err == nil {
			t.Fatalf("Decode(%s) = %+v, %v", tc.data, evs, err)
		}
		if e := evs[0].Err; e.Class != tc.class || e.Status != tc.status || e.Message == "" {
			t.Errorf("Decode(%s): %+v; want class %s status %d", tc.data, *e, tc.class, tc.status)
		}
		// After an error the stream is over.
		if evs, _ := d.Decode(sse.Event{Data: []byte(`{"id":"x","choices":[{"index":0,"delta":{"content":"late"}}]}`)}); evs != nil {
			t.Errorf("events after an error: %+v", evs)
		}
	}
}

// encodeAll runs events through an encoder without closing it.
func encodeAll(e *StreamEncoder, evs ...ir.StreamEvent) []byte {
	var out []byte
	for _, ev := range evs {
		out = e.Encode(out, ev)
	}
	return out
}

func TestStreamEncoderCloseOnce(t *testing.T) {
	e := NewStreamEncoder(ir.StreamOptions{Model: "gpt-4o", IncludeUsage: true, Created: testCreated})
	out := encodeAll(e, ir.StreamEvent{Kind: ir.StreamStart, ID: "x"}, ir.StreamEvent{Kind: ir.StreamText, Text: "a"})
	out = e.Close(out)
	n := len(out)
	out = e.Close(out)
	out = e.Encode(out, ir.StreamEvent{Kind: ir.StreamText, Text: "late"})
	out = e.Encode(out, ir.StreamEvent{Kind: ir.StreamError, Err: &rewrite.AppError{}})
	if len(out) != n {
		t.Errorf("bytes after Close: %q", out[n:])
	}
	if c := bytes.Count(out, []byte("[DONE]")); c != 1 {
		t.Errorf("%d [DONE]s", c)
	}
	if c := bytes.Count(out, []byte(`"finish_reason":"stop"`)); c != 1 {
		t.Errorf("%d finish chunks", c)
	}
	if c := bytes.Count(out, []byte(`"usage":{`)); c != 1 {
		t.Errorf("%d usage chunks", c)
	}
}

func TestStreamEncoderErrorCloses(t *testing.T) {
	e := NewStreamEncoder(ir.StreamOptions{Model: "gpt-4o", Created: testCreated})
	out := encodeAll(e, ir.StreamEvent{Kind: ir.StreamText, Text: "a"},
		ir.StreamEvent{Kind: ir.StreamError, Err: &rewrite.AppError{Status: 429, Class: "rate_limited", Message: "slow down"}})
	want := rewrite.StreamErrorEvent(rewrite.OpenAI, rewrite.AppError{Status: 429, Class: "rate_limited", Message: "slow down"})
	if !bytes.HasSuffix(out, want) {
		t.Errorf("stream does not end with the error event:\n%s", out)
	}
	if got := e.Close(out); len(got) != len(out) {
		t.Errorf("Close after an error wrote %q", got[len(out):])
	}
	// A nil Err still gives a well-formed error event.
	e = NewStreamEncoder(ir.StreamOptions{})
	out = e.Encode(nil, ir.StreamEvent{Kind: ir.StreamError})
	lines := dataLines(t, out)
	if len(lines) != 1 || !json.Valid(lines[0]) || !bytes.Contains(lines[0], []byte(`"error"`)) {
		t.Errorf("error event %q", out)
	}
}

func TestStreamEncoderUsage(t *testing.T) {
	// Usage that arrives before the finish is sent after it, once, with the
	// input from the start and the output from the later report.
	e := NewStreamEncoder(ir.StreamOptions{Model: "m", IncludeUsage: true, Created: testCreated})
	out := encodeAll(e,
		ir.StreamEvent{Kind: ir.StreamStart, ID: "x", Usage: ir.TokenUsage{Input: 7, CachedInput: 2}},
		ir.StreamEvent{Kind: ir.StreamUsage, Usage: ir.TokenUsage{Output: 3}},
		ir.StreamEvent{Kind: ir.StreamUsage, Usage: ir.TokenUsage{Output: 5}},
		ir.StreamEvent{Kind: ir.StreamFinish, Finish: ir.FinishStop},
	)
	out = e.Close(out)
	lines := dataLines(t, out)
	if len(lines) != 4 {
		t.Fatalf("want role, finish, usage, [DONE]; got:\n%s", out)
	}
	if !bytes.Contains(lines[1], []byte(`"finish_reason":"stop"`)) {
		t.Errorf("second chunk is not the finish: %s", lines[1])
	}
	want := `"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":5,"total_tokens":12,"prompt_tokens_details":{"cached_tokens":2},"completion_tokens_details":{"reasoning_tokens":0}}}`
	if !bytes.HasSuffix(lines[2], []byte(want)) {
		t.Errorf("usage chunk %s; want suffix %s", lines[2], want)
	}

	// Without include_usage: no usage chunk and no usage field.
	e = NewStreamEncoder(ir.StreamOptions{Model: "m", Created: testCreated})
	out = e.Close(encodeAll(e, ir.StreamEvent{Kind: ir.StreamUsage, Usage: ir.TokenUsage{Input: 1, Output: 1}}))
	if bytes.Contains(out, []byte("usage")) {
		t.Errorf("usage without include_usage:\n%s", out)
	}
}

func TestStreamEncoderChunks(t *testing.T) {
	e := NewStreamEncoder(ir.StreamOptions{Model: "app-model", Created: testCreated})
	out := encodeAll(e,
		ir.StreamEvent{Kind: ir.StreamStart, ID: "chatcmpl-keep", Model: "upstream-model"},
		ir.StreamEvent{Kind: ir.StreamStart, ID: "other"}, // a second start changes nothing
		ir.StreamEvent{Kind: ir.StreamText, Text: ""},     // nothing to send
		ir.StreamEvent{Kind: ir.StreamThinking, Signature: "sig"},
		ir.StreamEvent{Kind: ir.StreamText, Text: "x\u2028y"},
		ir.StreamEvent{Kind: ir.StreamToolStart, Index: 4, ID: "t", Name: "f"},
		ir.StreamEvent{Kind: ir.StreamToolArgs, Index: 4, Text: ""},
		ir.StreamEvent{Kind: ir.StreamToolArgs, Index: 4, Text: `{"a":"\n"}`},
		ir.StreamEvent{Kind: ir.StreamFinish, Finish: ir.FinishLength},
	)
	lines := dataLines(t, out)
	if len(lines) != 5 {
		t.Fatalf("want role, text, tool start, args, finish; got %d:\n%s", len(lines), out)
	}
	for _, l := range lines {
		var c struct {
			ID, Object, Model string
			Created           int64
		}
		if err := json.Unmarshal(l, &c); err != nil {
			t.Fatalf("chunk %s: %v", l, err)
		}
		if c.ID != "chatcmpl-keep" || c.Object != "chat.completion.chunk" || c.Model != "app-model" || c.Created != testCreated {
			t.Errorf("chunk envelope %+v", c)
		}
	}
	for i, want := range []string{
		`"delta":{"role":"assistant","content":""},"finish_reason":null`,
		`"delta":{"content":"x\u2028y"}`,
		`"delta":{"tool_calls":[{"index":0,"id":"t","type":"function","function":{"name":"f","arguments":""}}]}`,
		`"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"a\":\"\\n\"}"}}]}`,
		`"delta":{},"finish_reason":"length"}]}`,
	} {
		if !strings.Contains(string(lines[i]), want) {
			t.Errorf("chunk %d %s lacks %s", i, lines[i], want)
		}
	}
}

func TestAppendString(t *testing.T) {
	for _, s := range []string{"", "plain", "q\"b\\", "\x00\x01\x1f\x7f", "tab\tnl\ncr\r", "é€😀", "\u2028\u2029", "bad\xff\xfeutf8", "<>&", "\xed\xa0\x80"} {
		got := appendString(nil, s)
		var back string
		if err := json.Unmarshal(got, &back); err != nil {
			t.Errorf("appendString(%q) = %s: %v", s, got, err)
			continue
		}
		want, _ := json.Marshal(s) // encoding/json's reading of s
		var wantBack string
		_ = json.Unmarshal(want, &wantBack)
		if back != wantBack {
			t.Errorf("appendString(%q) reads back %q; encoding/json gives %q", s, back, wantBack)
		}
		if bytes.ContainsAny(got, "\n\r") || strings.Contains(string(got), "\u2028") {
			t.Errorf("appendString(%q) = %s holds a line break", s, got)
		}
	}
}
