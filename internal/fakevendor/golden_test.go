package fakevendor

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/detour-proxy/detour/internal/testsupport"
	"github.com/detour-proxy/detour/rewrite"
)

// TestGoldenAnswers pins the exact bytes of every successful answer. Run
// with -update after a deliberate change, and review the diff against
// docs/vendors.md#whole-answers and docs/vendors.md#streams.
func TestGoldenAnswers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		shape rewrite.Shape
		path  string
		body  string
	}{
		{"openai_json", rewrite.OpenAI, "/v1/chat/completions", `{"model":"gpt-4o","messages":[{"role":"user","content":"Say hi"}]}`},
		{"openai_stream", rewrite.OpenAI, "/v1/chat/completions", `{"model":"gpt-4o","stream":true,"messages":[]}`},
		{"openai_stream_usage", rewrite.OpenAI, "/v1/chat/completions", `{"model":"gpt-4o","stream":true,"stream_options":{"include_usage":true},"messages":[]}`},
		{"anthropic_json", rewrite.Anthropic, "/v1/messages", `{"model":"claude-sonnet-4-5","max_tokens":64,"messages":[]}`},
		{"anthropic_stream", rewrite.Anthropic, "/v1/messages", `{"model":"claude-sonnet-4-5","max_tokens":64,"stream":true,"messages":[]}`},
		{"gemini_json", rewrite.Gemini, "/v1beta/models/gemini-2.5-flash:generateContent", `{"contents":[{"role":"user","parts":[{"text":"Say hi"}]}]}`},
		{"gemini_stream_sse", rewrite.Gemini, "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse", `{"contents":[{"role":"user","parts":[{"text":"Say hi"}]}]}`},
		{"gemini_stream_array", rewrite.Gemini, "/v1beta/models/gemini-2.5-flash:streamGenerateContent", `{"contents":[{"role":"user","parts":[{"text":"Say hi"}]}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, srv := serve(t, tc.shape, Options{Name: "alpha"})
			checkGolden(t, tc.name, mustPost(t, srv.URL+tc.path, tc.body).body)
		})
	}
}

// checkGolden compares got with testdata/<name>.golden, first rewriting the
// file under -update.
func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	testsupport.Golden(t, filepath.Join("testdata", name+".golden"), got)
}

// TestStreamsMatchTranslationExamples replays the minimal example streams of
// docs/vendors.md#streams (OpenAI, Anthropic) with the same answer "Hi!" and created time.
// Only the ids and the token counts (the fake's own deterministic ones)
// differ from the document's text.
func TestStreamsMatchTranslationExamples(t *testing.T) {
	t.Parallel()
	const openaiWant = `data: {"id":"chatcmpl-fake000001","object":"chat.completion.chunk","created":1735689600,"model":"gpt-4o","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-fake000001","object":"chat.completion.chunk","created":1735689600,"model":"gpt-4o","choices":[{"index":0,"delta":{"content":"Hi!"},"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-fake000001","object":"chat.completion.chunk","created":1735689600,"model":"gpt-4o","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":null}

data: {"id":"chatcmpl-fake000001","object":"chat.completion.chunk","created":1735689600,"model":"gpt-4o","choices":[],"usage":{"prompt_tokens":PROMPT,"completion_tokens":1,"total_tokens":TOTAL}}

data: [DONE]

`
	const anthropicWant = `event: message_start
data: {"type":"message_start","message":{"id":"msg_fake000001","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":PROMPT,"output_tokens":1}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}

event: ping
data: {"type":"ping"}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi!"}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":1}}

event: message_stop
data: {"type":"message_stop"}

`
	for _, tc := range []struct {
		shape      rewrite.Shape
		path, body string
		want       string
	}{
		{rewrite.OpenAI, "/v1/chat/completions", `{"model":"gpt-4o","stream":true,"stream_options":{"include_usage":true}}`, openaiWant},
		{rewrite.Anthropic, "/v1/messages", `{"model":"claude-sonnet-4-5","stream":true}`, anthropicWant},
	} {
		t.Run(string(tc.shape), func(t *testing.T) {
			_, srv := serve(t, tc.shape, Options{Text: "Hi!", Chunks: 1})
			prompt := len(tc.body) / 4
			want := strings.NewReplacer("PROMPT", strconv.Itoa(prompt), "TOTAL", strconv.Itoa(prompt+1)).Replace(tc.want)
			if got := mustPost(t, srv.URL+tc.path, tc.body).body; string(got) != want {
				t.Errorf("stream:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}
