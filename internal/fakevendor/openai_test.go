package fakevendor

import (
	"strings"
	"testing"

	"github.com/detour-proxy/detour/rewrite"
)

func TestOpenAIStreamUsageOnlyWhenAsked(t *testing.T) {
	t.Parallel()
	_, srv := serve(t, rewrite.OpenAI, Options{})
	with := parseSSE(t, mustPost(t, srv.URL+"/v1/chat/completions",
		`{"model":"gpt-4o","stream":true,"stream_options":{"include_usage":true}}`).body)
	without := parseSSE(t, mustPost(t, srv.URL+"/v1/chat/completions", `{"model":"gpt-4o","stream":true}`).body)

	// role, 3 deltas, finish, [DONE]; plus the usage chunk when asked.
	if len(without) != 6 || len(with) != 7 {
		t.Fatalf("events: %d without usage (want 6), %d with (want 7)", len(without), len(with))
	}
	for _, e := range without {
		if strings.Contains(e.data, `"usage"`) {
			t.Errorf("chunk without include_usage carries usage: %s", e.data)
		}
	}
	for _, e := range with[:5] {
		if !strings.HasSuffix(e.data, `,"usage":null}`) {
			t.Errorf("chunk with include_usage lacks \"usage\":null: %s", e.data)
		}
	}
	if u := with[5].data; !strings.Contains(u, `"choices":[],"usage":{"prompt_tokens":`) {
		t.Errorf("usage chunk = %s", u)
	}
	if with[6].data != "[DONE]" || without[5].data != "[DONE]" {
		t.Errorf("streams do not end with [DONE]")
	}
}
