package fakevendor

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/detour-proxy/detour/rewrite"
)

// toolOutput is what the tests' tools return: JSON with quotes, a non-ASCII
// character and HTML characters, so that any mangling on the way shows.
const toolOutput = `{"temp":21,"unit":"°C","sky":"<clear> & dry"}`

func TestGeminiToolRoundTrip(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		opts   Options
		stream bool
	}{
		{"json", Options{}, false},
		{"stream", Options{}, true},
		{"json ids", Options{GeminiIDs: true}, false},
		{"stream ids", Options{GeminiIDs: true}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, srv := serve(t, rewrite.Gemini, tc.opts)
			// decode reads the answer: the one JSON body, or the SSE events.
			decode := func(body []byte) []geminiToolAnswer {
				if !tc.stream {
					var a geminiToolAnswer
					if err := json.Unmarshal(body, &a); err != nil {
						t.Fatalf("%v: %s", err, body)
					}
					return []geminiToolAnswer{a}
				}
				var out []geminiToolAnswer
				for _, e := range parseSSE(t, body) {
					var a geminiToolAnswer
					if err := json.Unmarshal([]byte(e.data), &a); err != nil {
						t.Fatalf("%v: %s", err, e.data)
					}
					out = append(out, a)
				}
				return out
			}

			// 1. The call: whole, in one chunk, with finishReason STOP.
			chunks := decode(mustPost(t, srv.URL+toolPath(rewrite.Gemini, tc.stream), toolBody(rewrite.Gemini, tc.stream, "")).body)
			if len(chunks) != 1 || len(chunks[0].Candidates) != 1 {
				t.Fatalf("%d chunks; want the call in one", len(chunks))
			}
			cand := chunks[0].Candidates[0]
			if cand.FinishReason != "STOP" || cand.Content.Role != "model" || len(cand.Content.Parts) != 1 || cand.Content.Parts[0].FunctionCall == nil {
				t.Fatalf("candidate = %+v; want one functionCall part, STOP", cand)
			}
			part := cand.Content.Parts[0]
			fc := part.FunctionCall
			if fc.Name != "get_weather" || string(fc.Args) != weatherArgs {
				t.Errorf("functionCall = %s %s", fc.Name, fc.Args)
			}
			if u := chunks[0].UsageMetadata; u.CandidatesTokenCount != (len("get_weather")+len(weatherArgs))/4+1 {
				t.Errorf("usage = %+v", u)
			}
			if (fc.ID != nil) != tc.opts.GeminiIDs || (part.ThoughtSignature != nil) != tc.opts.GeminiIDs {
				t.Errorf("id %v, thoughtSignature %v; want both iff GeminiIDs", fc.ID, part.ThoughtSignature)
			}

			// 2. The result: echo the model turn (with its id and
			// signature), then the function response.
			modelTurn, _ := json.Marshal(map[string]any{"role": "model", "parts": []any{part}})
			response := map[string]any{"name": fc.Name, "response": map[string]any{"output": toolOutput}}
			if fc.ID != nil {
				response["id"] = *fc.ID
			}
			userTurn, _ := json.Marshal(map[string]any{"role": "user", "parts": []any{map[string]any{"functionResponse": response}}})
			body := `{` + geminiTools + `,"contents":[{"role":"user","parts":[{"text":"Weather in Paris?"}]},` + string(modelTurn) + `,` + string(userTurn) + `]}`
			var text strings.Builder
			chunks = decode(mustPost(t, srv.URL+toolPath(rewrite.Gemini, tc.stream), body).body)
			for _, c := range chunks {
				for _, p := range c.Candidates[0].Content.Parts {
					if p.FunctionCall != nil {
						t.Errorf("answer to the result calls %s", p.FunctionCall.Name)
					}
					text.WriteString(p.Text)
				}
			}
			if want := "The tool said: " + toolOutput; text.String() != want || chunks[len(chunks)-1].Candidates[0].FinishReason != "STOP" {
				t.Errorf("answer %q; want %q with STOP", text.String(), want)
			}

			r := v.Requests()[1]
			want := []ToolResult{{Name: "get_weather", Content: toolOutput}}
			if tc.opts.GeminiIDs {
				want[0].ID = "fc_fake000001_0"
			}
			if !reflect.DeepEqual(r.ToolResults, want) || !reflect.DeepEqual(r.Tools, []string{"get_weather", "get_time"}) {
				t.Errorf("recorded results %+v tools %q; want %+v", r.ToolResults, r.Tools, want)
			}
		})
	}
}
