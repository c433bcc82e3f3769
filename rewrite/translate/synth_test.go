package translate

import (
	"bytes"
	"encoding/json"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/detour-proxy/detour/internal/codectest"
	"github.com/detour-proxy/detour/rewrite"
	"github.com/detour-proxy/detour/rewrite/anthropic"
	"github.com/detour-proxy/detour/rewrite/gemini"
	"github.com/detour-proxy/detour/rewrite/ir"
	"github.com/detour-proxy/detour/rewrite/openai"
)

// synthCreated, synthText and synthTool are the answers of
// internal/codectest that internal/sdkcheck's Synthesize tests share.
const synthCreated = codectest.SynthCreated

// The answers the tests synthesize: what a cache would hold.
var (
	synthText  = codectest.SynthText
	synthTool  = codectest.SynthTool
	synthEmpty = &ir.Response{ID: "r3", Model: "upstream-model", Created: synthCreated, Finish: ir.FinishStop}
	// synthCut was cut off by max_tokens.
	synthCut = &ir.Response{
		ID: "r4", Model: "upstream-model", Created: synthCreated,
		Parts:  []ir.Part{{Kind: ir.PartText, Text: "It was the best of"}},
		Finish: ir.FinishLength,
		Usage:  ir.TokenUsage{Input: 7, Output: 5},
	}
)

var synthAnswers = []struct {
	name string
	r    *ir.Response
}{{"text", synthText}, {"tools", synthTool}, {"empty", synthEmpty}, {"length", synthCut}}

// answerView and callView are what an app gets out of an answer, as
// comparable values (codectest.ViewOf).
type (
	answerView = codectest.AnswerView
	callView   = codectest.CallView
)

// viewOf is what an app gets out of r.
func viewOf(t testing.TB, r *ir.Response) answerView {
	t.Helper()
	return codectest.ViewOf(t, r)
}

// wantView is what the app's shape keeps of r after Synthesize: the
// vendor's id spelling, the app's model, and only what the shape can carry.
func wantView(t testing.TB, app rewrite.Shape, r *ir.Response, model string, stream, includeUsage bool) answerView {
	t.Helper()
	v := viewOf(t, r)
	v.Model = model
	switch app {
	case rewrite.OpenAI:
		if !strings.HasPrefix(v.ID, "chatcmpl-") {
			v.ID = "chatcmpl-" + v.ID
		}
		if stream && !includeUsage {
			v.Usage = ir.TokenUsage{}
		}
	case rewrite.Anthropic:
		if !strings.HasPrefix(v.ID, "msg_") {
			v.ID = "msg_" + v.ID
		}
		v.Usage.Reasoning = 0 // Anthropic reports no reasoning count
	}
	if app != rewrite.OpenAI {
		v.Created = 0 // only OpenAI's answers carry it
	}
	if app != rewrite.Anthropic {
		v.Signature = "" // only Anthropic's thinking is signed
	}
	for i := range v.Calls {
		if app != rewrite.Gemini {
			v.Calls[i].ThoughtSignature = "" // Gemini's alone
		}
	}
	return v
}

