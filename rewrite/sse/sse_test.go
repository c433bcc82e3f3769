package sse

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"
)

// readAll reads every event from r until an error, cloning each one.
func readAll(r *Reader) ([]Event, error) {
	var evs []Event
	for {
		ev, err := r.Next()
		if err != nil {
			return evs, err
		}
		evs = append(evs, ev.Clone())
	}
}

// chunkReaders returns the same input delivered in the ways a network can
// deliver it: all at once, a byte at a time, and in small odd-sized pieces.
func chunkReaders(in string) map[string]io.Reader {
	return map[string]io.Reader{
		"whole":    strings.NewReader(in),
		"onebyte":  iotest.OneByteReader(strings.NewReader(in)),
		"halves":   iotest.HalfReader(strings.NewReader(in)),
		"dataerr":  iotest.DataErrReader(strings.NewReader(in)),
		"chunks7":  &chunkReader{s: in, n: 7},
		"chunks13": &chunkReader{s: in, n: 13},
	}
}

// chunkReader returns at most n bytes per Read.
type chunkReader struct {
	s string
	n int
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if c.s == "" {
		return 0, io.EOF
	}
	k := min(c.n, len(p), len(c.s))
	copy(p, c.s[:k])
	c.s = c.s[k:]
	return k, nil
}

// testdata/*.sse hold the example streams of docs/vendors.md#streams and
// the in-stream errors of its vendor sections (Anthropic overloaded right after
// message_start, OpenAI and OpenRouter error chunks, Gemini error chunks
// with and without "data:"), byte for byte. rewrite's InspectEvent tests
// read them too.
func TestReaderVendorStreamsRoundTripByteExact(t *testing.T) {
	files, err := filepath.Glob("testdata/*.sse")
	if err != nil || len(files) == 0 {
		t.Fatalf("no testdata: %v", err)
	}
	for _, f := range files {
		in, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for how, rd := range chunkReaders(string(in)) {
			t.Run(filepath.Base(f)+"/"+how, func(t *testing.T) {
				evs, err := readAll(NewReader(rd))
				if err != io.EOF {
					t.Fatalf("err = %v; want io.EOF", err)
				}
				var raw bytes.Buffer
				for _, ev := range evs {
					raw.Write(ev.Raw)
				}
				if !bytes.Equal(raw.Bytes(), in) {
					t.Errorf("concatenated Raw differs from the stream:\n got %q\nwant %q", raw.Bytes(), in)
				}
				// Every event of the vendor streams has data, each on one line.
				for i, ev := range evs {
					if ev.Comment {
						continue
					}
					if len(ev.Data) == 0 || bytes.ContainsAny(ev.Data, "\r\n") {
						t.Errorf("event %d: Data = %q", i, ev.Data)
					}
				}
			})
		}
	}
}

func TestReaderAnthropicEventNamesAndData(t *testing.T) {
	in, err := os.ReadFile("testdata/anthropic_text.sse")
	if err != nil {
		t.Fatal(err)
	}
	evs, err := readAll(NewReader(bytes.NewReader(in)))
	if err != io.EOF {
		t.Fatal(err)
	}
	want := []string{"message_start", "content_block_start", "ping", "content_block_delta", "content_block_stop", "message_delta", "message_stop"}
	if len(evs) != len(want) {
		t.Fatalf("got %d events; want %d", len(evs), len(want))
	}
	for i, ev := range evs {
		if ev.Name != want[i] {
			t.Errorf("event %d: Name = %q; want %q", i, ev.Name, want[i])
		}
		if !bytes.HasPrefix(ev.Data, []byte(`{"type":"`+want[i]+`"`)) {
			t.Errorf("event %d: Data = %q", i, ev.Data)
		}
	}
}

