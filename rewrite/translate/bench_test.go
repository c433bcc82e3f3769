package translate

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"testing"

	"github.com/detour-proxy/detour/internal/fakevendor"
	"github.com/detour-proxy/detour/rewrite"
	"github.com/detour-proxy/detour/rewrite/ir"
	"github.com/detour-proxy/detour/rewrite/sse"
)

// What a translated request costs over the same-shape fast path, measured
// side by side (issue 3: a translated round trip may add at most 0.3 ms at
// p50, a stream event at most 10 µs):
//
//   - BenchmarkRequest10KB/<pair> decodes and encodes a 10 KB chat body;
//     BenchmarkFastPathSetModel10KB/<app> is what the fast path does to the
//     same body (rewrite.SetModel; a Gemini app's fast path only rewrites
//     the path, so its figure is an upper bound);
//   - BenchmarkResponse/<pair>/<kind> translates a whole answer; the fast
//     path passes the body through (usage is read on both paths);
//   - BenchmarkStream200/<pair> reads a 200-event upstream stream and
//     translates it event by event, as the proxy's pump does (sse.Reader,
//     rewrite.InspectEvent, Stream.Event, Close);
//     BenchmarkFastPathStream200/<shape> is the same-shape pump (sse.Reader
//     and rewrite.InspectEvent per event). Both report ns/event and
//     allocs/event.
//
// The Responses API's pairs and shape (responses_test.go) are measured
// the same way, beside the chat pairs: benchPairs and benchShapes.
//
// Run: go test -run '^$' -bench . -benchtime 1s -count 5 ./rewrite/translate

// chatBody builds a chat request of shape app of about size bytes, shaped
// like the one rewrite's SetModel benchmark uses: a system prompt,
// alternating user and assistant turns, one tool, a few settings.
func chatBody(app rewrite.Shape, size int) []byte {
	const (
		question = "Question %d: what is the weather like in Paris, and should I take an umbrella \u2602?"
		answer   = "Answer %d: it is mild, with a chance of rain \u2014 take one."
	)
	var b bytes.Buffer
	switch app {
	case rewrite.OpenAI:
		b.WriteString(`{"messages":[{"role":"system","content":"You are a helpful assistant.\nAnswer briefly."}`)
		for i := 0; b.Len() < size-400; i++ {
			fmt.Fprintf(&b, `,{"role":"user","content":"`+question+`"}`, i)
			fmt.Fprintf(&b, `,{"role":"assistant","content":"`+answer+`"}`, i)
		}
		b.WriteString(`],"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}],`)
		b.WriteString(`"temperature":0.7,"max_tokens":1024,"stream":true,"stream_options":{"include_usage":true},"model":"gpt-4o"}`)
	case rewrite.Anthropic:
		b.WriteString(`{"model":"claude-sonnet-4-5","max_tokens":1024,"system":[{"type":"text","text":"You are a helpful assistant.\nAnswer briefly."}],"messages":[`)
		for i := 0; b.Len() < size-400; i++ {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"role":"user","content":[{"type":"text","text":"`+question+`"}]}`, i)
			fmt.Fprintf(&b, `,{"role":"assistant","content":[{"type":"text","text":"`+answer+`"}]}`, i)
		}
		b.WriteString(`,{"role":"user","content":[{"type":"text","text":"And tomorrow?"}]}],"tools":[{"name":"get_weather","input_schema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}],`)
		b.WriteString(`"temperature":0.7,"stream":true}`)
	case rewrite.Gemini:
		b.WriteString(`{"systemInstruction":{"parts":[{"text":"You are a helpful assistant.\nAnswer briefly."}]},"contents":[`)
		for i := 0; b.Len() < size-400; i++ {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"role":"user","parts":[{"text":"`+question+`"}]}`, i)
			fmt.Fprintf(&b, `,{"role":"model","parts":[{"text":"`+answer+`"}]}`, i)
		}
		b.WriteString(`,{"role":"user","parts":[{"text":"And tomorrow?"}]}],"tools":[{"functionDeclarations":[{"name":"get_weather","parameters":{"type":"OBJECT","properties":{"city":{"type":"STRING"}},"required":["city"]}}]}],`)
		b.WriteString(`"generationConfig":{"temperature":0.7,"maxOutputTokens":1024}}`)
	case rewrite.OpenAIResponses:
		b.WriteString(`{"model":"gpt-4.1","instructions":"You are a helpful assistant.\nAnswer briefly.","input":[`)
		for i := 0; b.Len() < size-400; i++ {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"role":"user","content":"`+question+`"}`, i)
			fmt.Fprintf(&b, `,{"type":"message","role":"assistant","content":[{"type":"output_text","text":"`+answer+`"}]}`, i)
		}
		b.WriteString(`,{"role":"user","content":"And tomorrow?"}],"tools":[{"type":"function","name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}],`)
		b.WriteString(`"temperature":0.7,"max_output_tokens":1024,"stream":true}`)
	}
	return b.Bytes()
}