// decodeWith decodes an answer with the codec of shape app, the way an
// upstream's answer of that shape is decoded — not through DecodeAnswer —
// so that Synthesize is checked against the codecs themselves.
func decodeWith(t testing.TB, app rewrite.Shape, body []byte, stream bool) *ir.Response {
	t.Helper()
	if !stream {
		var r *ir.Response
		var err error
		switch app {
		case rewrite.OpenAI:
			r, err = openai.DecodeResponse(body)
		case rewrite.Anthropic:
			r, err = anthropic.DecodeResponse(body)
		case rewrite.Gemini:
			r, err = gemini.DecodeResponse(body)
		}
		if err != nil {
			t.Fatalf("%s DecodeResponse: %v\n%s", app, err, body)
		}
		return r
	}
	var dec streamDecoder
	switch app {
	case rewrite.OpenAI:
		dec = openai.NewStreamDecoder()
	case rewrite.Anthropic:
		dec = anthropic.NewStreamDecoder()
	case rewrite.Gemini:
		dec = gemini.NewStreamDecoder()
	}
	var evs []ir.StreamEvent
	for _, ev := range sseEvents(t, body) {
		got, err := dec.Decode(ev)
		if err != nil {
			t.Fatalf("%s stream decoder: %v on %q", app, err, ev.Raw)
		}
		evs = append(evs, got...)
	}
	// Put the events together by hand, independently of DecodeAnswer.
	r := &ir.Response{}
	var text, thinking, sig strings.Builder
	args := map[int]*strings.Builder{}
	var calls []*ir.ToolCall
	for _, e := range evs {
		switch e.Kind {
		case ir.StreamStart:
			r.ID, r.Model = e.ID, e.Model
			r.Usage = e.Usage
		case ir.StreamText:
			text.WriteString(e.Text)
		case ir.StreamThinking:
			thinking.WriteString(e.Text)
			sig.WriteString(e.Signature)
		case ir.StreamToolStart:
			calls = append(calls, &ir.ToolCall{ID: e.ID, Name: e.Name, ThoughtSignature: e.Signature})
			args[e.Index] = &strings.Builder{}
		case ir.StreamToolArgs:
			args[e.Index].WriteString(e.Text)
		case ir.StreamFinish:
			r.Finish = e.Finish
		case ir.StreamUsage:
			r.Usage = e.Usage
		case ir.StreamError:
			t.Fatalf("%s stream carries an error: %+v", app, e.Err)
		}
	}
	if thinking.Len() > 0 || sig.Len() > 0 {
		r.Parts = append(r.Parts, ir.Part{Kind: ir.PartThinking, Text: thinking.String(), Signature: sig.String()})
	}
	if text.Len() > 0 {
		r.Parts = append(r.Parts, ir.Part{Kind: ir.PartText, Text: text.String()})
	}
	for i, c := range calls {
		c.Arguments = json.RawMessage(args[i].String())
		r.Parts = append(r.Parts, ir.Part{Kind: ir.PartToolCall, ToolCall: c})
	}
	if app == rewrite.OpenAI {
		r.Created = chunkCreated(sseEvents(t, body)[0].Data)
	}
	return r
}

// TestSynthesizeRoundTrip: what Synthesize writes decodes, with the
// shape's own decoder, to the answer it was given — text, thinking, tool
// calls (id, name, arguments), finish and usage — for every shape,
// streamed or not, with OpenAI usage asked for or not.
func TestSynthesizeRoundTrip(t *testing.T) {
	for _, a := range synthAnswers {
		for _, app := range rewrite.Shapes {
			for _, stream := range []bool{false, true} {
				for _, includeUsage := range []bool{true, false} {
					if includeUsage && (!stream || app != rewrite.OpenAI) {
						continue // it changes nothing there
					}
					name := a.name + "/" + string(app) + map[bool]string{false: "/json", true: "/stream"}[stream]
					if stream && app == rewrite.OpenAI && !includeUsage {
						name += "/no_usage"
					}
					t.Run(name, func(t *testing.T) {
						before := viewOf(t, a.r)
						ct, body, err := Synthesize(app, "app-model", a.r, stream, includeUsage)
						if err != nil {
							t.Fatal(err)
						}
						if want := map[bool]string{false: "application/json", true: "text/event-stream"}[stream]; ct != want {
							t.Errorf("content type %q; want %q", ct, want)
						}
						got := viewOf(t, decodeWith(t, app, body, stream))
						want := wantView(t, app, a.r, "app-model", stream, includeUsage)
						if !reflect.DeepEqual(got, want) {
							t.Errorf("decoded back\n got %+v\nwant %+v\nfrom %s", got, want, body)
						}
						// DecodeAnswer, the cache's reader, agrees.
						r, err := DecodeAnswer(app, body, stream)
						if err != nil {
							t.Fatalf("DecodeAnswer: %v", err)
						}
						if got := viewOf(t, r); !reflect.DeepEqual(got, want) {
							t.Errorf("DecodeAnswer\n got %+v\nwant %+v", got, want)
						}
						if after := viewOf(t, a.r); !reflect.DeepEqual(after, before) {
							t.Errorf("Synthesize changed its argument: %+v", after)
						}
						// The app's SDK rules (docs/vendors.md#what-the-go-sdks-insist-on).
						var s summary
						if stream {
							s = checkStream(t, app, body, streamCheck{includeUsage: includeUsage, model: "app-model", strict: true})
						} else {
							s = summarizeResponse(t, app, body, "app-model")
						}
						if s.Text != want.Text || len(s.Tools) != len(want.Calls) {
							t.Errorf("the SDK sees text %q and %d calls; want %q and %d", s.Text, len(s.Tools), want.Text, len(want.Calls))
						}
					})
				}
			}
		}
	}
}

