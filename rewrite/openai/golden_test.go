package openai

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/detour-proxy/detour/internal/codectest"
	"github.com/detour-proxy/detour/internal/testsupport"
	"github.com/detour-proxy/detour/rewrite"
	"github.com/detour-proxy/detour/rewrite/ir"
	"github.com/detour-proxy/detour/rewrite/sse"
)

// testCreated is the created time of every golden stream and response.
const testCreated = 1735689600

// checkGolden compares got with the golden file, rewriting it with -update.
func checkGolden(t *testing.T, file string, got []byte) {
	t.Helper()
	testsupport.Golden(t, file, got)
}

// indentJSON makes a JSON body reviewable in a golden file.
func indentJSON(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := json.Indent(&buf, b, "", "  "); err != nil {
		t.Fatalf("invalid JSON %s: %v", b, err)
	}
	buf.WriteByte('\n')
	return buf.Bytes()
}

// fixedIDs makes generated ids deterministic for the duration of a test.
func fixedIDs(t *testing.T) {
	t.Helper()
	saved := newID
	n := 0
	newID = func() string { n++; return fmt.Sprintf("detourtest%d", n) }
	t.Cleanup(func() { newID = saved })
}

// inputs lists the files of a testdata directory with the given extension.
func inputs(t *testing.T, dir, ext string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", dir, "*"+ext))
	if err != nil || len(files) == 0 {
		t.Fatalf("no %s inputs in testdata/%s: %v", ext, dir, err)
	}
	return files
}

// TestGoldenRequests pins an app request decoded into the IR and that IR
// encoded for an OpenAI-compatible upstream.
func TestGoldenRequests(t *testing.T) {
	for _, file := range inputs(t, "requests", ".json") {
		base := strings.TrimSuffix(file, ".json")
		t.Run(filepath.Base(base), func(t *testing.T) {
			body, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			r, err := DecodeRequest(body)
			if err != nil {
				t.Fatal(err)
			}
			checkGolden(t, base+".ir.golden", codectest.MarshalIndent(t, r))
			out, err := EncodeRequest(r, ir.EncodeOptions{Model: "gpt-4o-mini"})
			if err != nil {
				t.Fatal(err)
			}
			checkGolden(t, base+".upstream.golden", indentJSON(t, out))
		})
	}
}

// TestGoldenIRRequests pins requests decoded from other vendors' shapes (as
// their IR) encoded for an OpenAI-compatible upstream, with the notes the
// encoder gave for the log.
func TestGoldenIRRequests(t *testing.T) {
	for _, file := range inputs(t, "ir_requests", ".json") {
		base := strings.TrimSuffix(file, ".json")
		t.Run(filepath.Base(base), func(t *testing.T) {
			var r ir.Request
			readJSON(t, file, &r)
			var notes []string
			out, err := EncodeRequest(&r, ir.EncodeOptions{Model: "gpt-4o", Notes: func(n string) { notes = append(notes, n) }})
			if err != nil {
				t.Fatal(err)
			}
			got := indentJSON(t, out)
			for _, n := range notes {
				got = append(got, "// note: "+n+"\n"...)
			}
			checkGolden(t, base+".upstream.golden", got)
		})
	}
}

// TestGoldenResponses pins an upstream chat.completion decoded into the IR,
// and that IR encoded back for the app.
func TestGoldenResponses(t *testing.T) {
	for _, file := range inputs(t, "responses", ".json") {
		base := strings.TrimSuffix(file, ".json")
		t.Run(filepath.Base(base), func(t *testing.T) {
			body, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			r, err := DecodeResponse(body)
			if err != nil {
				t.Fatal(err)
			}
			checkGolden(t, base+".ir.golden", codectest.MarshalIndent(t, r))
			out, err := EncodeResponse(r, "gpt-4o")
			if err != nil {
				t.Fatal(err)
			}
			checkGolden(t, base+".app.golden", indentJSON(t, out))
		})
	}
}

// TestGoldenIRResponses pins other vendors' answers (as their IR) encoded
// as a chat.completion for the app.
func TestGoldenIRResponses(t *testing.T) {
	for _, file := range inputs(t, "ir_responses", ".json") {
		base := strings.TrimSuffix(file, ".json")
		t.Run(filepath.Base(base), func(t *testing.T) {
			var r ir.Response
			readJSON(t, file, &r)
			out, err := EncodeResponse(&r, "gpt-4o")
			if err != nil {
				t.Fatal(err)
			}
			checkGolden(t, base+".app.golden", indentJSON(t, out))
		})
	}
}

// TestGoldenStreams pins an upstream stream decoded into IR events (one
// JSON line each) and those events encoded for an app that asked for usage.
func TestGoldenStreams(t *testing.T) {
	for _, file := range inputs(t, "streams", ".sse") {
		base := strings.TrimSuffix(file, ".sse")
		t.Run(filepath.Base(base), func(t *testing.T) {
			evs := decodeStreamFile(t, file)
			checkGolden(t, base+".ir.golden", eventLines(t, evs))
			checkGolden(t, base+".app.golden", encodeEvents(evs, ir.StreamOptions{
				Model: "gpt-4o", IncludeUsage: true, Created: testCreated,
			}))
		})
	}
}

