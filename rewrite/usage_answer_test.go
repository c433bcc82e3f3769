package rewrite

import "testing"

// answerUsageSeeds are answers and events with usage in every shape's
// place for it, and the ways a walk can get it wrong: duplicate keys (the
// last wins), an escaped key, "usage" inside a string, nesting, spaces.
var answerUsageSeeds = []string{
	`{"usage":{"prompt_tokens":12,"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":4}}}`,
	`{"id":"c1","choices":[{"index":0,"message":{"role":"assistant","content":"the \"usage\": {\"prompt_tokens\":9} is \\ here"}}],"usage":{"prompt_tokens":9,"completion_tokens":200,"total_tokens":209}}`,
	`{"usage":{"prompt_tokens":1,"completion_tokens":1},"usage":{"prompt_tokens":7,"completion_tokens":8}}`,
	`{"usag\u0065":{"prompt_tokens":5,"completion_tokens":6}}`,
	` { "usage" : { "prompt_tokens" : 3 , "completion_tokens" : 4 } } `,
	`{"usage":null}`, `{"usage":{}}`, `{"choices":[{"delta":{"content":"usage"}}]}`,
	`{"type":"message","usage":{"input_tokens":10,"cache_read_input_tokens":300,"output_tokens":5}}`,
	`{"type":"message_start","message":{"usage":{"input_tokens":10,"cache_read_input_tokens":30}}}`,
	`{"type":"message_delta","usage":{"output_tokens":15}}`,
	`{"candidates":[{"content":{"parts":[{"text":"usageMetadata"}]}}],"usageMetadata":{"promptTokenCount":100,"candidatesTokenCount":7,"cachedContentTokenCount":64}}`,
	`{"usage":{"input_tokens":3,"output_tokens":4,"input_tokens_details":{"cached_tokens":2}}}`,
	`[{"usage":{"prompt_tokens":1}}]`, `"usage"`,
}

// TestExtractAnswerUsage: on valid JSON, ExtractAnswerUsage reads what
// ExtractUsageAndCached reads, in every shape.
func TestExtractAnswerUsage(t *testing.T) {
	t.Parallel()
	for _, s := range answerUsageSeeds {
		checkAnswerUsage(t, []byte(s))
	}
}

func FuzzExtractAnswerUsage(f *testing.F) {
	for _, s := range answerUsageSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(checkAnswerUsage)
}

// answerShapes are the shapes an answer can be in.
var answerShapes = append([]Shape{OpenAIResponses, Bedrock}, Shapes...)

func checkAnswerUsage(t *testing.T, data []byte) {
	if !ValidJSON(data) {
		// Not its input; it must still not panic.
		for _, shape := range answerShapes {
			ExtractAnswerUsage(shape, data)
		}
		return
	}
	for _, shape := range answerShapes {
		u, ok, c, cok := ExtractAnswerUsage(shape, data)
		wu, wok, wc, wcok := ExtractUsageAndCached(shape, data)
		if u != wu || ok != wok || c != wc || cok != wcok {
			t.Fatalf("%s %q: ExtractAnswerUsage = %+v %v %d %v; ExtractUsageAndCached = %+v %v %d %v", shape, data, u, ok, c, cok, wu, wok, wc, wcok)
		}
	}
}