// TestSynthesizeStreamFraming pins a whole synthesized stream per shape:
// OpenAI's role chunk, content, finish, usage chunk and [DONE]; Anthropic's
// message_start … message_stop, every event named; Gemini's data-only
// chunks with finishReason and the final usage on the last.
func TestSynthesizeStreamFraming(t *testing.T) {
	r := &ir.Response{ID: "r1", Model: "up", Created: synthCreated, Parts: []ir.Part{{Kind: ir.PartText, Text: "Hi!"}},
		Finish: ir.FinishStop, Usage: ir.TokenUsage{Input: 9, Output: 2}}
	const oaiHead = `data: {"id":"chatcmpl-r1","object":"chat.completion.chunk","created":1735689600,"model":"gpt-4o","choices":`
	tests := []struct {
		app          rewrite.Shape
		model        string
		includeUsage bool
		want         string
	}{
		{rewrite.OpenAI, "gpt-4o", true, "" +
			oaiHead + `[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}],"usage":null}` + "\n\n" +
			oaiHead + `[{"index":0,"delta":{"content":"Hi!"},"finish_reason":null}],"usage":null}` + "\n\n" +
			oaiHead + `[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":null}` + "\n\n" +
			oaiHead + `[],"usage":{"prompt_tokens":9,"completion_tokens":2,"total_tokens":11,"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}}}` + "\n\n" +
			"data: [DONE]\n\n"},
		// Without include_usage: no usage chunk and no "usage" field at all.
		{rewrite.OpenAI, "gpt-4o", false, "" +
			oaiHead + `[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}` + "\n\n" +
			oaiHead + `[{"index":0,"delta":{"content":"Hi!"},"finish_reason":null}]}` + "\n\n" +
			oaiHead + `[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n" +
			"data: [DONE]\n\n"},
		{rewrite.Anthropic, "claude-sonnet-4-5", false, "" +
			"event: message_start\n" + `data: {"type":"message_start","message":{"id":"msg_r1","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":9,"output_tokens":0}}}` + "\n\n" +
			"event: content_block_start\n" + `data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}` + "\n\n" +
			"event: content_block_delta\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi!"}}` + "\n\n" +
			"event: content_block_stop\n" + `data: {"type":"content_block_stop","index":0}` + "\n\n" +
			"event: message_delta\n" + `data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":2}}` + "\n\n" +
			"event: message_stop\n" + `data: {"type":"message_stop"}` + "\n\n"},
		{rewrite.Gemini, "gemini-2.5-flash", false, "" +
			`data: {"candidates":[{"content":{"role":"model","parts":[{"text":"Hi!"}]},"index":0}],"usageMetadata":{"promptTokenCount":9,"candidatesTokenCount":0,"totalTokenCount":9},"modelVersion":"gemini-2.5-flash","responseId":"r1"}` + "\n\n" +
			`data: {"candidates":[{"content":{"role":"model","parts":[{"text":""}]},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":9,"candidatesTokenCount":2,"totalTokenCount":11},"modelVersion":"gemini-2.5-flash","responseId":"r1"}` + "\n\n"},
	}
	for _, tt := range tests {
		_, got, err := Synthesize(tt.app, tt.model, r, true, tt.includeUsage)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != tt.want {
			t.Errorf("%s include_usage=%v:\n got %s\nwant %s", tt.app, tt.includeUsage, got, tt.want)
		}
	}
}