// TestGoldenIRStreams pins IR event sequences of the kinds other vendors'
// decoders produce encoded for the app; files named *_usage.jsonl are
// encoded for an app that asked for usage.
func TestGoldenIRStreams(t *testing.T) {
	for _, file := range inputs(t, "ir_streams", ".jsonl") {
		base := strings.TrimSuffix(file, ".jsonl")
		t.Run(filepath.Base(base), func(t *testing.T) {
			fixedIDs(t)
			evs := readEventLines(t, file)
			checkGolden(t, base+".app.golden", encodeEvents(evs, ir.StreamOptions{
				Model: "gpt-4o", IncludeUsage: strings.HasSuffix(base, "_usage"), Created: testCreated,
			}))
		})
	}
}

func readJSON(t *testing.T, file string, v any) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
}

// decodeStreamFile reads an SSE file with the sse package and decodes every
// event.
func decodeStreamFile(t *testing.T, file string) []ir.StreamEvent {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return decodeStream(t, f)
}

func decodeStream(t *testing.T, r io.Reader) []ir.StreamEvent {
	t.Helper()
	rd := sse.NewReader(r)
	d := NewStreamDecoder()
	var all []ir.StreamEvent
	for {
		ev, err := rd.Next()
		if errors.Is(err, io.EOF) {
			return all
		}
		if err != nil {
			t.Fatal(err)
		}
		evs, err := d.Decode(ev)
		if err != nil {
			t.Fatalf("Decode(%q): %v", ev.Raw, err)
		}
		all = append(all, evs...)
	}
}

// encodeEvents runs evs through a StreamEncoder and closes it.
func encodeEvents(evs []ir.StreamEvent, o ir.StreamOptions) []byte {
	e := NewStreamEncoder(o)
	var out []byte
	for _, ev := range evs {
		out = e.Encode(out, ev)
	}
	return e.Close(out)
}

// eventJSON is the golden-file form of an ir.StreamEvent, which has no JSON
// tags of its own.
type eventJSON struct {
	Kind      string            `json:"kind"`
	Index     *int              `json:"index,omitempty"`
	ID        string            `json:"id,omitempty"`
	Model     string            `json:"model,omitempty"`
	Name      string            `json:"name,omitempty"`
	Text      string            `json:"text,omitempty"`
	Signature string            `json:"signature,omitempty"`
	Finish    ir.FinishReason   `json:"finish,omitempty"`
	Usage     *ir.TokenUsage    `json:"usage,omitempty"`
	Err       *rewrite.AppError `json:"err,omitempty"`
}

var kindNames = map[ir.StreamEventKind]string{
	ir.StreamStart: "start", ir.StreamText: "text", ir.StreamThinking: "thinking",
	ir.StreamToolStart: "tool_start", ir.StreamToolArgs: "tool_args", ir.StreamFinish: "finish",
	ir.StreamUsage: "usage", ir.StreamError: "error",
}

func toEventJSON(ev ir.StreamEvent) eventJSON {
	j := eventJSON{
		Kind: kindNames[ev.Kind], ID: ev.ID, Model: ev.Model, Name: ev.Name, Text: ev.Text,
		Signature: ev.Signature, Finish: ev.Finish, Err: ev.Err,
	}
	if ev.Kind == ir.StreamToolStart || ev.Kind == ir.StreamToolArgs {
		j.Index = &ev.Index
	}
	if ev.Usage != (ir.TokenUsage{}) || ev.Kind == ir.StreamUsage {
		j.Usage = &ev.Usage
	}
	return j
}

func fromEventJSON(j eventJSON) ir.StreamEvent {
	ev := ir.StreamEvent{
		ID: j.ID, Model: j.Model, Name: j.Name, Text: j.Text, Signature: j.Signature,
		Finish: j.Finish, Err: j.Err,
	}
	for k, name := range kindNames {
		if name == j.Kind {
			ev.Kind = k
		}
	}
	if j.Index != nil {
		ev.Index = *j.Index
	}
	if j.Usage != nil {
		ev.Usage = *j.Usage
	}
	return ev
}

// eventLines renders events one JSON object per line.
func eventLines(t *testing.T, evs []ir.StreamEvent) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	for _, ev := range evs {
		if err := enc.Encode(toEventJSON(ev)); err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}

func readEventLines(t *testing.T, file string) []ir.StreamEvent {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var evs []ir.StreamEvent
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var j eventJSON
		if err := json.Unmarshal(sc.Bytes(), &j); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if j.Kind == "" || fromEventJSON(j).Kind == 0 {
			t.Fatalf("%s: unknown kind in %s", file, sc.Bytes())
		}
		evs = append(evs, fromEventJSON(j))
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return evs
}