func TestReaderParsesFieldsPerSpec(t *testing.T) {
	type want struct {
		name    string
		data    string
		raw     string
		comment bool
		bare    bool
	}
	tests := []struct {
		desc string
		in   string
		want []want
	}{
		{"LF", "data: a\n\n", []want{{data: "a", raw: "data: a\n\n"}}},
		{"CRLF", "event: x\r\ndata: a\r\n\r\n", []want{{name: "x", data: "a", raw: "event: x\r\ndata: a\r\n\r\n"}}},
		{"CR", "event: x\rdata: a\r\rdata: b\r\r", []want{
			{name: "x", data: "a", raw: "event: x\rdata: a\r\r"},
			{data: "b", raw: "data: b\r\r"},
		}},
		{"mixed endings", "data: a\r\ndata: b\rdata: c\n\r\n", []want{{data: "a\nb\nc", raw: "data: a\r\ndata: b\rdata: c\n\r\n"}}},
		{"no space after colon", "data:a\n\n", []want{{data: "a", raw: "data:a\n\n"}}},
		{"only one space is removed", "data:  a \n\n", []want{{data: " a ", raw: "data:  a \n\n"}}},
		{"multi-line data joined with LF", "data: a\ndata:\ndata: b\n\n", []want{{data: "a\n\nb", raw: "data: a\ndata:\ndata: b\n\n"}}},
		{"data without colon is an empty data line", "data\ndata\n\n", []want{{data: "\n", raw: "data\ndata\n\n"}}},
		{"last event field wins", "event: a\nevent: b\ndata: x\n\n", []want{{name: "b", data: "x", raw: "event: a\nevent: b\ndata: x\n\n"}}},
		{"id and retry only in Raw", "id: 7\nretry: 100\ndata: x\n\n", []want{{data: "x", raw: "id: 7\nretry: 100\ndata: x\n\n"}}},
		{"unknown field ignored", "foo: bar\ndata: x\n\n", []want{{data: "x", raw: "foo: bar\ndata: x\n\n"}}},
		{"colon inside value kept", "data: {\"a\":\"b:c\"}\n\n", []want{{data: `{"a":"b:c"}`, raw: "data: {\"a\":\"b:c\"}\n\n"}}},
		{"comment only", ": keep-alive\n\n", []want{{comment: true, raw: ": keep-alive\n\n"}}},
		{"comment with data is not a comment event", ": hi\ndata: x\n\n", []want{{data: "x", raw: ": hi\ndata: x\n\n"}}},
		{"final event without blank line", "data: a\n\ndata: b\n", []want{{data: "a", raw: "data: a\n\n"}, {data: "b", raw: "data: b\n"}}},
		{"final line without newline", "event: e\ndata: b", []want{{name: "e", data: "b", raw: "event: e\ndata: b"}}},
		{"trailing CR at EOF ends the line", "data: b\r", []want{{data: "b", raw: "data: b\r"}}},
		{"stray blank lines are empty events", "\ndata: a\n\n\n", []want{{raw: "\n"}, {data: "a", raw: "data: a\n\n"}, {raw: "\n"}}},
		{"BOM ignored but kept in Raw", "\xEF\xBB\xBFdata: a\n\n", []want{{data: "a", raw: "\xEF\xBB\xBFdata: a\n\n"}}},
		{"BOM only at stream start", "data: a\n\n\xEF\xBB\xBFdata: b\n\n", []want{{data: "a", raw: "data: a\n\n"}, {raw: "\xEF\xBB\xBFdata: b\n\n"}}},
		{"bare JSON object line is data", "{\"error\":{\"code\":503}}\n\n", []want{{data: `{"error":{"code":503}}`, bare: true, raw: "{\"error\":{\"code\":503}}\n\n"}}},
		{"bare JSON array line is data", "[{\"error\":{}}]\n", []want{{data: `[{"error":{}}]`, bare: true, raw: "[{\"error\":{}}]\n"}}},
		{"bare line joins data lines", "data: a\n{\"b\":1}\n\n", []want{{data: "a\n{\"b\":1}", bare: true, raw: "data: a\n{\"b\":1}\n\n"}}},
		{"empty input", "", nil},
	}
	for _, tt := range tests {
		for how, rd := range chunkReaders(tt.in) {
			t.Run(tt.desc+"/"+how, func(t *testing.T) {
				evs, err := readAll(NewReader(rd))
				if err != io.EOF {
					t.Fatalf("err = %v; want io.EOF", err)
				}
				if len(evs) != len(tt.want) {
					t.Fatalf("got %d events %+v; want %d", len(evs), evs, len(tt.want))
				}
				for i, w := range tt.want {
					ev := evs[i]
					if ev.Name != w.name || string(ev.Data) != w.data || string(ev.Raw) != w.raw || ev.Comment != w.comment || ev.Bare != w.bare {
						t.Errorf("event %d = {Name:%q Data:%q Raw:%q Comment:%v Bare:%v}; want %+v",
							i, ev.Name, ev.Data, ev.Raw, ev.Comment, ev.Bare, w)
					}
				}
			})
		}
	}
}

