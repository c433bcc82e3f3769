package rewrite

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/detour-proxy/detour/rewrite/sse"
)

var usageShapes = []Shape{OpenAI, Anthropic, Gemini, OpenAIResponses, Bedrock}

// checkUsageAndCached asserts that one scan says what the two functions it
// stands for say.
func checkUsageAndCached(t *testing.T, shape Shape, data []byte) {
	t.Helper()
	wu, wok := ExtractUsage(shape, data)
	wc, wcok := ExtractCachedInput(shape, data)
	u, ok, c, cok := ExtractUsageAndCached(shape, data)
	if u != wu || ok != wok || c != wc || cok != wcok {
		t.Errorf("%s %q: ExtractUsageAndCached = %+v %v %d %v; ExtractUsage, ExtractCachedInput = %+v %v %d %v",
			shape, data, u, ok, c, cok, wu, wok, wc, wcok)
	}
}

func TestExtractUsageAndCachedIsBothExtractions(t *testing.T) {
	t.Parallel()
	bodies := []string{
		`{"usage":{"prompt_tokens":12,"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":4}}}`,
		`{"choices":[],"usage":{"prompt_tokens":2006,"prompt_tokens_details":{"cached_tokens":1920,"audio_tokens":0}}}`,
		`{"usage":null}`, `{"usage":{}}`, `{"usage":[1]}`, `{"usage":{"prompt_tokens":1}`, `[]`, ``, `usage`,
		`{"type":"message","usage":{"input_tokens":10,"cache_read_input_tokens":300,"output_tokens":5}}`,
		`{"type":"message_start","message":{"usage":{"input_tokens":10,"cache_read_input_tokens":30}}}`,
		`{"type":"message_start","message":{"id":"m"},"usage":{"input_tokens":1}}`,
		`{"usageMetadata":{"promptTokenCount":7,"candidatesTokenCount":2,"cachedContentTokenCount":5}}`,
		`{"type":"response.completed","response":{"usage":{"input_tokens":9,"output_tokens":4,"input_tokens_details":{"cached_tokens":3}}}}`,
		`{"usage":{"inputTokens":3,"outputTokens":2}}`,
		`{"usage":{"prompt_tokens":1},"usage":{"prompt_tokens":2}}`,
	}
	for _, shape := range usageShapes {
		for _, b := range bodies {
			checkUsageAndCached(t, shape, []byte(b))
		}
	}
	// Every event of the recorded vendor streams.
	var files []string
	for _, glob := range []string{"sse/testdata/*.sse", "*/testdata/*.sse", "responses/testdata/*.sse"} {
		m, _ := filepath.Glob(glob)
		files = append(files, m...)
	}
	if len(files) == 0 {
		t.Fatal("no recorded streams found")
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		rd := sse.NewReader(bytes.NewReader(b))
		for {
			ev, err := rd.Next()
			if err != nil {
				break
			}
			for _, shape := range usageShapes {
				checkUsageAndCached(t, shape, ev.Data)
			}
		}
	}
}

func FuzzExtractUsageAndCached(f *testing.F) {
	f.Add(`{"usage":{"prompt_tokens":12,"prompt_tokens_details":{"cached_tokens":4}}}`, 0)
	f.Add(`{"type":"message_start","message":{"usage":{"input_tokens":10,"cache_read_input_tokens":30}}}`, 1)
	f.Add(`{"usageMetadata":{"promptTokenCount":7,"cachedContentTokenCount":5}}`, 2)
	f.Fuzz(func(t *testing.T, data string, shape int) {
		checkUsageAndCached(t, usageShapes[uint(shape)%uint(len(usageShapes))], []byte(data))
	})
}
