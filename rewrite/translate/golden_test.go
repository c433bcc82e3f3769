package translate

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/detour-proxy/detour/rewrite"
	"github.com/detour-proxy/detour/rewrite/ir"
)

// The golden tests pin every translator (six directed pairs, app shape →
// upstream shape) on realistic traffic:
//
//   - testdata/app/<app>.json: the request an app's SDK sends — two system
//     prompts, a user text and a base64 image, an assistant tool call and
//     its result, a tool with a JSON schema, tool_choice, temperature, max
//     tokens, stop; the streaming variant differs only in what the SDK
//     changes (see appBody);
//   - testdata/upstream/<upstream>_*.json|sse: what the upstream answers,
//     byte for byte as internal/fakevendor sends it (text, parallel tool
//     calls, a stream that ends without its closing events, an in-stream
//     error, a 429);
//   - testdata/<app>_to_<upstream>/*.golden: what the translator makes of
//     them. Run go test -update after a deliberate change and review the
//     diff against docs/vendors.md (see CONTRIBUTING.md#golden-files).
//
// Goldens alone would let -update bless a broken stream, so every output is
// also checked in code (invariants_test.go) and reduced to what the app's
// SDK would hand the app, which must match the upstream's answer.

// The answer the upstream fixtures carry.
const fixtureText = "The weather in Paris is sunny and 21 °C."

// fixtureTextCut is what the early-ending and failing streams get through.
const fixtureTextCut = "The weather in Paris is sunny"

// fixtureTools are the upstream fixtures' parallel tool calls, with each
// upstream's ids.
func fixtureTools(up rewrite.Shape) []toolSummary {
	prefix := map[rewrite.Shape]string{rewrite.OpenAI: "call_", rewrite.Anthropic: "toolu_", rewrite.Gemini: "fc_"}[up]
	return []toolSummary{
		{ID: prefix + "fake000001_0", Name: "get_weather", Args: `{"city":"Paris"}`},
		{ID: prefix + "fake000001_1", Name: "get_time", Args: `{"tz":"test","utc":true}`},
	}
}

// tokens is the input and output token count an upstream fixture reports.
type tokens struct{ in, out int64 }

var (
	responseTokens = map[rewrite.Shape]map[string]tokens{
		rewrite.OpenAI:    {"text": {21, 9}, "tool": {102, 16}},
		rewrite.Anthropic: {"text": {28, 9}, "tool": {94, 16}},
		rewrite.Gemini:    {"text": {19, 9}, "tool": {91, 16}},
	}
	streamTokens = map[rewrite.Shape]map[string]tokens{
		rewrite.OpenAI:    {"text": {35, 9}, "tool": {116, 16}},
		rewrite.Anthropic: {"text": {31, 9}, "tool": {98, 16}},
		rewrite.Gemini:    {"text": {19, 9}, "tool": {91, 16}},
	}
)

// The finish reasons of a plain answer and of a tool-call turn, in each
// app's vocabulary (Gemini says STOP for both).
var (
	stopReason = map[rewrite.Shape]string{rewrite.OpenAI: "stop", rewrite.Anthropic: "end_turn", rewrite.Gemini: "STOP"}
	toolReason = map[rewrite.Shape]string{rewrite.OpenAI: "tool_calls", rewrite.Anthropic: "tool_use", rewrite.Gemini: "STOP"}
)

// upstreamRequest is the golden form of an encoded upstream request.
type upstreamRequest struct {
	Path     string          `json:"path"`
	RawQuery string          `json:"raw_query,omitempty"`
	Notes    []string        `json:"notes,omitempty"`
	Body     json.RawMessage `json:"body"`
}

func TestGoldenRequest(t *testing.T) {
	for _, p := range pairs {
		for _, stream := range []bool{false, true} {
			name := "request"
			if stream {
				name = "request_stream"
			}
			t.Run(p.String()+"/"+name, func(t *testing.T) {
				req := decodeApp(t, p.from, stream)
				var notes []string
				up, err := EncodeRequest(req, p.to, ir.EncodeOptions{
					Model: upstreamModel[p.to],
					Notes: func(n string) { notes = append(notes, n) },
				})
				if err != nil {
					t.Fatalf("EncodeRequest: %v", err)
				}
				if !json.Valid(up.Body) {
					t.Fatalf("EncodeRequest: invalid JSON %s", up.Body)
				}
				checkUpstreamRequest(t, p, stream, up)
				checkGolden(t, filepath.Join(p.dir(), name+".golden"), indent(t, upstreamRequest{
					Path: up.Path, RawQuery: up.RawQuery, Notes: notes, Body: up.Body,
				}))
			})
		}
	}
}