// TestSynthesizeToolStreamEvents: a tool-call answer streams as the vendor
// streams one — each call opened once with its id and name, arguments
// following, the finish saying tool calls.
func TestSynthesizeToolStreamEvents(t *testing.T) {
	_, out, _ := Synthesize(rewrite.Anthropic, "claude-sonnet-4-5", synthTool, true, false)
	var names []string
	for _, ev := range sseEvents(t, out) {
		var typ struct {
			Type         string `json:"type"`
			ContentBlock struct {
				Type string `json:"type"`
			} `json:"content_block"`
			Delta struct {
				Type string `json:"type"`
			} `json:"delta"`
		}
		mustUnmarshal(t, ev.Data, &typ)
		if typ.Type != ev.Name {
			t.Errorf("event %q carries type %q", ev.Name, typ.Type)
		}
		n := ev.Name
		if s := typ.ContentBlock.Type + typ.Delta.Type; s != "" {
			n += ":" + s
		}
		names = append(names, n)
	}
	want := []string{
		"message_start",
		"content_block_start:thinking", "content_block_delta:thinking_delta", "content_block_delta:signature_delta", "content_block_stop",
		"content_block_start:text", "content_block_delta:text_delta", "content_block_stop",
		"content_block_start:tool_use", "content_block_delta:input_json_delta", "content_block_stop",
		"content_block_start:tool_use", "content_block_delta:input_json_delta", "content_block_stop",
		"message_delta", "message_stop",
	}
	if !reflect.DeepEqual(names, want) {
		t.Errorf("anthropic events\n got %q\nwant %q", names, want)
	}
	if !bytes.Contains(out, []byte(`"stop_reason":"tool_use"`)) {
		t.Errorf("no tool_use stop reason:\n%s", out)
	}

	_, out, _ = Synthesize(rewrite.OpenAI, "gpt-4o", synthTool, true, true)
	for _, id := range []string{`"id":"call_w1"`, `"id":"call_t2"`, `"name":"get_weather"`, `"name":"get_time"`} {
		if n := bytes.Count(out, []byte(id)); n != 1 {
			t.Errorf("openai stream names %s %d times; want once (the accumulator concatenates)", id, n)
		}
	}
	if !bytes.Contains(out, []byte(`"finish_reason":"tool_calls"`)) || !bytes.HasSuffix(out, []byte("data: [DONE]\n\n")) {
		t.Errorf("openai tool stream ends wrong:\n%s", out)
	}

	_, out, _ = Synthesize(rewrite.Gemini, "gemini-2.5-flash", synthTool, true, false)
	evs := sseEvents(t, out)
	for i, ev := range evs {
		has := bytes.Contains(ev.Data, []byte(`"finishReason"`))
		if has != (i == len(evs)-1) {
			t.Errorf("gemini chunk %d of %d has finishReason %v: %s", i, len(evs), has, ev.Data)
		}
		if ev.Name != "" || !bytes.HasPrefix(ev.Raw, []byte("data: ")) {
			t.Errorf("gemini event %d is not a bare data line: %q", i, ev.Raw)
		}
	}
	if !bytes.Contains(out, []byte(`{"functionCall":{"id":"call_w1","name":"get_weather","args":{"city":"Paris","days":2}},"thoughtSignature":"dGhvdWdodA=="}`)) {
		t.Errorf("gemini call not whole with its signature:\n%s", out)
	}
}

var (
	openaiIDRe    = regexp.MustCompile(`^chatcmpl-[A-Za-z0-9]{29}$`)
	anthropicIDRe = regexp.MustCompile(`^msg_01[A-Za-z0-9]{22}$`)
	geminiIDRe    = regexp.MustCompile(`^[A-Za-z0-9]{23}$`)
	openaiCallRe  = regexp.MustCompile(`^call_[A-Za-z0-9]{24}$`)
	anthropicCall = regexp.MustCompile(`^toolu_01[A-Za-z0-9]{22}$`)
)

// TestSynthesizeFillsIn: an answer without id, creation time, call ids or
// finish gets them as the vendor would have sent them, the same in every
// chunk of a stream, and differently for every answer.
func TestSynthesizeFillsIn(t *testing.T) {
	bare := &ir.Response{Parts: []ir.Part{
		{Kind: ir.PartText, Text: "ok"},
		{Kind: ir.PartToolCall, ToolCall: &ir.ToolCall{Name: "f", Arguments: json.RawMessage(`{"a":1}`)}},
	}}
	idRe := map[rewrite.Shape]*regexp.Regexp{rewrite.OpenAI: openaiIDRe, rewrite.Anthropic: anthropicIDRe, rewrite.Gemini: geminiIDRe}
	callRe := map[rewrite.Shape]*regexp.Regexp{rewrite.OpenAI: openaiCallRe, rewrite.Anthropic: anthropicCall}
	for _, app := range rewrite.Shapes {
		for _, stream := range []bool{false, true} {
			since := time.Now().Unix()
			_, body, err := Synthesize(app, "m", bare, stream, true)
			if err != nil {
				t.Fatal(err)
			}
			r, err := DecodeAnswer(app, body, stream)
			if err != nil {
				t.Fatalf("%s stream=%v: %v", app, stream, err)
			}
			if !idRe[app].MatchString(r.ID) {
				t.Errorf("%s stream=%v: id %q not in the vendor's style", app, stream, r.ID)
			}
			if app == rewrite.OpenAI && (r.Created < since || r.Created > time.Now().Unix()) {
				t.Errorf("openai stream=%v: created %d is not now", stream, r.Created)
			}
			call := r.Parts[1].ToolCall
			switch {
			case app == rewrite.Gemini && call.ID != "" && !strings.HasPrefix(call.ID, "call_"):
				t.Errorf("gemini: call id %q", call.ID)
			case app != rewrite.Gemini && !callRe[app].MatchString(call.ID):
				t.Errorf("%s stream=%v: call id %q not in the vendor's style", app, stream, call.ID)
			}
			if r.Finish != ir.FinishToolCalls {
				t.Errorf("%s stream=%v: finish %q; want tool_calls after a call", app, stream, r.Finish)
			}
			if app == rewrite.Gemini && bytes.Contains(body, []byte(`"functionCall":{"id"`)) {
				t.Errorf("gemini: a call id was made up: %s", body)
			}
			_, again, _ := Synthesize(app, "m", bare, stream, true)
			if r2, _ := DecodeAnswer(app, again, stream); r2 == nil || r2.ID == r.ID {
				t.Errorf("%s stream=%v: two answers share id %q", app, stream, r.ID)
			}
		}
	}
	if bare.ID != "" || bare.Created != 0 || bare.Finish != "" || bare.Parts[1].ToolCall.ID != "" {
		t.Errorf("Synthesize changed its argument: %+v", bare)
	}
}

