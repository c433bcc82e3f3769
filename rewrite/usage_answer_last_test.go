package rewrite

import "testing"

// lastUsageSeeds are OpenAI answers whose usage ExtractAnswerUsage reads
// from the end (the usage their last member): what that read and the
// one walk over the usage object must still agree on with the forward
// walk.
var lastUsageSeeds = []string{
	string(fakeAnswer),
	`{"usage":{"prompt_tokens":1},"choices":[],"usage":{"prompt_tokens":2,"completion_tokens":3}}`,
	`{"usage":{"prompt_tokens":1},"us\u0061ge":{"prompt_tokens":2}}`,
	`{"choices":[{"message":{"content":"\"usage\":{\"prompt_tokens\":9}}"}}],"usage":{"prompt_tokens":4,"completion_tokens":5}}`,
	`{"usage":{"prompt_tokens":1,"prompt_tokens":6,"completion_tokens":2.5}}`,
	`{"usage":{"prompt_tokens":"7","completion_tokens":null}}`,
	`{"usage":{"prompt_tokens":3,"prompt_tokens_details":null}}`,
	`{"usage":{"prompt_tokens":3,"prompt_tokens_details":{"cached_tokens":0}}}`,
	`{"usage":{"prompt_tokens":3,"prompt_tokens_details":{"cached_tokens":2,"cached_tokens":5}}}`,
	`{"usage":{"prompt_tokens":3,"prompt_tokens_details":{"cached_tokens":-1}}}`,
	`{"usage":{"prompt_tokens":3,"prompt_tokens_details":{"audio_tokens":1}}}`,
	`{"usage":{"prompt_tokens":3,"prompt_tokens_details":[1]}}`,
	`{"usage":{"prompt_tokens_details":{"cached_tokens":4},"prompt_tokens_details":{}}}`,
	`{"usage":[]}`, `{"usage":"x"}`, `{"usage":7}`, `{"a":1,"usage":true}`, ` {"usage" : { } } `,
	`{"id":"x","usage":{"completion_tokens":1},"model":"m"}`,
}

func TestExtractAnswerUsageFromTheEnd(t *testing.T) {
	t.Parallel()
	for _, s := range lastUsageSeeds {
		checkAnswerUsage(t, []byte(s))
	}
}