// appToolCallID is the id of the assistant's tool call in each app fixture
// (Gemini 2.5 sends none: the decoder makes one).
var appToolCallID = map[rewrite.Shape]string{
	rewrite.OpenAI:    "call_9aXkQ2",
	rewrite.Anthropic: "toolu_01A09q90qw90lq917835lq9",
	rewrite.Gemini:    "call_req_0",
}

// fixturePNG is the image every app fixture sends.
const fixturePNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="

// checkUpstreamRequest checks what must survive any translation of the app
// fixture: both system prompts in order, the image, the tool call and the
// result that answers it under one id (and, for Gemini, one name), the
// settings, and the streaming switches of the target.
func checkUpstreamRequest(t *testing.T, p pair, stream bool, up Upstream) {
	t.Helper()
	f := readUpstreamRequest(t, p.to, up.Body)
	wantSystem := []string{"You are a travel assistant. Use the tools for live data.", "Answer in one sentence, in metric units."}
	if !slices.Equal(f.system, wantSystem) {
		t.Errorf("system prompts %q; want %q in order", f.system, wantSystem)
	}
	if !slices.Equal(f.images, []string{fixturePNG}) {
		t.Errorf("images %q; want the app's one PNG", f.images)
	}
	id := appToolCallID[p.from]
	if !slices.Equal(f.callIDs, []string{id}) || !slices.Equal(f.resultIDs, []string{id}) {
		t.Errorf("tool call ids %q, result ids %q; want %q for both", f.callIDs, f.resultIDs, id)
	}
	if !slices.Equal(f.callNames, []string{"get_weather"}) || (p.to == rewrite.Gemini && !slices.Equal(f.resultNames, f.callNames)) {
		t.Errorf("tool call names %q, result names %q; want get_weather", f.callNames, f.resultNames)
	}
	if !slices.Equal(f.tools, []string{"get_weather"}) {
		t.Errorf("tools %q; want get_weather", f.tools)
	}
	if f.maxTokens != 512 || f.temperature != 0.7 || !slices.Equal(f.stop, []string{"\n\nUser:"}) {
		t.Errorf("max tokens %d, temperature %v, stop %q; want 512, 0.7, the app's stop", f.maxTokens, f.temperature, f.stop)
	}
	switch p.to {
	case rewrite.OpenAI:
		if f.stream != stream || f.includeUsage != stream {
			t.Errorf("stream %v, include_usage %v; want both %v (usage is forced on upstream streams)", f.stream, f.includeUsage, stream)
		}
	case rewrite.Anthropic:
		if f.stream != stream {
			t.Errorf("stream %v; want %v", f.stream, stream)
		}
	case rewrite.Gemini:
		wantPath, wantQuery := "/v1beta/models/gemini-2.5-flash:generateContent", ""
		if stream {
			wantPath, wantQuery = "/v1beta/models/gemini-2.5-flash:streamGenerateContent", "alt=sse"
		}
		if up.Path != wantPath || up.RawQuery != wantQuery {
			t.Errorf("path %s?%s; want %s?%s", up.Path, up.RawQuery, wantPath, wantQuery)
		}
	}
}

// requestFacts is what checkUpstreamRequest reads from an upstream body.
type requestFacts struct {
	system, images, tools, stop                []string
	callIDs, callNames, resultIDs, resultNames []string
	maxTokens                                  int
	temperature                                float64
	stream, includeUsage                       bool
}