func TestReaderReturnsEOFAgainAfterEnd(t *testing.T) {
	r := NewReader(strings.NewReader("data: a"))
	if _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := r.Next(); err != io.EOF {
			t.Fatalf("err = %v; want io.EOF", err)
		}
	}
}

func TestReaderWaitsForByteAfterTrailingCR(t *testing.T) {
	// "data: a\r" then "\n\n": the CR is half of a CRLF, not a line of its
	// own followed by a blank line.
	pr, pw := io.Pipe()
	r := NewReader(pr)
	done := make(chan Event)
	go func() {
		ev, err := r.Next()
		if err != nil {
			t.Error(err)
		}
		done <- ev.Clone()
	}()
	pw.Write([]byte("data: a\r"))
	pw.Write([]byte("\n\r\n"))
	ev := <-done
	if string(ev.Raw) != "data: a\r\n\r\n" || string(ev.Data) != "a" {
		t.Errorf("got Raw %q Data %q", ev.Raw, ev.Data)
	}
	pw.Close()
}

func TestReaderEventTooLarge(t *testing.T) {
	ev := "data: " + strings.Repeat("x", 100) + "\n\n" // 108 bytes
	t.Run("exactly the limit", func(t *testing.T) {
		r := NewReader(strings.NewReader(ev + ev))
		r.SetMaxEventSize(len(ev))
		for range 2 {
			if got, err := r.Next(); err != nil || string(got.Raw) != ev {
				t.Fatalf("Next = %q, %v", got.Raw, err)
			}
		}
	})
	for _, in := range []string{ev, "data: " + strings.Repeat("x", 101) + "\n", "data: " + strings.Repeat("x", 1000), ": " + strings.Repeat("x", 200) + "\n"} {
		t.Run(fmt.Sprintf("over the limit/%d", len(in)), func(t *testing.T) {
			r := NewReader(iotest.OneByteReader(strings.NewReader("data: ok\n\n" + in)))
			r.SetMaxEventSize(len(ev) - 1)
			if got, err := r.Next(); err != nil || string(got.Data) != "ok" {
				t.Fatalf("first event: %q, %v", got.Data, err)
			}
			for range 2 { // sticky
				if _, err := r.Next(); err != ErrEventTooLarge {
					t.Fatalf("err = %v; want ErrEventTooLarge", err)
				}
			}
		})
	}
	t.Run("default limit", func(t *testing.T) {
		big := "data: " + strings.Repeat("x", DefaultMaxEventSize) + "\n\n"
		if _, err := NewReader(strings.NewReader(big)).Next(); err != ErrEventTooLarge {
			t.Fatalf("err = %v; want ErrEventTooLarge", err)
		}
		ok := "data: " + strings.Repeat("x", DefaultMaxEventSize-8) + "\n\n"
		if got, err := NewReader(strings.NewReader(ok)).Next(); err != nil || len(got.Raw) != DefaultMaxEventSize {
			t.Fatalf("Next = %d bytes, %v", len(got.Raw), err)
		}
	})
}

// flakyReader returns err once after delivering first, then delivers rest.
type flakyReader struct {
	first, rest string
	err         error
	failed      bool
}

func (f *flakyReader) Read(p []byte) (int, error) {
	if f.first != "" {
		n := copy(p, f.first)
		f.first = f.first[n:]
		return n, nil
	}
	if !f.failed {
		f.failed = true
		return 0, f.err
	}
	if f.rest == "" {
		return 0, io.EOF
	}
	n := copy(p, f.rest)
	f.rest = f.rest[n:]
	return n, nil
}