func TestSynthesizeErrors(t *testing.T) {
	if _, _, err := Synthesize("cohere", "m", synthText, false, false); err == nil {
		t.Error("unknown shape: no error")
	}
	if _, _, err := Synthesize(rewrite.OpenAI, "m", nil, true, false); err == nil {
		t.Error("nil response: no error")
	}
}

// TestStaticResponse: the last-resort answer reads, in every shape, as a
// plain finished answer holding the text and no usage.
func TestStaticResponse(t *testing.T) {
	const text = "Service unavailable, please retry later."
	for _, app := range rewrite.Shapes {
		for _, stream := range []bool{false, true} {
			ct, body := StaticResponse(app, "app-model", text, stream, true)
			if want := map[bool]string{false: "application/json", true: "text/event-stream"}[stream]; ct != want {
				t.Errorf("%s stream=%v: content type %q", app, stream, ct)
			}
			r, err := DecodeAnswer(app, body, stream)
			if err != nil {
				t.Fatalf("%s stream=%v: %v\n%s", app, stream, err, body)
			}
			got := viewOf(t, r)
			if got.Text != text || got.Finish != ir.FinishStop || got.Usage != (ir.TokenUsage{}) || got.Model != "app-model" || len(got.Calls) != 0 {
				t.Errorf("%s stream=%v: %+v", app, stream, got)
			}
		}
	}
	ct, body := StaticResponse("cohere", "m", text, false, false)
	if ct != "text/plain; charset=utf-8" || string(body) != text {
		t.Errorf("unknown shape: %q %q", ct, body)
	}
}

