package translate

import (
	"bytes"
	"testing"

	"github.com/detour-proxy/detour/internal/fakevendor"
	"github.com/detour-proxy/detour/rewrite"
	"github.com/detour-proxy/detour/rewrite/ir"
)

// Streams that end or go on where they should not.

// TestEarlyEndInToolArguments cuts an upstream stream in the middle of a
// tool call's arguments (the fake vendor's stream_eof: no closing events)
// and closes the translator. The app must not be told to run a call whose
// arguments were cut off: either what it got parses into the arguments the
// model sent, or the answer does not end as a tool-call turn.
func TestEarlyEndInToolArguments(t *testing.T) {
	t.Skip("BUG (latent): Close after a cut inside a tool call's arguments ends the app's stream as a finished tool-call turn — rewrite/openai/stream_encode.go Close/finish sends finish_reason tool_calls after the fragment `{\"city\":`; rewrite/anthropic/stream_encode.go Close/closeBlock stops the block and sends stop_reason tool_use after the same fragment; rewrite/gemini/stream_encode.go flushTool replaces the unparseable arguments by {} and ends with STOP. The proxy sends Stream.Error on a cut stream, not Close, so it does not reach apps today")
	for _, p := range pairs {
		if p.to == rewrite.Gemini {
			continue // Gemini sends calls whole: there is no cut inside one
		}
		t.Run(p.String(), func(t *testing.T) {
			req := decodeApp(t, p.from, true)
			req.Messages = req.Messages[:1] // the fake answers with a call
			up, err := EncodeRequest(req, p.to, ir.EncodeOptions{Model: upstreamModel[p.to]})
			if err != nil {
				t.Fatal(err)
			}
			cut := askFake(t, p.to, up, fakevendor.Options{}, fakevendor.Fault{Kind: fakevendor.StreamEOF})
			if !bytes.Contains(cut, []byte(`{\"city\":"`)) || bytes.Contains(cut, []byte(`\"Paris\"}`)) {
				t.Fatalf("the fake's stream is not cut inside the arguments:\n%s", cut)
			}
			run := runStream(t, req, p, cut)
			got := checkStream(t, p.from, run.out, streamCheck{includeUsage: req.IncludeUsage, model: appModel[p.from]})
			if got.Finish != toolReason[p.from] {
				return
			}
			for _, tc := range got.Tools {
				if tc.Args != `{"city":"Paris"}` {
					t.Errorf("finish %q with tool call %s(%s): the app runs a call whose arguments were cut off\n%s", got.Finish, tc.Name, tc.Args, run.out)
				}
			}
		})
	}
}

// TestGeminiAppNothingAfterFinish sends a Gemini app's stream content that
// an OpenAI-compatible upstream sent after its finish chunk (which carried
// the usage, as vLLM and DeepSeek send it). Gemini's streams end with the
// finishReason chunk, and apps read the finish from the last chunk: like
// the OpenAI encoder, which drops deltas after its finish chunk, nothing
// may follow it.
func TestGeminiAppNothingAfterFinish(t *testing.T) {
	const upstream = `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"role":"assistant","content":"Hi"},"finish_reason":null}]}

data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}

data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"content":" there"},"finish_reason":null}]}

data: [DONE]

`
	p := pair{rewrite.Gemini, rewrite.OpenAI}
	run := runStream(t, decodeApp(t, p.from, true), p, []byte(upstream))
	got := checkStream(t, p.from, run.out, streamCheck{model: appModel[p.from], strict: true})
	if got.Finish != "STOP" {
		t.Errorf("finish %q; want STOP", got.Finish)
	}
}