func readUpstreamRequest(t *testing.T, up rewrite.Shape, body []byte) requestFacts {
	t.Helper()
	var f requestFacts
	switch up {
	case rewrite.OpenAI:
		var r struct {
			Messages []struct {
				Role      string          `json:"role"`
				Content   json.RawMessage `json:"content"`
				ToolCalls []struct {
					ID       string `json:"id"`
					Function struct {
						Name string `json:"name"`
					} `json:"function"`
				} `json:"tool_calls"`
				ToolCallID string `json:"tool_call_id"`
			} `json:"messages"`
			Tools []struct {
				Function struct {
					Name string `json:"name"`
				} `json:"function"`
			} `json:"tools"`
			MaxTokens     int      `json:"max_completion_tokens"`
			Temperature   float64  `json:"temperature"`
			Stop          []string `json:"stop"`
			Stream        bool     `json:"stream"`
			StreamOptions *struct {
				IncludeUsage bool `json:"include_usage"`
			} `json:"stream_options"`
		}
		mustUnmarshal(t, body, &r)
		for _, m := range r.Messages {
			switch m.Role {
			case "system", "developer":
				var s string
				mustUnmarshal(t, m.Content, &s)
				f.system = append(f.system, s)
			case "user":
				var parts []struct {
					ImageURL struct {
						URL string `json:"url"`
					} `json:"image_url"`
				}
				if json.Unmarshal(m.Content, &parts) == nil {
					for _, p := range parts {
						if d, ok := strings.CutPrefix(p.ImageURL.URL, "data:image/png;base64,"); ok {
							f.images = append(f.images, d)
						}
					}
				}
			case "assistant":
				for _, c := range m.ToolCalls {
					f.callIDs = append(f.callIDs, c.ID)
					f.callNames = append(f.callNames, c.Function.Name)
				}
			case "tool":
				f.resultIDs = append(f.resultIDs, m.ToolCallID)
			}
		}
		for _, tl := range r.Tools {
			f.tools = append(f.tools, tl.Function.Name)
		}
		f.maxTokens, f.temperature, f.stop, f.stream = r.MaxTokens, r.Temperature, r.Stop, r.Stream
		f.includeUsage = r.StreamOptions != nil && r.StreamOptions.IncludeUsage
	case rewrite.Anthropic:
		var r struct {
			System []struct {
				Text string `json:"text"`
			} `json:"system"`
			Messages []struct {
				Content []struct {
					Type      string `json:"type"`
					ID        string `json:"id"`
					Name      string `json:"name"`
					ToolUseID string `json:"tool_use_id"`
					Source    struct {
						Data string `json:"data"`
					} `json:"source"`
				} `json:"content"`
			} `json:"messages"`
			Tools []struct {
				Name string `json:"name"`
			} `json:"tools"`
			MaxTokens     int      `json:"max_tokens"`
			Temperature   float64  `json:"temperature"`
			StopSequences []string `json:"stop_sequences"`
			Stream        bool     `json:"stream"`
		}
		mustUnmarshal(t, body, &r)
		for _, s := range r.System {
			f.system = append(f.system, s.Text)
		}
		for _, m := range r.Messages {
			for _, b := range m.Content {
				switch b.Type {
				case "image":
					f.images = append(f.images, b.Source.Data)
				case "tool_use":
					f.callIDs = append(f.callIDs, b.ID)
					f.callNames = append(f.callNames, b.Name)
				case "tool_result":
					f.resultIDs = append(f.resultIDs, b.ToolUseID)
				}
			}
		}
		for _, tl := range r.Tools {
			f.tools = append(f.tools, tl.Name)
		}
		f.maxTokens, f.temperature, f.stop, f.stream = r.MaxTokens, r.Temperature, r.StopSequences, r.Stream
	case rewrite.Gemini:
		var r struct {
			SystemInstruction struct {
				Parts []struct {
					Text string `json:"text"`
				} `json:"parts"`
			} `json:"systemInstruction"`
			Contents []struct {
				Parts []struct {
					InlineData *struct {
						Data string `json:"data"`
					} `json:"inlineData"`
					FunctionCall *struct {
						ID   string `json:"id"`
						Name string `json:"name"`
					} `json:"functionCall"`
					FunctionResponse *struct {
						ID   string `json:"id"`
						Name string `json:"name"`
					} `json:"functionResponse"`
				} `json:"parts"`
			} `json:"contents"`
			Tools []struct {
				FunctionDeclarations []struct {
					Name string `json:"name"`
				} `json:"functionDeclarations"`
			} `json:"tools"`
			GenerationConfig struct {
				MaxOutputTokens int      `json:"maxOutputTokens"`
				Temperature     float64  `json:"temperature"`
				StopSequences   []string `json:"stopSequences"`
			} `json:"generationConfig"`
		}
		mustUnmarshal(t, body, &r)
		for _, p := range r.SystemInstruction.Parts {
			f.system = append(f.system, p.Text)
		}
		for _, c := range r.Contents {
			for _, p := range c.Parts {
				switch {
				case p.InlineData != nil:
					f.images = append(f.images, p.InlineData.Data)
				case p.FunctionCall != nil:
					f.callIDs = append(f.callIDs, p.FunctionCall.ID)
					f.callNames = append(f.callNames, p.FunctionCall.Name)
				case p.FunctionResponse != nil:
					f.resultIDs = append(f.resultIDs, p.FunctionResponse.ID)
					f.resultNames = append(f.resultNames, p.FunctionResponse.Name)
				}
			}
		}
		for _, tl := range r.Tools {
			for _, d := range tl.FunctionDeclarations {
				f.tools = append(f.tools, d.Name)
			}
		}
		g := r.GenerationConfig
		f.maxTokens, f.temperature, f.stop = g.MaxOutputTokens, g.Temperature, g.StopSequences
	}
	return f
}

