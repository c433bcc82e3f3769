package cloud

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"

	"github.com/detour-proxy/detour/rewrite"
	bedrockcodec "github.com/detour-proxy/detour/rewrite/bedrock"
	"github.com/detour-proxy/detour/rewrite/sse"
)

func encodeEvents(t testing.TB, msgs ...eventstream.Message) []byte {
	var b bytes.Buffer
	enc := eventstream.NewEncoder()
	for _, m := range msgs {
		if err := enc.Encode(&b, m); err != nil {
			t.Fatal(err)
		}
	}
	return b.Bytes()
}

func event(typ, payload string) eventstream.Message {
	return eventstream.Message{Headers: eventstream.Headers{
		{Name: ":event-type", Value: eventstream.StringValue(typ)},
		{Name: ":content-type", Value: eventstream.StringValue("application/json")},
		{Name: ":message-type", Value: eventstream.StringValue("event")},
	}, Payload: []byte(payload)}
}

func TestEventStreamBecomesSSE(t *testing.T) {
	t.Parallel()
	raw := encodeEvents(t,
		event("messageStart", `{"role":"assistant","p":"abc"}`),
		event("contentBlockDelta", "{\n \"contentBlockIndex\": 0,\n \"delta\": {\"text\": \"Hi\"}\n}"),
		eventstream.Message{Headers: eventstream.Headers{
			{Name: ":exception-type", Value: eventstream.StringValue("throttlingException")},
			{Name: ":message-type", Value: eventstream.StringValue("exception")},
		}, Payload: []byte(`{"message":"Too many tokens, please wait before trying again."}`)},
	)
	got, err := io.ReadAll(newEventStreamSSE(io.NopCloser(bytes.NewReader(raw))))
	if err != nil {
		t.Fatal(err)
	}
	want := "event: messageStart\ndata: {\"role\":\"assistant\",\"p\":\"abc\"}\n\n" +
		"event: contentBlockDelta\ndata: {\"contentBlockIndex\":0,\"delta\":{\"text\":\"Hi\"}}\n\n" +
		"event: throttlingException\ndata: {\"__type\":\"throttlingException\",\"message\":\"Too many tokens, please wait before trying again.\"}\n\n"
	if string(got) != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	// What the chain then sees of the exception.
	rd := sse.NewReader(bytes.NewReader(got))
	var last sse.Event
	for {
		ev, err := rd.Next()
		if err != nil {
			break
		}
		last = ev
	}
	if k := rewrite.InspectEvent(rewrite.Bedrock, last); k != rewrite.EventError {
		t.Errorf("exception inspected as %v", k)
	}
	if info := rewrite.ParseError(last.Data); info.Type != "throttlingException" || info.Message == "" {
		t.Errorf("ParseError = %+v", info)
	}
}

func TestCorruptEventStreamFails(t *testing.T) {
	t.Parallel()
	raw := encodeEvents(t, event("messageStart", `{}`))
	raw[len(raw)-1] ^= 0xff // the message CRC
	_, err := io.ReadAll(newEventStreamSSE(io.NopCloser(bytes.NewReader(raw))))
	if err == nil || errors.Is(err, io.EOF) {
		t.Errorf("err = %v; want a checksum error", err)
	}
}

// TestCutEventStreamIsAnError: a stream cut inside a message (the
// connection dropped mid-payload) is an error, not a clean end that would
// pass the partial answer off as whole. The SDK's decoder read such a
// cut as io.EOF.
func TestCutEventStreamIsAnError(t *testing.T) {
	t.Parallel()
	raw := encodeEvents(t, event("messageStart", `{"role":"assistant"}`), event("contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":"Hello there"}}`))
	for _, cut := range []int{len(raw) - 20, len(raw) - 2, len(raw) - 60} {
		got, err := io.ReadAll(newEventStreamSSE(io.NopCloser(bytes.NewReader(raw[:cut]))))
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("cut at %d of %d: err = %v after %q; want io.ErrUnexpectedEOF", cut, len(raw), err, got)
		}
	}
}

func TestWithAWSType(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		`{"message":"m"}`:            `{"__type":"T","message":"m"}`,
		`{}`:                         `{"__type":"T"}`,
		`not json`:                   `{"__type":"T"}`,
		`{"__type":"X","message":1}`: `{"__type":"X","message":1}`,
	} {
		if got := string(withAWSType([]byte(in), "T")); got != want {
			t.Errorf("withAWSType(%s) = %s; want %s", in, got, want)
		}
	}
}

// FuzzEventStreamToSSE: any bytes as an event stream end in an error or
// EOF, never a panic, and whatever SSE comes out the Bedrock decoder reads
// without panicking.
func FuzzEventStreamToSSE(f *testing.F) {
	f.Add(encodeEvents(f, event("messageStart", `{"role":"assistant"}`), event("contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":"Hi"}}`)))
	f.Fuzz(func(t *testing.T, b []byte) {
		rd := sse.NewReader(newEventStreamSSE(io.NopCloser(bytes.NewReader(b))))
		d := bedrockcodec.NewStreamDecoder()
		for range 1000 {
			ev, err := rd.Next()
			if err != nil {
				return
			}
			_, _ = d.Decode(ev)
		}
	})
}

// BenchmarkEventStreamToSSE is the re-framing's cost per ConverseStream
// event (internal/eventstream's decoder, CRCs included, and the SSE lines), over a
// 200-event stream.
func BenchmarkEventStreamToSSE(b *testing.B) {
	msgs := []eventstream.Message{event("messageStart", `{"p":"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRS","role":"assistant"}`)}
	for i := range 196 {
		msgs = append(msgs, event("contentBlockDelta", fmt.Sprintf(`{"contentBlockIndex":0,"delta":{"text":"word%d "},"p":"abcdefghijklmnopqr"}`, i)))
	}
	msgs = append(msgs, event("contentBlockStop", `{"contentBlockIndex":0}`), event("messageStop", `{"stopReason":"end_turn"}`),
		event("metadata", `{"usage":{"inputTokens":25,"outputTokens":196,"totalTokens":221}}`))
	raw := encodeEvents(b, msgs...)
	buf := make([]byte, 32<<10)
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		r := newEventStreamSSE(io.NopCloser(bytes.NewReader(raw)))
		for {
			if _, err := r.Read(buf); err != nil {
				break
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*200), "ns/event")
}