func TestChatBodiesAreRealistic(t *testing.T) {
	for _, app := range benchShapes {
		body := chatBody(app, 10<<10)
		if len(body) < 9<<10 || len(body) > 11<<10 {
			t.Errorf("%s: %d bytes; want about 10 KB", app, len(body))
		}
		req, err := DecodeRequest(app, body, appPath(app, true))
		if err != nil {
			t.Fatalf("%s: %v", app, err)
		}
		if len(req.Messages) < 50 || len(req.System) != 1 || len(req.Tools) != 1 {
			t.Errorf("%s: %d messages, %d system prompts, %d tools", app, len(req.Messages), len(req.System), len(req.Tools))
		}
	}
}

func BenchmarkRequest10KB(b *testing.B) {
	for _, p := range benchPairs {
		body := chatBody(p.from, 10<<10)
		path := appPath(p.from, true)
		o := ir.EncodeOptions{Model: upstreamModel[p.to]}
		b.Run(p.String(), func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				req, err := DecodeRequest(p.from, body, path)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := EncodeRequest(req, p.to, o); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkFastPathSetModel10KB is BenchmarkRequest10KB's baseline.
func BenchmarkFastPathSetModel10KB(b *testing.B) {
	for _, app := range benchShapes {
		body := chatBody(app, 10<<10)
		b.Run(string(app), func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := rewrite.SetModel(body, "some-other-model"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkResponse(b *testing.B) {
	for _, p := range benchPairs {
		req := decodeApp(b, p.from, false)
		for _, kind := range []string{"text", "tool"} {
			body := readFile(b, "upstream", string(p.to)+"_"+kind+".json")
			b.Run(p.String()+"/"+kind, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := Response(req, p.from, p.to, body); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// stream200 is a 200-event text stream of shape up, exactly as the fake
// vendor sends it: opening events, text deltas, closing events.
func stream200(tb testing.TB, up rewrite.Shape) []byte {
	tb.Helper()
	words := strings.Repeat("The weather in Paris is mild today, with a light breeze from the west. ", 40)
	path, body := "/v1/chat/completions", `{"model":"gpt-4o","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"Weather?"}]}`
	switch up {
	case rewrite.Anthropic:
		path, body = "/v1/messages", `{"model":"claude-sonnet-4-5","max_tokens":1024,"stream":true,"messages":[{"role":"user","content":"Weather?"}]}`
	case rewrite.Gemini:
		path, body = "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse", `{"contents":[{"role":"user","parts":[{"text":"Weather?"}]}]}`
	case rewrite.OpenAIResponses:
		path, body = "/v1/responses", `{"model":"gpt-4.1","stream":true,"input":"Weather?"}`
	}
	chunks := 200
	for range 3 {
		u := Upstream{Path: strings.TrimPrefix(path, up.APIRoot()), Body: []byte(body)}
		if p, q, ok := strings.Cut(u.Path, "?"); ok {
			u.Path, u.RawQuery = p, q
		}
		out := askFake(tb, up, u, fakevendor.Options{Text: words, Chunks: chunks})
		n := len(sseEvents(tb, out))
		if n == 200 {
			return out
		}
		chunks += 200 - n
	}
	tb.Fatalf("cannot make a 200-event %s stream", up)
	return nil
}

// perEvent reports a stream benchmark's cost per upstream event.
type perEvent struct {
	b       *testing.B
	events  int
	iters   int
	mallocs uint64
	bytes   uint64
}

func startPerEvent(b *testing.B, events int) *perEvent {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	b.ReportAllocs()
	return &perEvent{b: b, events: events, mallocs: m.Mallocs, bytes: m.TotalAlloc}
}

func (p *perEvent) report() {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	n := float64(p.iters * p.events)
	p.b.ReportMetric(float64(p.b.Elapsed().Nanoseconds())/n, "ns/event")
	p.b.ReportMetric(float64(m.Mallocs-p.mallocs)/n, "allocs/event")
	p.b.ReportMetric(float64(m.TotalAlloc-p.bytes)/n, "B/event")
}

func BenchmarkStream200(b *testing.B) {
	streams := map[rewrite.Shape][]byte{}
	for _, up := range benchShapes {
		streams[up] = stream200(b, up)
	}
	for _, p := range benchPairs {
		req := decodeApp(b, p.from, true)
		upstream := streams[p.to]
		b.Run(p.String(), func(b *testing.B) {
			b.SetBytes(int64(len(upstream)))
			var out []byte
			pe := startPerEvent(b, 200)
			for b.Loop() {
				pe.iters++
				s := NewStream(req, p.from, p.to)
				rd := sse.NewReader(bytes.NewReader(upstream))
				for {
					ev, err := rd.Next()
					if err != nil {
						if !errors.Is(err, io.EOF) {
							b.Fatal(err)
						}
						break
					}
					rewrite.InspectEvent(p.to, ev)
					if out, _, err = s.Event(out[:0], ev); err != nil {
						b.Fatal(err)
					}
				}
				out = s.Close(out[:0])
			}
			pe.report()
		})
	}
}

// BenchmarkFastPathStream200 is BenchmarkStream200's baseline: the
// same-shape pump over the same upstream stream.
func BenchmarkFastPathStream200(b *testing.B) {
	for _, up := range benchShapes {
		upstream := stream200(b, up)
		b.Run(string(up), func(b *testing.B) {
			b.SetBytes(int64(len(upstream)))
			pe := startPerEvent(b, 200)
			for b.Loop() {
				pe.iters++
				rd := sse.NewReader(bytes.NewReader(upstream))
				for {
					ev, err := rd.Next()
					if err != nil {
						if !errors.Is(err, io.EOF) {
							b.Fatal(err)
						}
						break
					}
					rewrite.InspectEvent(up, ev)
				}
			}
			pe.report()
		})
	}
}

// TestStream200IsTranslatable checks the benchmark's streams: 200 events
// that every pair translates into the text they carry.
func TestStream200IsTranslatable(t *testing.T) {
	t.Parallel()
	for _, p := range benchPairs {
		run := runStream(t, decodeApp(t, p.from, true), p, stream200(t, p.to))
		if len(run.errs) > 0 {
			t.Errorf("%s: %v", p, run.errs)
		}
		s := checkStream(t, p.from, run.out, streamCheck{includeUsage: p.from == rewrite.OpenAI, model: appModel[p.from], strict: true})
		if want := strings.Repeat("The weather in Paris is mild today, with a light breeze from the west. ", 40); s.Text != want {
			t.Errorf("%s: text of %d bytes; want %d", p, len(s.Text), len(want))
		}
	}
}

// The Bedrock pairs (upstream only: an app never speaks Bedrock). Same
// measures as above: BenchmarkBedrockRequest10KB/<app> decodes the app's
// 10 KB body and encodes a Converse request; BenchmarkBedrockResponse/<app>/<kind>
// translates a whole Converse answer; BenchmarkBedrockStream200/<app>
// translates a 200-event ConverseStream as the chain reads it, each event
// already re-framed as SSE by internal/cloud (whose own cost per event is
// internal/cloud's BenchmarkEventStreamToSSE).

const (
	bedrockTextAnswer = `{"output":{"message":{"role":"assistant","content":[{"text":"The weather in Paris is mild today, with a light breeze from the west."}]}},"stopReason":"end_turn","usage":{"inputTokens":25,"outputTokens":14,"totalTokens":39},"metrics":{"latencyMs":412}}`
	bedrockToolAnswer = `{"output":{"message":{"role":"assistant","content":[{"toolUse":{"toolUseId":"tooluse_kZJMlvQmRJ6eAyJE5GIl7Q","name":"get_weather","input":{"city":"Paris"}}}]}},"stopReason":"tool_use","usage":{"inputTokens":310,"outputTokens":53,"totalTokens":363},"metrics":{"latencyMs":901}}`
)

// bedrockStream200 is a 200-event ConverseStream in the SSE form the chain
// reads: messageStart, 196 text deltas, contentBlockStop, messageStop,
// metadata; each payload with Bedrock's "p" padding.
func bedrockStream200() []byte {
	var b bytes.Buffer
	ev := func(name, data string) { fmt.Fprintf(&b, "event: %s\ndata: %s\n\n", name, data) }
	ev("messageStart", `{"p":"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRS","role":"assistant"}`)
	for i := range 196 {
		ev("contentBlockDelta", fmt.Sprintf(`{"contentBlockIndex":0,"delta":{"text":"word%d "},"p":"abcdefghijklmnopqr"}`, i))
	}
	ev("contentBlockStop", `{"contentBlockIndex":0,"p":"abcdefghijklmnopqrstuvwxyzABCDE"}`)
	ev("messageStop", `{"p":"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKL","stopReason":"end_turn"}`)
	ev("metadata", `{"metrics":{"latencyMs":2211},"p":"abcdefghijklmn","usage":{"inputTokens":25,"outputTokens":196,"totalTokens":221}}`)
	return b.Bytes()
}

func BenchmarkBedrockRequest10KB(b *testing.B) {
	for _, app := range rewrite.Shapes {
		body := chatBody(app, 10<<10)
		path := appPath(app, true)
		o := ir.EncodeOptions{Model: "anthropic.claude-3-5-haiku-20241022-v1:0"}
		b.Run(string(app)+"_to_bedrock", func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				req, err := DecodeRequest(app, body, path)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := EncodeRequest(req, rewrite.Bedrock, o); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkBedrockResponse(b *testing.B) {
	for _, app := range rewrite.Shapes {
		req := decodeApp(b, app, false)
		for kind, body := range map[string]string{"text": bedrockTextAnswer, "tool": bedrockToolAnswer} {
			b.Run(string(app)+"_from_bedrock/"+kind, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := Response(req, app, rewrite.Bedrock, []byte(body)); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

func BenchmarkBedrockStream200(b *testing.B) {
	upstream := bedrockStream200()
	for _, app := range rewrite.Shapes {
		req := decodeApp(b, app, true)
		b.Run(string(app)+"_from_bedrock", func(b *testing.B) {
			b.SetBytes(int64(len(upstream)))
			var out []byte
			pe := startPerEvent(b, 200)
			for b.Loop() {
				pe.iters++
				s := NewStream(req, app, rewrite.Bedrock)
				rd := sse.NewReader(bytes.NewReader(upstream))
				for {
					ev, err := rd.Next()
					if err != nil {
						if !errors.Is(err, io.EOF) {
							b.Fatal(err)
						}
						break
					}
					rewrite.InspectEvent(rewrite.Bedrock, ev)
					if out, _, err = s.Event(out[:0], ev); err != nil {
						b.Fatal(err)
					}
				}
				out = s.Close(out[:0])
			}
			pe.report()
		})
	}
}