func TestReaderReadErrorDoesNotReturnPartialEvent(t *testing.T) {
	// A truncated body (net/http reports io.ErrUnexpectedEOF) must not look
	// like a complete final event: its half JSON would be taken as content.
	boom := errors.New("connection reset")
	f := &flakyReader{first: "data: a\n\ndata: {\"cho", rest: "ices\":[]}\n\n", err: boom}
	r := NewReader(f)
	if ev, err := r.Next(); err != nil || string(ev.Data) != "a" {
		t.Fatalf("first: %q, %v", ev.Data, err)
	}
	if _, err := r.Next(); err != boom {
		t.Fatalf("err = %v; want %v", err, boom)
	}
	if got := r.Buffered(); got != len("data: {\"cho") {
		t.Errorf("Buffered = %d", got)
	}
	// Like bufio, the error is returned once; reading may go on.
	if ev, err := r.Next(); err != nil || string(ev.Data) != `{"choices":[]}` {
		t.Fatalf("after error: %q, %v", ev.Data, err)
	}
	if _, err := r.Next(); err != io.EOF {
		t.Fatalf("err = %v; want io.EOF", err)
	}
}

type zeroReader struct{}

func (zeroReader) Read([]byte) (int, error) { return 0, nil }

func TestReaderNoProgress(t *testing.T) {
	if _, err := NewReader(zeroReader{}).Next(); err != io.ErrNoProgress {
		t.Fatalf("err = %v; want io.ErrNoProgress", err)
	}
}

func TestEventSlicesAreReusedAndCloneKeepsThem(t *testing.T) {
	in := "data: first\ndata: line\n\ndata: second\ndata: xxxx\n\n"
	r := NewReader(strings.NewReader(in))
	ev, _ := r.Next()
	kept := ev.Clone()
	ev.Data[0] = 'X' // the copy must not share memory with the Reader
	if _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	if string(kept.Data) != "first\nline" || string(kept.Raw) != "data: first\ndata: line\n\n" {
		t.Errorf("Clone = %q / %q", kept.Data, kept.Raw)
	}
	if (Event{}).Clone().Data != nil {
		t.Error("Clone of nil Data is not nil")
	}
}

func TestReaderBuffered(t *testing.T) {
	r := NewReader(strings.NewReader("data: a\n\ndata: b\n\n"))
	if _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	if got := r.Buffered(); got != len("data: b\n\n") {
		t.Errorf("Buffered = %d", got)
	}
}

func TestReaderBOMAfterReadError(t *testing.T) {
	// Next starts over after a read error; the BOM must still be skipped.
	boom := errors.New("timeout")
	r := NewReader(&flakyReader{first: "\xEF\xBB\xBFdata: a\n", rest: "\n", err: boom})
	if _, err := r.Next(); err != boom {
		t.Fatalf("err = %v; want %v", err, boom)
	}
	if ev, err := r.Next(); err != nil || string(ev.Data) != "a" {
		t.Fatalf("Next = %q, %v", ev.Data, err)
	}
}

func TestReaderReset(t *testing.T) {
	r := NewReader(strings.NewReader("\xEF\xBB\xBFdata: a\n\ndata: partial"))
	r.Next()
	r.Reset(strings.NewReader("\xEF\xBB\xBFdata: b\n\n"))
	ev, err := r.Next()
	if err != nil || string(ev.Data) != "b" {
		t.Fatalf("after Reset: %q, %v", ev.Data, err)
	}
}