// fixture reads a file relative to the package directory.
func fixture(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestDecodeAnswerEqualsWholeAnswer: a vendor's stream, as an app received
// it, decodes to what the same answer sent whole decodes to. The fixture
// pairs are the fake vendor's answers to one request, streamed and not;
// the fake counts the streaming flag in the prompt, so the prompt counts
// differ, and are checked against the stream's own figure.
func TestDecodeAnswerEqualsWholeAnswer(t *testing.T) {
	tests := []struct {
		shape        rewrite.Shape
		stream, json string
		input        int64 // the stream's prompt tokens, cached included
	}{
		{rewrite.OpenAI, "testdata/upstream/openai_stream_text.sse", "testdata/upstream/openai_text.json", 35},
		{rewrite.OpenAI, "testdata/upstream/openai_stream_tool.sse", "testdata/upstream/openai_tool.json", 116},
		{rewrite.OpenAI, "../../internal/fakevendor/testdata/openai_stream_usage.golden", "../../internal/fakevendor/testdata/openai_json.golden", 21},
		{rewrite.OpenAI, "../../internal/fakevendor/testdata/openai_tool_stream_usage.golden", "../../internal/fakevendor/testdata/openai_tool_json.golden", 114},
		{rewrite.Anthropic, "testdata/upstream/anthropic_stream_text.sse", "testdata/upstream/anthropic_text.json", 31},
		{rewrite.Anthropic, "testdata/upstream/anthropic_stream_tool.sse", "testdata/upstream/anthropic_tool.json", 98},
		{rewrite.Anthropic, "../../internal/fakevendor/testdata/anthropic_tool_stream.golden", "../../internal/fakevendor/testdata/anthropic_tool_json.golden", 96},
		{rewrite.Gemini, "testdata/upstream/gemini_stream_text.sse", "testdata/upstream/gemini_text.json", 19},
		{rewrite.Gemini, "testdata/upstream/gemini_stream_tool.sse", "testdata/upstream/gemini_tool.json", 91},
		{rewrite.Gemini, "../../internal/fakevendor/testdata/gemini_tool_stream_sse.golden", "../../internal/fakevendor/testdata/gemini_tool_json.golden", 92},
		{rewrite.Gemini, "../../internal/fakevendor/testdata/gemini_stream_sse.golden", "../../internal/fakevendor/testdata/gemini_json.golden", 14},
		// Gemini without alt=sse streams one JSON array.
		{rewrite.Gemini, "../../internal/fakevendor/testdata/gemini_stream_array.golden", "../../internal/fakevendor/testdata/gemini_json.golden", 14},
	}
	for _, tt := range tests {
		t.Run(tt.stream, func(t *testing.T) {
			got, err := DecodeAnswer(tt.shape, fixture(t, tt.stream), true)
			if err != nil {
				t.Fatal(err)
			}
			want, err := DecodeAnswer(tt.shape, fixture(t, tt.json), false)
			if err != nil {
				t.Fatal(err)
			}
			if got.Usage.Input != tt.input {
				t.Errorf("stream's input tokens %d; want %d", got.Usage.Input, tt.input)
			}
			want.Usage.Input, want.Usage.CachedInput = got.Usage.Input, got.Usage.CachedInput
			if !reflect.DeepEqual(normalizeAnswer(t, got), normalizeAnswer(t, want)) {
				t.Errorf("stream decodes to\n%s\nthe whole answer to\n%s", indentJSON(t, got), indentJSON(t, want))
			}
			if len(got.Parts) == 0 {
				t.Error("no parts")
			}
		})
	}
}

// normalizeAnswer compacts tool arguments, which the whole-answer decoders
// keep as the vendor spaced them.
func normalizeAnswer(t testing.TB, r *ir.Response) *ir.Response {
	t.Helper()
	c := *r
	c.Parts = append([]ir.Part(nil), r.Parts...)
	for i, p := range c.Parts {
		if p.ToolCall != nil {
			tc := *p.ToolCall
			var buf bytes.Buffer
			if err := json.Compact(&buf, tc.Arguments); err != nil {
				t.Fatalf("arguments %q: %v", tc.Arguments, err)
			}
			tc.Arguments = buf.Bytes()
			c.Parts[i].ToolCall = &tc
		}
	}
	return &c
}

func indentJSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestDecodeAnswerGathersParts: fragments join per part, thinking keeps its
// signature, a redacted block stays its own part, tool calls gather by
// index whatever the order of their fragments, usage is the latest.
func TestDecodeAnswerGathersParts(t *testing.T) {
	stream := "" +
		"event: message_start\n" + `data: {"type":"message_start","message":{"id":"msg_7","type":"message","role":"assistant","content":[],"model":"claude-x","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":5,"cache_read_input_tokens":10,"output_tokens":1}}}` + "\n\n" +
		"event: content_block_start\n" + `data: {"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}` + "\n\n" +
		"event: content_block_delta\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Let me "}}` + "\n\n" +
		"event: content_block_delta\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"think."}}` + "\n\n" +
		"event: content_block_delta\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"sig-A"}}` + "\n\n" +
		"event: content_block_stop\n" + `data: {"type":"content_block_stop","index":0}` + "\n\n" +
		"event: content_block_start\n" + `data: {"type":"content_block_start","index":1,"content_block":{"type":"redacted_thinking","data":"opaque"}}` + "\n\n" +
		"event: content_block_stop\n" + `data: {"type":"content_block_stop","index":1}` + "\n\n" +
		"event: content_block_start\n" + `data: {"type":"content_block_start","index":2,"content_block":{"type":"text","text":""}}` + "\n\n" +
		": a comment\n\n" +
		"event: ping\n" + `data: {"type":"ping"}` + "\n\n" +
		"event: content_block_delta\n" + `data: {"type":"content_block_delta","index":2,"delta":{"type":"text_delta","text":"Two "}}` + "\n\n" +
		"event: content_block_delta\n" + `data: {"type":"content_block_delta","index":2,"delta":{"type":"text_delta","text":"calls."}}` + "\n\n" +
		"event: content_block_stop\n" + `data: {"type":"content_block_stop","index":2}` + "\n\n" +
		"event: content_block_start\n" + `data: {"type":"content_block_start","index":3,"content_block":{"type":"tool_use","id":"toolu_a","name":"f","input":{}}}` + "\n\n" +
		"event: content_block_delta\n" + `data: {"type":"content_block_delta","index":3,"delta":{"type":"input_json_delta","partial_json":"{\"x\": "}}` + "\n\n" +
		"event: content_block_delta\n" + `data: {"type":"content_block_delta","index":3,"delta":{"type":"input_json_delta","partial_json":"1}"}}` + "\n\n" +
		"event: content_block_stop\n" + `data: {"type":"content_block_stop","index":3}` + "\n\n" +
		"event: content_block_start\n" + `data: {"type":"content_block_start","index":4,"content_block":{"type":"tool_use","id":"toolu_b","name":"g","input":{}}}` + "\n\n" +
		"event: content_block_delta\n" + `data: {"type":"content_block_delta","index":4,"delta":{"type":"input_json_delta","partial_json":""}}` + "\n\n" +
		"event: content_block_stop\n" + `data: {"type":"content_block_stop","index":4}` + "\n\n" +
		"event: message_delta\n" + `data: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":40}}` + "\n\n" +
		"event: message_stop\n" + `data: {"type":"message_stop"}` + "\n\n"
	got, err := DecodeAnswer(rewrite.Anthropic, []byte(stream), true)
	if err != nil {
		t.Fatal(err)
	}
	want := &ir.Response{
		ID: "msg_7", Model: "claude-x",
		Parts: []ir.Part{
			{Kind: ir.PartThinking, Text: "Let me think.", Signature: "sig-A"},
			{Kind: ir.PartThinking, Signature: "opaque"},
			{Kind: ir.PartText, Text: "Two calls."},
			{Kind: ir.PartToolCall, ToolCall: &ir.ToolCall{ID: "toolu_a", Name: "f", Arguments: json.RawMessage(`{"x":1}`)}},
			{Kind: ir.PartToolCall, ToolCall: &ir.ToolCall{ID: "toolu_b", Name: "g", Arguments: json.RawMessage(`{}`)}},
		},
		Finish: ir.FinishToolCalls,
		Usage:  ir.TokenUsage{Input: 15, Output: 40, CachedInput: 10},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got\n%s\nwant\n%s", indentJSON(t, got), indentJSON(t, want))
	}
	// The whole-answer form of the same message decodes the same.
	whole := `{"id":"msg_7","type":"message","role":"assistant","model":"claude-x","content":[` +
		`{"type":"thinking","thinking":"Let me think.","signature":"sig-A"},{"type":"redacted_thinking","data":"opaque"},` +
		`{"type":"text","text":"Two calls."},{"type":"tool_use","id":"toolu_a","name":"f","input":{"x": 1}},{"type":"tool_use","id":"toolu_b","name":"g","input":{}}],` +
		`"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":5,"cache_read_input_tokens":10,"output_tokens":40}}`
	w, err := DecodeAnswer(rewrite.Anthropic, []byte(whole), false)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(normalizeAnswer(t, w), want) {
		t.Errorf("whole answer\n%s", indentJSON(t, w))
	}

	// OpenAI: parallel calls whose fragments interleave, and created.
	oaiStream := fixture(t, "../openai/testdata/streams/parallel_tools.sse")
	got, err = DecodeAnswer(rewrite.OpenAI, oaiStream, true)
	if err != nil {
		t.Fatal(err)
	}
	if v := viewOf(t, got); v.Created != synthCreated || v.ID != "chatcmpl-3" || !reflect.DeepEqual(v.Calls, []callView{
		{ID: "call_p", Name: "get_weather", Args: `{"city":"Paris"}`},
		{ID: "call_r", Name: "get_weather", Args: `{"city":"Rome"}`},
	}) || v.Finish != ir.FinishToolCalls || v.Usage != (ir.TokenUsage{Input: 40, Output: 22}) {
		t.Errorf("openai parallel tools: %+v", v)
	}
}

