package translate

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/detour-proxy/detour/internal/testsupport"
	"github.com/detour-proxy/detour/rewrite"
	"github.com/detour-proxy/detour/rewrite/ir"
	"github.com/detour-proxy/detour/rewrite/sse"
)

// pair is one directed translation: an app speaking from, answered by an
// upstream speaking to.
type pair struct{ from, to rewrite.Shape }

func (p pair) String() string { return string(p.from) + "_to_" + string(p.to) }

// dir is the pair's golden directory.
func (p pair) dir() string { return filepath.Join("testdata", p.String()) }

// pairs are the six cross-vendor pairs (same-shape traffic takes the fast
// path and never meets a translator).
var pairs = func() []pair {
	var ps []pair
	for _, from := range rewrite.Shapes {
		for _, to := range rewrite.Shapes {
			if from != to {
				ps = append(ps, pair{from, to})
			}
		}
	}
	return ps
}()

// upstreamModel is the model the policy maps each upstream to.
var upstreamModel = map[rewrite.Shape]string{
	rewrite.OpenAI:    "gpt-4o",
	rewrite.Anthropic: "claude-sonnet-4-5",
	rewrite.Gemini:    "gemini-2.5-flash",
	// The Responses pairs (responses_test.go).
	rewrite.OpenAIResponses: "gpt-4.1",
}

// appModel is the model each app fixture asks for (Gemini's is in the path).
var appModel = upstreamModel

// appPath is the path an app's SDK posts to, relative to the vendor's API
// root, for a streaming request or not.
func appPath(app rewrite.Shape, stream bool) string {
	switch app {
	case rewrite.OpenAI:
		return "/chat/completions"
	case rewrite.Anthropic:
		return "/v1/messages"
	case rewrite.OpenAIResponses:
		return rewrite.ResponsesPath
	}
	if stream {
		return "/v1beta/models/gemini-2.5-flash:streamGenerateContent"
	}
	return "/v1beta/models/gemini-2.5-flash:generateContent"
}

// readFile reads a file of testdata.
func readFile(t testing.TB, elem ...string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(append([]string{"testdata"}, elem...)...))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// appBody is the app's request fixture of shape app (testdata/app), as its
// SDK sends it with stream off, or on. The streaming variant differs from
// the fixture only in what the SDK changes: "stream": true, and for OpenAI
// stream_options.include_usage; Gemini streams by path, not body.
func appBody(t testing.TB, app rewrite.Shape, stream bool) []byte {
	t.Helper()
	body := readFile(t, "app", string(app)+".json")
	if !stream || app == rewrite.Gemini {
		return body
	}
	on := `"stream": true`
	if app == rewrite.OpenAI {
		on = `"stream": true, "stream_options": {"include_usage": true}`
	}
	off := []byte(`"stream": false`)
	if bytes.Count(body, off) != 1 {
		t.Fatalf("app fixture %s: want exactly one %s", app, off)
	}
	return bytes.Replace(body, off, []byte(on), 1)
}

// decodeApp decodes the app fixture of shape app.
func decodeApp(t testing.TB, app rewrite.Shape, stream bool) *ir.Request {
	t.Helper()
	req, err := DecodeRequest(app, appBody(t, app, stream), appPath(app, stream))
	if err != nil {
		t.Fatalf("DecodeRequest(%s): %v", app, err)
	}
	if req.Stream != stream {
		t.Fatalf("DecodeRequest(%s): Stream %v; want %v", app, req.Stream, stream)
	}
	return req
}

// checkGolden compares got with the golden file, rewriting it with -update.
func checkGolden(t *testing.T, file string, got []byte) {
	t.Helper()
	testsupport.Golden(t, file, got)
}

// indent renders v (JSON values as json.RawMessage) as indented JSON
// without HTML escaping, so that golden files read as the bytes were sent.
func indent(t testing.TB, v any) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		t.Fatalf("indent: %v", err)
	}
	return buf.Bytes()
}

// createdField is OpenAI's created timestamp, which an OpenAI app is given
// from the clock when the upstream (Anthropic, Gemini) has none.
var createdField = regexp.MustCompile(`"created":([0-9]+)`)

// goldenCreated replaces every created timestamp in golden output.
const goldenCreated = `"created":1700000000`

// pinCreated checks that every created timestamp in b is one and the same
// time taken between since and now, and replaces it with goldenCreated, so
// that golden files do not depend on the clock.
func pinCreated(t testing.TB, b []byte, since time.Time) []byte {
	t.Helper()
	var first int64 = -1
	for _, m := range createdField.FindAllSubmatch(b, -1) {
		n, err := strconv.ParseInt(string(m[1]), 10, 64)
		if err != nil {
			t.Fatalf("created %s: %v", m[1], err)
		}
		if first < 0 {
			first = n
		}
		if n != first {
			t.Errorf("created %d after %d: one stream has one created time", n, first)
		}
		if n < since.Unix() || n > time.Now().Unix() {
			t.Errorf("created %d is not the time of the translation (%d…)", n, since.Unix())
		}
	}
	return createdField.ReplaceAll(b, []byte(goldenCreated))
}

// streamRun is the result of translating one upstream stream.
type streamRun struct {
	out []byte // the app's stream, Close included
	// closeAgain is what a second Close appended (it must be nothing).
	closeAgain []byte
	// errs are the decode errors of upstream events.
	errs []error
	// sawError reports that an upstream event decoded to a StreamError.
	sawError bool
}

// runStream translates the upstream stream of shape p.to into p.from's, one
// SSE event at a time as the proxy does, then closes it (twice, to check
// that closing events are written exactly once).
func runStream(t testing.TB, req *ir.Request, p pair, upstream []byte) streamRun {
	t.Helper()
	s := NewStream(req, p.from, p.to)
	var run streamRun
	rd := sse.NewReader(bytes.NewReader(upstream))
	for {
		ev, err := rd.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("sse: %v", err)
		}
		var evs []ir.StreamEvent
		run.out, evs, err = s.Event(run.out, ev)
		if err != nil {
			run.errs = append(run.errs, err)
		}
		for _, e := range evs {
			if e.Kind == ir.StreamError {
				run.sawError = true
			}
		}
	}
	run.out = s.Close(run.out)
	n := len(run.out)
	run.closeAgain = s.Close(run.out)[n:]
	return run
}

// streamKinds are the upstream stream fixtures, testdata/upstream/<shape>_stream_<kind>.sse.
var streamKinds = []string{"text", "tool", "early_end", "error"}

// sseEvents splits an SSE stream into events (cloned).
func sseEvents(t testing.TB, b []byte) []sse.Event {
	t.Helper()
	var evs []sse.Event
	rd := sse.NewReader(bytes.NewReader(b))
	for {
		ev, err := rd.Next()
		if errors.Is(err, io.EOF) {
			return evs
		}
		if err != nil {
			t.Fatalf("sse: %v", err)
		}
		evs = append(evs, ev.Clone())
	}
}