func TestWriteEventRoundTrips(t *testing.T) {
	tests := []struct {
		name, data, want, wantData string
	}{
		{"", `{"a":1}`, "data: {\"a\":1}\n\n", `{"a":1}`},
		{"message_stop", `{"type":"message_stop"}`, "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n", `{"type":"message_stop"}`},
		{"", "a\nb", "data: a\ndata: b\n\n", "a\nb"},
		{"", "a\r\nb\rc", "data: a\ndata: b\ndata: c\n\n", "a\nb\nc"},
		{"", "", "data: \n\n", ""},
		{"", "a\n", "data: a\ndata: \n\n", "a\n"},
	}
	for _, tt := range tests {
		var buf bytes.Buffer
		if err := WriteEvent(&buf, tt.name, []byte(tt.data)); err != nil {
			t.Fatal(err)
		}
		if buf.String() != tt.want {
			t.Errorf("WriteEvent(%q, %q) = %q; want %q", tt.name, tt.data, buf.String(), tt.want)
		}
		ev, err := NewReader(&buf).Next()
		if err != nil || ev.Name != tt.name || string(ev.Data) != tt.wantData {
			t.Errorf("read back %q: Name %q Data %q err %v", tt.want, ev.Name, ev.Data, err)
		}
	}
	if err := WriteEvent(io.Discard, "a\nb", nil); err != ErrInvalidName {
		t.Errorf("err = %v; want ErrInvalidName", err)
	}
}

// countingWriter counts Write calls.
type countingWriter struct{ n int }

func (c *countingWriter) Write(p []byte) (int, error) { c.n++; return len(p), nil }

func TestWriteEventOneWriteNoAlloc(t *testing.T) {
	var w countingWriter
	data := []byte(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi!"}}`)
	allocs := testing.AllocsPerRun(100, func() {
		WriteEvent(&w, "content_block_delta", data)
	})
	if w.n != 101 {
		t.Errorf("Write called %d times for 101 events", w.n)
	}
	if allocs > 0 {
		t.Errorf("WriteEvent allocates %v times per event", allocs)
	}
}

// openAIStream builds an n-event OpenAI chat stream like a real one.
func openAIStream(n int) []byte {
	var b bytes.Buffer
	b.WriteString(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1735689600,"model":"gpt-4o","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}],"usage":null}` + "\n\n")
	for i := 0; i < n-3; i++ {
		fmt.Fprintf(&b, `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1735689600,"model":"gpt-4o","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"content":" token%d"},"logprobs":null,"finish_reason":null}],"usage":null}`+"\n\n", i)
	}
	b.WriteString(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1735689600,"model":"gpt-4o","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":null}` + "\n\n")
	b.WriteString("data: [DONE]\n\n")
	return b.Bytes()
}

func TestReaderDoesNotAllocatePerEvent(t *testing.T) {
	stream := openAIStream(200)
	anth, _ := os.ReadFile("testdata/anthropic_text.sse")
	multi := []byte(strings.Repeat("event: e\ndata: a\ndata: b\n\n", 50))
	for name, in := range map[string][]byte{"openai": stream, "anthropic": anth, "multiline": multi} {
		r := NewReader(nil)
		br := bytes.NewReader(in)
		run := func() {
			br.Reset(in)
			r.Reset(br)
			for {
				if _, err := r.Next(); err != nil {
					break
				}
			}
		}
		run() // warm up: buffers and interned names
		if allocs := testing.AllocsPerRun(20, run); allocs > 0 {
			t.Errorf("%s: %v allocations per stream", name, allocs)
		}
	}
}

func BenchmarkReader(b *testing.B) {
	stream := openAIStream(200)
	br := bytes.NewReader(stream)
	r := NewReader(br)
	b.SetBytes(int64(len(stream)))
	b.ReportAllocs()
	for b.Loop() {
		br.Reset(stream)
		r.Reset(br)
		n := 0
		for {
			_, err := r.Next()
			if err != nil {
				break
			}
			n++
		}
		if n != 200 {
			b.Fatalf("read %d events", n)
		}
	}
}

func BenchmarkReaderNewPerStream(b *testing.B) {
	stream := openAIStream(200)
	b.SetBytes(int64(len(stream)))
	b.ReportAllocs()
	for b.Loop() {
		r := NewReader(bytes.NewReader(stream))
		for {
			if _, err := r.Next(); err != nil {
				break
			}
		}
	}
}

func BenchmarkWriteEvent(b *testing.B) {
	data := []byte(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi!"}}`)
	b.ReportAllocs()
	for b.Loop() {
		WriteEvent(io.Discard, "content_block_delta", data)
	}
}