// TestDecodeAnswerRefusesBrokenStreams: nothing that is not a whole,
// finished answer comes back — an error event, a cut stream, an event the
// decoder cannot read, a body that is an error envelope.
func TestDecodeAnswerRefusesBrokenStreams(t *testing.T) {
	files := map[rewrite.Shape][]string{
		rewrite.OpenAI: {"testdata/upstream/openai_stream_error.sse", "testdata/upstream/openai_stream_early_end.sse",
			"../sse/testdata/openai_error.sse", "../sse/testdata/openrouter_error.sse", "../openai/testdata/streams/error.sse", "../openai/testdata/streams/early_end.sse"},
		rewrite.Anthropic: {"testdata/upstream/anthropic_stream_error.sse", "testdata/upstream/anthropic_stream_early_end.sse", "../sse/testdata/anthropic_overloaded.sse"},
		rewrite.Gemini: {"testdata/upstream/gemini_stream_error.sse", "testdata/upstream/gemini_stream_early_end.sse",
			"../sse/testdata/gemini_error.sse", "../sse/testdata/gemini_bare_error.sse"},
	}
	for shape, fs := range files {
		for _, f := range fs {
			if r, err := DecodeAnswer(shape, fixture(t, f), true); err == nil {
				t.Errorf("%s: no error; got %+v", f, r)
			}
		}
	}
	for _, tt := range []struct {
		shape rewrite.Shape
		body  string
	}{
		{rewrite.OpenAI, "data: {not json\n\n"},
		{rewrite.Anthropic, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"x\"}}\n\n"},
		{rewrite.Gemini, "data: [1,2\n\n"},
		{rewrite.OpenAI, ""},
		{rewrite.Anthropic, ""},
		{rewrite.Gemini, ""},
		{"cohere", "data: {}\n\n"},
	} {
		if r, err := DecodeAnswer(tt.shape, []byte(tt.body), true); err == nil {
			t.Errorf("%s %q: no error; got %+v", tt.shape, tt.body, r)
		}
	}
	for shape, f := range map[rewrite.Shape]string{
		rewrite.OpenAI: "testdata/upstream/openai_error_429.json", rewrite.Anthropic: "testdata/upstream/anthropic_error_429.json", rewrite.Gemini: "testdata/upstream/gemini_error_429.json",
	} {
		if r, err := DecodeAnswer(shape, fixture(t, f), false); err == nil {
			t.Errorf("%s: error body decodes to %+v", f, r)
		}
	}
	if _, err := DecodeAnswer("cohere", []byte(`{}`), false); err == nil {
		t.Error("unknown shape: no error")
	}
}

