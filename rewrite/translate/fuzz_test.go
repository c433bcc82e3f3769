package translate

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"testing"

	"github.com/detour-proxy/detour/rewrite"
	"github.com/detour-proxy/detour/rewrite/ir"
	"github.com/detour-proxy/detour/rewrite/sse"
)

// Native fuzz targets, one request target and one stream target per pair
// (.ci/run runs every Fuzz* target for a bounded time; the seeds also run
// as plain tests). The request targets fuzz the app's body: whatever
// decodes must encode into valid JSON the target shape's own decoder reads
// back, or into an error (an *ir.UnsupportedError skips the upstream).
// The stream targets fuzz the upstream's raw SSE bytes: translating them
// must not panic, and the app must get a stream its SDK can read — the
// same structural checks as the golden streams (invariants_test.go),
// without the ones a broken upstream would fail on its own.

func FuzzRequest_openai_anthropic(f *testing.F) {
	fuzzRequest(f, pair{rewrite.OpenAI, rewrite.Anthropic})
}
func FuzzRequest_openai_gemini(f *testing.F) { fuzzRequest(f, pair{rewrite.OpenAI, rewrite.Gemini}) }
func FuzzRequest_anthropic_openai(f *testing.F) {
	fuzzRequest(f, pair{rewrite.Anthropic, rewrite.OpenAI})
}
func FuzzRequest_anthropic_gemini(f *testing.F) {
	fuzzRequest(f, pair{rewrite.Anthropic, rewrite.Gemini})
}
func FuzzRequest_gemini_openai(f *testing.F) { fuzzRequest(f, pair{rewrite.Gemini, rewrite.OpenAI}) }
func FuzzRequest_gemini_anthropic(f *testing.F) {
	fuzzRequest(f, pair{rewrite.Gemini, rewrite.Anthropic})
}

func FuzzStream_openai_anthropic(f *testing.F) {
	fuzzStream(f, pair{rewrite.OpenAI, rewrite.Anthropic})
}
func FuzzStream_openai_gemini(f *testing.F) { fuzzStream(f, pair{rewrite.OpenAI, rewrite.Gemini}) }
func FuzzStream_anthropic_openai(f *testing.F) {
	fuzzStream(f, pair{rewrite.Anthropic, rewrite.OpenAI})
}
func FuzzStream_anthropic_gemini(f *testing.F) {
	fuzzStream(f, pair{rewrite.Anthropic, rewrite.Gemini})
}
func FuzzStream_gemini_openai(f *testing.F) { fuzzStream(f, pair{rewrite.Gemini, rewrite.OpenAI}) }
func FuzzStream_gemini_anthropic(f *testing.F) {
	fuzzStream(f, pair{rewrite.Gemini, rewrite.Anthropic})
}

// requestSeeds are small app bodies of each shape that reach corners the
// fixture does not: string content, JSON mode, forced tools, media by URL,
// thinking, odd values.
var requestSeeds = map[rewrite.Shape][]string{
	rewrite.OpenAI: {
		`{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://x/y.png"}}]}],"n":2}`,
		`{"model":"m","messages":[{"role":"assistant","content":"","tool_calls":[{"id":"a/b","type":"function","function":{"name":"f","arguments":"[1]"}}]},{"role":"tool","tool_call_id":"a/b","content":"r"}],"tool_choice":{"type":"function","function":{"name":"f"}}}`,
		`{"model":"m","messages":[{"role":"user","content":"j"}],"response_format":{"type":"json_object"},"reasoning_effort":"high","temperature":3,"stop":["","a","b","c","d","e"],"seed":99999999999}`,
		`{"model":"m","messages":[{"role":"tool","tool_call_id":"x","content":"orphan"}]}`,
	},
	rewrite.Anthropic: {
		`{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"m","max_tokens":1,"system":"s","messages":[{"role":"user","content":[{"type":"document","source":{"type":"text","media_type":"text/plain","data":"doc"}}]}]}`,
		`{"model":"m","max_tokens":9,"thinking":{"type":"enabled","budget_tokens":2048},"messages":[{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"s"},{"type":"tool_use","id":"dtr_Y2FsbDphYmMvMQ","name":"f","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"dtr_Y2FsbDphYmMvMQ","content":[{"type":"text","text":"r"}],"is_error":true}]}]}`,
		`{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"url","url":"gs://b/o.png"}}]}],"tool_choice":{"type":"none"},"output_config":{"format":{"type":"json_schema","schema":{"type":"object"}}}}`,
	},
	rewrite.Gemini: {
		`{"contents":[{"parts":[{"text":"hi"}]}]}`,
		`{"contents":[{"role":"model","parts":[{"functionCall":{"name":"f","args":{"a":1}}}]},{"role":"user","parts":[{"functionResponse":{"name":"f","response":{"error":"no"}}}]}],"generationConfig":{"candidateCount":2,"thinkingConfig":{"thinkingBudget":-1}}}`,
		`{"contents":[{"role":"user","parts":[{"fileData":{"fileUri":"https://example.com/a.pdf"}}]}],"generationConfig":{"responseMimeType":"application/json","responseSchema":{"type":"ARRAY","items":{"type":"STRING"}}}}`,
		`{"system_instruction":{"parts":[{"text":"s"}]},"contents":[{"role":"user","parts":[{"inline_data":{"mime_type":"image/png","data":"iVBORw0KGgo="}}]}],"tool_config":{"function_calling_config":{"mode":"ANY","allowed_function_names":["a","b"]}}}`,
	},
}