func TestGoldenResponse(t *testing.T) {
	for _, p := range pairs {
		for _, kind := range []string{"text", "tool"} {
			t.Run(p.String()+"/"+kind, func(t *testing.T) {
				req := decodeApp(t, p.from, false)
				since := time.Now()
				out, err := Response(req, p.from, p.to, readFile(t, "upstream", string(p.to)+"_"+kind+".json"))
				if err != nil {
					t.Fatalf("Response: %v", err)
				}
				got := summarizeResponse(t, p.from, out, appModel[p.from])
				want := summary{Text: fixtureText, Finish: stopReason[p.from]}
				if kind == "tool" {
					want = summary{Tools: fixtureTools(p.to), Finish: toolReason[p.from]}
				}
				tk := responseTokens[p.to][kind]
				want.Input, want.Output = tk.in, tk.out
				checkSummary(t, got, want)
				checkGolden(t, filepath.Join(p.dir(), "response_"+kind+".golden"), indent(t, json.RawMessage(pinCreated(t, out, since))))
			})
		}
	}
}

func TestGoldenStream(t *testing.T) {
	for _, p := range pairs {
		for _, kind := range streamKinds {
			t.Run(p.String()+"/"+kind, func(t *testing.T) {
				req := decodeApp(t, p.from, true)
				since := time.Now()
				run := runStream(t, req, p, readFile(t, "upstream", string(p.to)+"_stream_"+kind+".sse"))
				for _, err := range run.errs {
					t.Errorf("upstream event: %v", err)
				}
				if len(run.closeAgain) > 0 {
					t.Errorf("a second Close appended %q; closing events go out exactly once", run.closeAgain)
				}
				got := checkStream(t, p.from, run.out, streamCheck{
					wantError:    kind == "error",
					includeUsage: req.IncludeUsage,
					model:        appModel[p.from],
					strict:       true,
				})
				want := expectedStream(p, kind)
				if kind == "early_end" || kind == "error" {
					// Usage of a cut stream is whatever arrived: not pinned
					// here (the golden has it).
					got.Input, got.Output = 0, 0
				}
				checkSummary(t, got, want)
				checkGolden(t, filepath.Join(p.dir(), "stream_"+kind+".golden"), pinCreated(t, run.out, since))
			})
		}
	}
}

// expectedStream is what the app's SDK must make of the upstream stream
// fixture kind.
func expectedStream(p pair, kind string) summary {
	tk := streamTokens[p.to][kind]
	switch kind {
	case "text":
		return summary{Text: fixtureText, Finish: stopReason[p.from], Input: tk.in, Output: tk.out}
	case "tool":
		return summary{Tools: fixtureTools(p.to), Finish: toolReason[p.from], Input: tk.in, Output: tk.out}
	case "early_end":
		// The closing events are the translator's own: a plain stop.
		return summary{Text: fixtureTextCut, Finish: stopReason[p.from]}
	}
	return summary{Text: fixtureTextCut, Error: upstreamStreamError[p.to]}
}

// upstreamStreamError is the message of each upstream's in-stream error
// fixture, which the app must see verbatim.
var upstreamStreamError = map[rewrite.Shape]string{
	rewrite.OpenAI:    "The server had an error while processing your request. Sorry about that!",
	rewrite.Anthropic: "Overloaded",
	rewrite.Gemini:    "The model is overloaded. Please try again later.",
}

func checkSummary(t *testing.T, got, want summary) {
	t.Helper()
	if got.Text != want.Text {
		t.Errorf("text %q; want %q", got.Text, want.Text)
	}
	if !slices.Equal(got.Tools, want.Tools) {
		t.Errorf("tool calls %+v; want %+v", got.Tools, want.Tools)
	}
	if got.Finish != want.Finish {
		t.Errorf("finish %q; want %q", got.Finish, want.Finish)
	}
	if got.Input != want.Input || got.Output != want.Output {
		t.Errorf("usage %d in / %d out; want %d / %d", got.Input, got.Output, want.Input, want.Output)
	}
	if got.Error != want.Error {
		t.Errorf("error %q; want %q", got.Error, want.Error)
	}
}

// TestGoldenErrorBody pins an upstream's 429 in the app's envelope: the
// status the app's SDK retries on, the vendor's own message kept.
func TestGoldenErrorBody(t *testing.T) {
	for _, p := range pairs {
		t.Run(p.String(), func(t *testing.T) {
			upstream := readFile(t, "upstream", string(p.to)+"_error_429.json")
			status, body := ErrorBody(p.from, 429, "rate_limited", upstream)
			if status != 429 {
				t.Errorf("status %d; want 429", status)
			}
			info := rewrite.ParseError(body)
			if want := rewrite.ParseError(upstream).Message; info.Message != want || want == "" {
				t.Errorf("message %q; want the upstream's %q", info.Message, want)
			}
			if !info.Parsed {
				t.Errorf("the app's envelope does not parse: %s", body)
			}
			checkGolden(t, filepath.Join(p.dir(), "error_429.golden"), indent(t, struct {
				Status int             `json:"status"`
				Body   json.RawMessage `json:"body"`
			}{status, body}))
		})
	}
}
