package rewrite

import (
	"os"
	"strings"
	"testing"

	"github.com/detour-proxy/detour/rewrite/sse"
)

// committedCorpus is every event of the vendor streams in sse/testdata and
// events made to test the edges of InspectEvent's scan: errors before, after
// and beside content, empty errors, broken and truncated JSON, escaped keys,
// arrays, comments.
func committedCorpus(t testing.TB) []sse.Event {
	t.Helper()
	files, err := os.ReadDir(inspectStreamDir)
	if err != nil {
		t.Fatal(err)
	}
	var evs []sse.Event
	for _, f := range files {
		if strings.HasSuffix(f.Name(), ".sse") {
			evs = append(evs, inspectReadStream(t, f.Name())...)
		}
	}
	for _, in := range []string{
		": keep-alive\n\n",
		"\n",
		"data:\n\n",
		"data:  [DONE] \n\n",
		`data: {"choices":[{"index":0,"delta":{"role":"assistant","content":null},"finish_reason":null}]}` + "\n\n",
		`data: {"choices":[{"delta":{"content":"x"}}]}` + "\n\n",
		`data: {"choices":[],"usage":{"prompt_tokens":1}}` + "\n\n",
		`data: {"error":{"message":"boom","type":"server_error"}}` + "\n\n",
		"event: error\n" + `data: {"error":{"message":"boom"}}` + "\n\n",
		`data: {"error":null,"choices":[{"delta":{"content":"x"}}]}` + "\n\n",
		`data: {"choices":[{"delta":{"content":"x"}}],"error":{"message":"late"}}` + "\n\n",
		`data: {"choices":[{"delta":{"content":"x"}}],"error":{}}` + "\n\n",
		`data: {"choices":[{"delta":{"content":"\"error\": none"}}]}` + "\n\n",
		`data: {"choices":"x","error":{"message":"boom"}}` + "\n\n",
		`data: {"choices":[{"delta":` + "\n\n",
		`data: {"choices":[{"delta":{}}]},"error":{"message":"after the end"}` + "\n\n",
		`data: {"choices":[{"delta":{}}] "error":{"message":"after a missing comma"}}` + "\n\n",
		`data: {"err\u006fr":{"message":"escaped key"}}` + "\n\n",
		`data: {"\u0065rror":{"message":"escaped first letter"}}` + "\n\n",
		`data: {"choices":[{"delta":{"content":"an \"error\" in the text, and \\u"}}]}` + "\n\n",
		"data: <html>502 Bad Gateway</html>\n\n",
		"data: 42\n\n",
		"data: {}\n\n",
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
		"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n",
		"data: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\"}}\n\n",
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
		`data: {"candidates":[{"content":{"role":"model","parts":[{"text":"x"}]},"finishReason":"STOP"}]}` + "\n\n",
		`data: {"candidates":[{"content":{"role":"model"}}],"error":{"code":500}}` + "\n\n",
		`data: {"usageMetadata":{"promptTokenCount":9},"modelVersion":"gemini-2.5-flash"}` + "\n\n",
		`{"error":{"code":500,"message":"Internal","status":"INTERNAL"}}` + "\n\n",
		`data: [{"error":{"code":503,"status":"UNAVAILABLE"}}]` + "\n\n",
		`data: [{"candidates":[]}]` + "\n\n",
		"event: response.failed\n" + `data: {"type":"response.failed","response":{"id":"resp_1"}}` + "\n\n",
		"event: response.completed\n" + `data: {"type":"response.completed","response":{"id":"resp_1"}}` + "\n\n",
		"event: messageStop\n" + `data: {"stopReason":"end_turn"}` + "\n\n",
	} {
		evs = append(evs, inspectReadEvents(t, in)...)
	}
	return evs
}

// TestInspectCommittedAgreesWithInspectEvent: after the commit point pump
// asks InspectCommitted where it asked InspectEvent, and must get the same
// answer for every event of every shape, content and meta aside.
func TestInspectCommittedAgreesWithInspectEvent(t *testing.T) {
	t.Parallel()
	shapes := []Shape{OpenAI, Anthropic, Gemini, Bedrock, OpenAIResponses, Shape("cohere")}
	evs := committedCorpus(t)
	for _, shape := range shapes {
		for _, ev := range evs {
			want := InspectEvent(shape, ev)
			if want == EventMeta {
				want = EventContent
			}
			if got := InspectCommitted(shape, ev); got != want {
				t.Errorf("InspectCommitted(%s, %q) = %v; InspectEvent says %v", shape, ev.Raw, got, want)
			}
		}
	}
}

// FuzzInspectCommitted holds InspectCommitted to InspectEvent on any event,
// well-formed or not, for the shapes it judges without InspectEvent
// (OpenAI and Gemini) and one it hands over (Anthropic).
func FuzzInspectCommitted(f *testing.F) {
	for _, ev := range committedCorpus(f) {
		f.Add(ev.Name, ev.Data, ev.Comment)
	}
	f.Fuzz(func(t *testing.T, name string, data []byte, comment bool) {
		ev := sse.Event{Name: name, Data: data, Comment: comment}
		for _, shape := range []Shape{OpenAI, Gemini, Anthropic} {
			want := InspectEvent(shape, ev)
			if want == EventMeta {
				want = EventContent
			}
			if got := InspectCommitted(shape, ev); got != want {
				t.Errorf("InspectCommitted(%s, %q, %q) = %v; InspectEvent says %v", shape, name, data, got, want)
			}
		}
	})
}

// BenchmarkInspectCommitted compares the two on a relayed OpenAI content
// chunk, the event most of a stream is made of.
func BenchmarkInspectCommitted(b *testing.B) {
	evs := inspectReadEvents(b, `data: {"id":"chatcmpl-fake000017","object":"chat.completion.chunk","created":1796190925,"model":"gpt-4o","choices":[{"index":0,"delta":{"content":" word"},"finish_reason":null}]}`+"\n\n")
	ev := evs[0]
	b.Run("InspectEvent", func(b *testing.B) {
		for b.Loop() {
			InspectEvent(OpenAI, ev)
		}
	})
	b.Run("InspectCommitted", func(b *testing.B) {
		for b.Loop() {
			InspectCommitted(OpenAI, ev)
		}
	})
}
