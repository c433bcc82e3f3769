package rewrite

import "testing"

// TestExtractUsageOutOfRange: a token count too big for an int64 is one
// detour cannot read (0), never a wrapped-around number. 20000000000000000000
// used to wrap to 1553255926290448384 while being read digit by digit.
func TestExtractUsageOutOfRange(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		shape Shape
		data  string
	}{
		{OpenAI, `{"usage":{"prompt_tokens":20000000000000000000,"completion_tokens":99999999999999999999}}`},
		{Anthropic, `{"type":"message_delta","usage":{"input_tokens":20000000000000000000,"output_tokens":99999999999999999999}}`},
		{Gemini, `{"usageMetadata":{"promptTokenCount":20000000000000000000,"candidatesTokenCount":99999999999999999999}}`},
	} {
		u, ok := ExtractUsage(tt.shape, []byte(tt.data))
		if !ok || u != (Usage{}) {
			t.Errorf("ExtractUsage(%s, %s) = %+v, %v; want {0 0}, true", tt.shape, tt.data, u, ok)
		}
	}
}
