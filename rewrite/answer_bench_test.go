package rewrite

import (
	"strings"
	"testing"
)

// fakeAnswer is the fake vendor's OpenAI answer that the load harness's
// requests get: 200 words of content and its usage, 1303 bytes.
var fakeAnswer = []byte(`{"id":"chatcmpl-fake000001","object":"chat.completion","created":1796181398,"model":"gpt-4o",` +
	`"choices":[{"index":0,"message":{"role":"assistant","content":"` + strings.TrimSpace(strings.Repeat("word ", 200)) +
	`","refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"stop"}],` +
	`"usage":{"prompt_tokens":17,"completion_tokens":200,"total_tokens":217}}`)

// BenchmarkAnswerChecks is what every non-stream answer costs detour's
// checks: Classify's validation, then the usage read from it.
func BenchmarkAnswerChecks(b *testing.B) {
	b.Run("ValidJSON", func(b *testing.B) {
		b.SetBytes(int64(len(fakeAnswer)))
		for b.Loop() {
			if !ValidJSON(fakeAnswer) {
				b.Fatal("not valid")
			}
		}
	})
	b.Run("ExtractAnswerUsage", func(b *testing.B) {
		b.SetBytes(int64(len(fakeAnswer)))
		for b.Loop() {
			if u, ok, _, _ := ExtractAnswerUsage(OpenAI, fakeAnswer); !ok || u.Output != 200 {
				b.Fatal(u, ok)
			}
		}
	})
}
