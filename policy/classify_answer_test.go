package policy

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/detour-proxy/detour/rewrite"
)

// TestClassifyAnswerJSON holds Classify's check of a 2xx answer to
// json.Valid's verdict on a long answer (a model's text is one long
// string, which the check reads a word at a time) cut at every length and
// spoilt at every position: a usable answer is ClassNone, anything else a
// bad_response "200 not json".
func TestClassifyAnswerJSON(t *testing.T) {
	t.Parallel()
	text := strings.Repeat(`word \"quoted\" é 😀 \u00e9 \\ `, 12) + strings.Repeat("x", 37)
	answer := `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"` +
		text + `"},"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":200,"total_tokens":209}}`
	if !json.Valid([]byte(answer)) {
		t.Fatal("the test's answer is not JSON")
	}
	check := func(body []byte) {
		t.Helper()
		v := Classify(Outcome{Shape: rewrite.OpenAI, Status: 200, Body: body}, classifyNow)
		trimmed := bytes.TrimSpace(body)
		switch {
		case len(trimmed) == 0:
			if v.Class != ClassBadResponse || v.Reason != "200 empty body" {
				t.Fatalf("%q: %s %q; want bad_response \"200 empty body\"", body, v.Class, v.Reason)
			}
		case trimmed[0] == '{' && json.Valid(body):
			if v.Class != ClassNone {
				t.Fatalf("%q: %s %q; want a usable answer", body, v.Class, v.Reason)
			}
		default:
			if v.Class != ClassBadResponse || v.Reason != "200 not json" {
				t.Fatalf("%q: %s %q; want bad_response \"200 not json\"", body, v.Class, v.Reason)
			}
		}
	}
	b := []byte(answer)
	for n := 0; n <= len(b); n++ {
		check(b[:n])
	}
	for i := range b {
		for _, c := range []byte{'"', '\\', '\n', 0x01, 0x1f, 0x7f, 0xff} {
			spoilt := bytes.Clone(b)
			spoilt[i] = c
			check(spoilt)
		}
	}
}
