package translate

import (
	"bytes"
	"testing"

	"github.com/detour-proxy/detour/rewrite"
)

// cachedUpstream is, per upstream shape, a short answer whose usage states
// 1200 prompt tokens of which 1000 were cached and 5 output tokens, as each
// vendor spells it: Anthropic's input_tokens excludes the cache, OpenAI's
// and Gemini's prompt counts include it.
var cachedUpstream = map[rewrite.Shape]struct{ stream, body string }{
	rewrite.OpenAI: {
		stream: `data: {"id":"chatcmpl-c","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"role":"assistant","content":"Hi"},"finish_reason":null}]}

data: {"id":"chatcmpl-c","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}

data: {"id":"chatcmpl-c","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[],"usage":{"prompt_tokens":1200,"completion_tokens":5,"total_tokens":1205,"prompt_tokens_details":{"cached_tokens":1000}}}

data: [DONE]

`,
		body: `{"id":"chatcmpl-c","object":"chat.completion","created":1,"model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"Hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1200,"completion_tokens":5,"total_tokens":1205,"prompt_tokens_details":{"cached_tokens":1000}}}`,
	},
	rewrite.Anthropic: {
		stream: `event: message_start
data: {"type":"message_start","message":{"id":"msg_c","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":200,"cache_read_input_tokens":1000,"cache_creation_input_tokens":0,"output_tokens":1}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":5}}

event: message_stop
data: {"type":"message_stop"}

`,
		body: `{"id":"msg_c","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"Hi"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":200,"cache_read_input_tokens":1000,"cache_creation_input_tokens":0,"output_tokens":5}}`,
	},
	rewrite.Gemini: {
		stream: `data: {"candidates":[{"content":{"role":"model","parts":[{"text":"Hi"}]},"index":0}],"usageMetadata":{"promptTokenCount":1200,"cachedContentTokenCount":1000,"totalTokenCount":1200},"modelVersion":"gemini-2.5-flash","responseId":"c"}

data: {"candidates":[{"content":{"role":"model","parts":[{"text":""}]},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":1200,"cachedContentTokenCount":1000,"candidatesTokenCount":5,"totalTokenCount":1205},"modelVersion":"gemini-2.5-flash","responseId":"c"}

`,
		body: `{"candidates":[{"content":{"role":"model","parts":[{"text":"Hi"}]},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":1200,"cachedContentTokenCount":1000,"candidatesTokenCount":5,"totalTokenCount":1205},"modelVersion":"gemini-2.5-flash","responseId":"c"}`,
	},
}

// cachedField is how each app shape states 1000 cached prompt tokens.
var cachedField = map[rewrite.Shape]string{
	rewrite.OpenAI:    `"cached_tokens":1000`,
	rewrite.Anthropic: `"cache_read_input_tokens":1000`,
	rewrite.Gemini:    `"cachedContentTokenCount":1000`,
}

// TestCachedUsageCrossesVendors checks usage both ways with cached tokens:
// the app's SDK counts the same prompt and output tokens the upstream
// reported, and sees the cached part in its own vendor's field.
func TestCachedUsageCrossesVendors(t *testing.T) {
	for _, p := range pairs {
		up := cachedUpstream[p.to]
		t.Run(p.String()+"/json", func(t *testing.T) {
			out, err := Response(decodeApp(t, p.from, false), p.from, p.to, []byte(up.body))
			if err != nil {
				t.Fatal(err)
			}
			got := summarizeResponse(t, p.from, out, appModel[p.from])
			if got.Input != 1200 || got.Output != 5 || !bytes.Contains(out, []byte(cachedField[p.from])) {
				t.Errorf("usage %d in / %d out; want 1200 / 5 with %s\n%s", got.Input, got.Output, cachedField[p.from], out)
			}
		})
		t.Run(p.String()+"/stream", func(t *testing.T) {
			req := decodeApp(t, p.from, true)
			run := runStream(t, req, p, []byte(up.stream))
			got := checkStream(t, p.from, run.out, streamCheck{includeUsage: req.IncludeUsage, model: appModel[p.from], strict: true})
			if got.Input != 1200 || got.Output != 5 || !bytes.Contains(run.out, []byte(cachedField[p.from])) {
				t.Errorf("usage %d in / %d out; want 1200 / 5 with %s\n%s", got.Input, got.Output, cachedField[p.from], run.out)
			}
		})
	}
}
