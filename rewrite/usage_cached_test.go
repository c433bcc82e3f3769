package rewrite

import "testing"

func TestExtractCachedInput(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		shape Shape
		data  string
		want  int64
		ok    bool
	}{
		{"openai body", OpenAI, `{"usage":{"prompt_tokens":12,"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":4}}}`, 4, true},
		{"openai stream usage chunk", OpenAI, `{"choices":[],"usage":{"prompt_tokens":2006,"prompt_tokens_details":{"cached_tokens":1920,"audio_tokens":0}}}`, 1920, true},
		{"openai no cache", OpenAI, `{"usage":{"prompt_tokens":12,"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":0}}}`, 0, false},
		{"openai no details", OpenAI, `{"usage":{"prompt_tokens":12}}`, 0, false},
		{"openai usage null", OpenAI, `{"usage":null}`, 0, false},
		{"anthropic message", Anthropic, `{"type":"message","usage":{"input_tokens":10,"cache_read_input_tokens":300,"output_tokens":5}}`, 300, true},
		{"anthropic message_start", Anthropic, `{"type":"message_start","message":{"usage":{"input_tokens":10,"cache_read_input_tokens":30}}}`, 30, true},
		{"anthropic delta", Anthropic, `{"type":"message_delta","usage":{"output_tokens":15}}`, 0, false},
		{"gemini", Gemini, `{"candidates":[],"usageMetadata":{"promptTokenCount":100,"cachedContentTokenCount":64}}`, 64, true},
		{"gemini none", Gemini, `{"usageMetadata":{"promptTokenCount":100}}`, 0, false},
		{"text mentioning usage", OpenAI, `{"choices":[{"delta":{"content":"usage"}}]}`, 0, false},
	} {
		got, ok := ExtractCachedInput(tc.shape, []byte(tc.data))
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s: got %d, %v; want %d, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}