// TestDecodeAnswerRefusesEveryCut: every prefix of a synthesized stream
// that ends before the finish event is whole is refused. From the finish
// on the answer is whole (openai-go, too, ends cleanly on a stream without
// [DONE]), unless the cut breaks a later data line that the decoder must
// read, as the app's SDK would fail on it.
func TestDecodeAnswerRefusesEveryCut(t *testing.T) {
	t.Parallel()
	finishMark := map[rewrite.Shape]string{
		rewrite.OpenAI:    `"finish_reason":"tool_calls"`,
		rewrite.Anthropic: `"type":"message_delta"`,
		rewrite.Gemini:    `"finishReason"`,
	}
	for _, app := range rewrite.Shapes {
		_, out, err := Synthesize(app, "m", synthTool, true, true)
		if err != nil {
			t.Fatal(err)
		}
		mark := bytes.Index(out, []byte(finishMark[app]))
		if mark < 0 {
			t.Fatalf("%s: no finish in %s", app, out)
		}
		finishEnd := mark + bytes.IndexByte(out[mark:], '\n') // the finish's data line ends
		for cut := 0; cut < len(out); cut++ {
			_, err := DecodeAnswer(app, out[:cut], true)
			lineStart := bytes.LastIndexByte(out[:cut], '\n') + 1
			tail := out[lineStart:cut]
			lineEnd := lineStart + bytes.IndexByte(out[lineStart:], '\n')
			brokenData := bytes.HasPrefix(tail, []byte("data: ")) && len(tail) > len("data: ") && cut < lineEnd &&
				// Anthropic's message_stop is known by its name alone.
				!bytes.HasSuffix(out[:lineStart], []byte("event: message_stop\n"))
			whole := cut >= finishEnd && !brokenData
			if whole != (err == nil) {
				t.Fatalf("%s cut at %d (finish line ends at %d): err %v\n%q", app, cut, finishEnd, err, out[:cut])
			}
		}
	}
}
