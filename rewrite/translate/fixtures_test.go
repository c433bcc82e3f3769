package translate

import (
	"path/filepath"
	"testing"

	"github.com/detour-proxy/detour/internal/fakevendor"
	"github.com/detour-proxy/detour/rewrite"
)

// TestUpstreamFixturesAreFakeVendorAnswers says where testdata/upstream
// comes from: each file is what internal/fakevendor, which is kept byte-exact
// with the vendors (its package doc), answers a small request, normally or
// with a fault. go test -update rewrites them with the golden files, so a
// change of the fake's wire format reaches the translators' goldens.
func TestUpstreamFixturesAreFakeVendorAnswers(t *testing.T) {
	opts := fakevendor.Options{Text: fixtureText, ParallelTools: true, GeminiIDs: true}
	for _, up := range rewrite.Shapes {
		for _, tc := range []struct {
			file         string
			stream, tool bool
			fault        fakevendor.Fault
		}{
			{"text.json", false, false, fakevendor.Fault{}},
			{"tool.json", false, true, fakevendor.Fault{}},
			{"stream_text.sse", true, false, fakevendor.Fault{}},
			{"stream_tool.sse", true, true, fakevendor.Fault{}},
			{"stream_early_end.sse", true, false, fakevendor.Fault{Kind: fakevendor.StreamEOF}},
			{"stream_error.sse", true, false, fakevendor.Fault{Kind: fakevendor.StreamErrorMid}},
		} {
			name := string(up) + "_" + tc.file
			t.Run(name, func(t *testing.T) {
				got := askFake(t, up, fixtureRequest(up, tc.stream, tc.tool), opts, tc.fault)
				checkGolden(t, filepath.Join("testdata", "upstream", name), got)
			})
		}
		t.Run(string(up)+"_error_429.json", func(t *testing.T) {
			_, got := fakevendor.ErrorBody(up, fakevendor.Fault{Kind: fakevendor.Status, Class: fakevendor.ClassRateLimit}, upstreamModel[up], "req_fake000001")
			checkGolden(t, filepath.Join("testdata", "upstream", string(up)+"_error_429.json"), got)
		})
	}
}

// fixtureRequest is the request the upstream fixtures answer: a question,
// and with tool two declared tools (the fake calls both).
func fixtureRequest(up rewrite.Shape, stream, tool bool) Upstream {
	const question = "Weather and time in Paris?"
	var u Upstream
	switch up {
	case rewrite.OpenAI:
		u.Path = "/chat/completions"
		body := `{"model":"gpt-4o"`
		if stream {
			body += `,"stream":true,"stream_options":{"include_usage":true}`
		}
		body += `,"messages":[{"role":"user","content":"` + question + `"}]`
		if tool {
			body += `,"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}},{"type":"function","function":{"name":"get_time","parameters":{"type":"object","properties":{"tz":{"type":"string"},"utc":{"type":"boolean"}},"required":["tz","utc"]}}}]`
		}
		u.Body = []byte(body + `}`)
	case rewrite.Anthropic:
		u.Path = "/v1/messages"
		body := `{"model":"claude-sonnet-4-5","max_tokens":64`
		if stream {
			body += `,"stream":true`
		}
		body += `,"messages":[{"role":"user","content":"` + question + `"}]`
		if tool {
			body += `,"tools":[{"name":"get_weather","input_schema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}},{"name":"get_time","input_schema":{"type":"object","properties":{"tz":{"type":"string"},"utc":{"type":"boolean"}},"required":["tz","utc"]}}]`
		}
		u.Body = []byte(body + `}`)
	case rewrite.Gemini:
		u.Path = "/v1beta/models/gemini-2.5-flash:generateContent"
		if stream {
			u.Path, u.RawQuery = "/v1beta/models/gemini-2.5-flash:streamGenerateContent", "alt=sse"
		}
		body := `{"contents":[{"role":"user","parts":[{"text":"` + question + `"}]}]`
		if tool {
			body += `,"tools":[{"functionDeclarations":[{"name":"get_weather","parameters":{"type":"OBJECT","properties":{"city":{"type":"STRING"}},"required":["city"]}},{"name":"get_time","parameters":{"type":"OBJECT","properties":{"tz":{"type":"STRING"},"utc":{"type":"BOOLEAN"}},"required":["tz","utc"]}}]}]`
		}
		u.Body = []byte(body + `}`)
	}
	return u
}
