package sdkcheck

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/openai/openai-go/v3"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/detour-proxy/detour/internal/detourtest"
	"github.com/detour-proxy/detour/rewrite"
)

// TestStreamedAnswerNamesItsModelInTheTrace: a streamed answer's spans
// carry gen_ai.response.model, read from the stream's opening events in
// the upstream's shape (OpenAI's chunks, Anthropic's message_start,
// Gemini's modelVersion), as a whole answer's do from its body.
func TestStreamedAnswerNamesItsModelInTheTrace(t *testing.T) {
	fastBatches(t)
	for _, up := range []rewrite.Shape{rewrite.OpenAI, rewrite.Anthropic, rewrite.Gemini} {
		t.Run(string(up), func(t *testing.T) {
			rcv := newHTTPReceiver(t)
			v := detourtest.NewVendor(t, up, "up")
			model := map[rewrite.Shape]string{rewrite.OpenAI: "gpt-4o-2024-08-06", rewrite.Anthropic: "claude-sonnet-4-5-20250929", rewrite.Gemini: "gemini-2.5-flash"}[up]
			keyFile := filepath.Join(t.TempDir(), "key")
			if err := os.WriteFile(keyFile, []byte("vendor-key\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			h := detourtest.Start(t, fmt.Sprintf(`{
  "upstreams": {"up": {"shape": %q, "base_url": %q, "ca_file": %q, "auth": {"file": %q}, "models": {"*": %q}}},
  "routes": [{"name": "r", "match": {"host": "api.openai.com", "path": "/v1/chat/completions"}, "chain": ["up"]}],
  "telemetry": {"otlp": {"endpoint": %q, "protocol": "http/protobuf", "sample_ratio": 1}}
}`, up, v.BaseURL(), v.CAFile, keyFile, model, rcv.Endpoint))

			stream := openaiThrough(h).Chat.Completions.NewStreaming(detourtest.TestContext(t), chatParams())
			acc := openai.ChatCompletionAccumulator{}
			for stream.Next() {
				acc.AddChunk(stream.Current())
			}
			if err := stream.Err(); err != nil {
				t.Fatalf("stream through detour: %v", err)
			}
			if len(acc.Choices) == 0 || acc.Choices[0].Message.Content != "Hello from up." {
				t.Fatalf("streamed answer %+v; want the upstream's", acc.Choices)
			}
			spans := rcv.waitSpans(t, 2)
			if len(spans) != 2 {
				t.Fatalf("got %d spans; want a request and an attempt span", len(spans))
			}
			for _, s := range spans {
				// The request asks for the app's model; the attempt for
				// the one the upstream's models entry maps it to.
				what, asked := "attempt span", model
				if s.Kind == tracepb.Span_SPAN_KIND_SERVER {
					what, asked = "request span", "gpt-4o"
				}
				checkAttrs(t, what, attrs(s.Attributes), map[string]string{"gen_ai.response.model": model, "gen_ai.request.model": asked})
			}
		})
	}
}