func fuzzRequest(f *testing.F, p pair) {
	f.Add(appBody(f, p.from, false), false)
	f.Add(appBody(f, p.from, true), true)
	for _, s := range requestSeeds[p.from] {
		f.Add([]byte(s), false)
	}
	f.Fuzz(func(t *testing.T, body []byte, stream bool) {
		req, err := DecodeRequest(p.from, body, appPath(p.from, stream))
		if err != nil {
			return
		}
		up, err := EncodeRequest(req, p.to, ir.EncodeOptions{Model: upstreamModel[p.to]})
		if err != nil {
			var un *ir.UnsupportedError
			if errors.As(err, &un) && un.What == "" {
				t.Errorf("an UnsupportedError that does not say what: %v", err)
			}
			return
		}
		if !json.Valid(up.Body) || bytes.TrimSpace(up.Body)[0] != '{' {
			t.Fatalf("EncodeRequest(%s) made no JSON object: %s", p.to, up.Body)
		}
		// What detour sends must at least be what detour itself reads as
		// a request of that shape.
		path := up.Path
		if p.to == rewrite.OpenAI {
			path = "/chat/completions"
		}
		back, err := DecodeRequest(p.to, up.Body, path)
		if err != nil {
			t.Fatalf("the %s request detour made does not decode as one: %v\napp body: %s\nupstream body: %s", p.to, err, body, up.Body)
		}
		if back.Stream != req.Stream {
			t.Errorf("stream %v became %v", req.Stream, back.Stream)
		}
	})
}

func fuzzStream(f *testing.F, p pair) {
	var all []byte
	for _, kind := range streamKinds {
		b := readFile(f, "upstream", string(p.to)+"_stream_"+kind+".sse")
		all = append(all, b...)
		f.Add(b)
		for _, v := range reordered(sseEvents(f, b)) {
			f.Add(v)
		}
	}
	f.Add(all) // four answers in one stream
	req := decodeApp(f, p.from, true)
	f.Fuzz(func(t *testing.T, upstream []byte) {
		s := NewStream(req, p.from, p.to)
		rd := sse.NewReader(bytes.NewReader(upstream))
		var out []byte
		sawError := false
		for {
			ev, err := rd.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return // too large an event: the proxy fails the stream
			}
			var evs []ir.StreamEvent
			out, evs, _ = s.Event(out, ev)
			for _, e := range evs {
				sawError = sawError || e.Kind == ir.StreamError
			}
		}
		out = s.Close(out)
		for _, ev := range sseEvents(t, out) {
			if string(ev.Data) == "[DONE]" && p.from == rewrite.OpenAI || ev.Comment && p.from != rewrite.Gemini {
				continue
			}
			if !json.Valid(ev.Data) {
				t.Fatalf("the app's event is not JSON: %q\nupstream:\n%q", ev.Raw, upstream)
			}
		}
		checkStream(t, p.from, out, streamCheck{wantError: sawError, includeUsage: req.IncludeUsage, model: appModel[p.from]})
		if t.Failed() {
			t.Logf("upstream:\n%q\napp:\n%s", upstream, out)
		}
	})
}

// reordered returns the stream of evs in orders no vendor sends: reversed,
// every event twice, and without each one of its events in turn. Byte
// mutation seldom makes whole events, so these seeds (which also run as
// tests) start the fuzzer at the translators' state machines.
func reordered(evs []sse.Event) [][]byte {
	join := func(idx []int) []byte {
		var b []byte
		for _, i := range idx {
			b = append(b, evs[i].Raw...)
		}
		return b
	}
	var rev, twice []int
	for i := range evs {
		rev = append(rev, len(evs)-1-i)
		twice = append(twice, i, i)
	}
	out := [][]byte{join(rev), join(twice)}
	for drop := range evs {
		var idx []int
		for i := range evs {
			if i != drop {
				idx = append(idx, i)
			}
		}
		out = append(out, join(idx))
	}
	return out
}
