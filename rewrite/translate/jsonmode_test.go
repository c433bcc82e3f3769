package translate

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/detour-proxy/detour/rewrite"
	"github.com/detour-proxy/detour/rewrite/ir"
)

// TestJSONModeThroughAnthropic checks the one piece of logic translate.go
// owns: JSON mode reaches an Anthropic upstream as a forced tool, whose
// call the app receives back as the JSON text it asked for, with a plain
// stop, streamed or not.
func TestJSONModeThroughAnthropic(t *testing.T) {
	bodies := map[rewrite.Shape]string{
		rewrite.OpenAI: `{"model":"gpt-4o","messages":[{"role":"user","content":"Weather in Paris, as JSON."}],
			"response_format":{"type":"json_schema","json_schema":{"name":"weather","strict":true,"schema":{"type":"object","properties":{"city":{"type":"string"},"temp":{"type":"number"}},"required":["city","temp"],"additionalProperties":false}}},
			"stream":false}`,
		rewrite.Gemini: `{"contents":[{"role":"user","parts":[{"text":"Weather in Paris, as JSON."}]}],
			"generationConfig":{"responseMimeType":"application/json","responseSchema":{"type":"OBJECT","properties":{"city":{"type":"STRING"},"temp":{"type":"NUMBER"}},"required":["city","temp"]}}}`,
	}
	for _, app := range []rewrite.Shape{rewrite.OpenAI, rewrite.Gemini} {
		for _, stream := range []bool{false, true} {
			p := pair{app, rewrite.Anthropic}
			t.Run(p.String()+map[bool]string{false: "/json", true: "/stream"}[stream], func(t *testing.T) {
				body := bodies[app]
				if stream {
					body = strings.Replace(body, `"stream":false`, `"stream":true,"stream_options":{"include_usage":true}`, 1)
				}
				req, err := DecodeRequest(app, []byte(body), appPath(app, stream))
				if err != nil {
					t.Fatal(err)
				}
				if req.ResponseFormat == nil {
					t.Fatal("the app's JSON mode did not decode")
				}
				got := roundTrip(t, req, p)
				if len(got.Tools) != 0 {
					t.Errorf("tool calls %+v reached the app; want the JSON tool unwrapped", got.Tools)
				}
				if got.Text != `{"city":"Paris","temp":1}` {
					t.Errorf("text %q; want the JSON object the forced tool was called with", got.Text)
				}
				if got.Finish != stopReason[app] {
					t.Errorf("finish %q; want %q", got.Finish, stopReason[app])
				}
			})
		}
	}
}

// TestAnthropicJSONModeWhenThinkingIsDropped pins what an Anthropic
// upstream is asked when the app wants JSON, reasoning, and is in the middle
// of a tool loop. Another vendor's history has no signed thinking block to
// replay, so the encoder turns thinking off (docs/vendors.md#thinking-and-tools); JSON
// mode must then be enforced as it is without thinking — the forced JSON
// tool, or "any" when the app has tools of its own — and an app's own
// forced tool must be kept. Relaxing tool_choice to "auto" is only right
// while thinking stays on.
func TestAnthropicJSONModeWhenThinkingIsDropped(t *testing.T) {
	const history = `"messages":[
		{"role":"user","content":"Weather in Paris, as JSON?"},
		{"role":"assistant","tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},
		{"role":"tool","tool_call_id":"call_1","content":"sunny, 21 C"}],
		"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}]`
	for _, tc := range []struct {
		name, body string
		want       outToolChoice
	}{
		{"json_object", `{"model":"gpt-4o","reasoning_effort":"high","response_format":{"type":"json_object"},` + history + `}`,
			outToolChoice{Type: "any"}},
		{"json_object, forced tool", `{"model":"gpt-4o","reasoning_effort":"high","response_format":{"type":"json_object"},"tool_choice":{"type":"function","function":{"name":"get_weather"}},` + history + `}`,
			outToolChoice{Type: "tool", Name: "get_weather"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := DecodeRequest(rewrite.OpenAI, []byte(tc.body), "/chat/completions")
			if err != nil {
				t.Fatal(err)
			}
			var notes []string
			up, err := EncodeRequest(req, rewrite.Anthropic, ir.EncodeOptions{Model: "claude-sonnet-4-5", Notes: func(n string) { notes = append(notes, n) }})
			if err != nil {
				t.Fatal(err)
			}
			var got struct {
				Thinking   json.RawMessage `json:"thinking"`
				ToolChoice outToolChoice   `json:"tool_choice"`
			}
			mustUnmarshal(t, up.Body, &got)
			if got.Thinking != nil {
				t.Skipf("thinking stayed on (%s): tool_choice auto is then right", got.Thinking)
			}
			if got.ToolChoice != tc.want {
				t.Errorf("thinking off, tool_choice %+v; want %+v (JSON mode and the app's choice enforced)\nnotes: %q\nbody: %s", got.ToolChoice, tc.want, notes, up.Body)
			}
		})
	}
}

// outToolChoice is an Anthropic request's tool_choice.
type outToolChoice struct {
	Type string `json:"type"`
	Name string `json:"name,omitempty"`
}
