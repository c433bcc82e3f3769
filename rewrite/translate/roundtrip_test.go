package translate

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/detour-proxy/detour/internal/fakevendor"
	"github.com/detour-proxy/detour/rewrite"
	"github.com/detour-proxy/detour/rewrite/ir"
)

// These tests put internal/fakevendor, which speaks each vendor's exact wire
// format, on the other side of every translator: the encoded request must be
// one the fake accepts and reads as the app meant it (the tool result it
// quotes back proves that), and its answer must reach the app as the app's
// SDK expects.

// fakeNow pins the fake's created timestamps.
func fakeNow() time.Time { return time.Unix(1735689600, 0) }

// askFake sends an encoded upstream request to a fake vendor of shape up
// and returns its 200 answer: a normal one, or what the fault asks for.
func askFake(t testing.TB, up rewrite.Shape, u Upstream, opts fakevendor.Options, faults ...fakevendor.Fault) []byte {
	t.Helper()
	if opts.Now == nil {
		opts.Now = fakeNow
	}
	v := fakevendor.New(up, opts)
	v.Script(faults...)
	target := up.APIRoot() + u.Path
	if u.RawQuery != "" {
		target += "?" + u.RawQuery
	}
	rec := httptest.NewRecorder()
	v.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, target, bytes.NewReader(u.Body)))
	if rec.Code != http.StatusOK {
		t.Fatalf("fake %s answered %d: %s", up, rec.Code, rec.Body)
	}
	return rec.Body.Bytes()
}

// roundTrip encodes req for p.to, has the fake answer it, and returns what
// the app's SDK makes of the translated answer, stream or not.
func roundTrip(t *testing.T, req *ir.Request, p pair) summary {
	t.Helper()
	up, err := EncodeRequest(req, p.to, ir.EncodeOptions{Model: upstreamModel[p.to]})
	if err != nil {
		t.Fatalf("EncodeRequest: %v", err)
	}
	answer := askFake(t, p.to, up, fakevendor.Options{})
	if !req.Stream {
		out, err := Response(req, p.from, p.to, answer)
		if err != nil {
			t.Fatalf("Response: %v", err)
		}
		return summarizeResponse(t, p.from, out, appModel[p.from])
	}
	run := runStream(t, req, p, answer)
	for _, err := range run.errs {
		t.Errorf("upstream event: %v", err)
	}
	if len(run.closeAgain) > 0 {
		t.Errorf("a second Close appended %q", run.closeAgain)
	}
	return checkStream(t, p.from, run.out, streamCheck{includeUsage: req.IncludeUsage, model: appModel[p.from], strict: true})
}

// TestToolRoundTripThroughFakeVendor runs a tool loop across every pair:
// the first turn (the user's question) gets a tool call the app can parse,
// and the second (the app's fixture, which carries the call and its result)
// gets the final answer, which the fake builds from the result it received.
func TestToolRoundTripThroughFakeVendor(t *testing.T) {
	for _, p := range pairs {
		for _, stream := range []bool{false, true} {
			name := p.String() + "/json"
			if stream {
				name = p.String() + "/stream"
			}
			t.Run(name, func(t *testing.T) {
				// Turn 1: only the user's message; the fake calls the tool.
				req := decodeApp(t, p.from, stream)
				req.Messages = req.Messages[:1]
				got := roundTrip(t, req, p)
				if len(got.Tools) != 1 || got.Tools[0].Name != "get_weather" || got.Tools[0].Args != `{"city":"Paris"}` || got.Tools[0].ID == "" {
					t.Errorf("turn 1: tool calls %+v; want get_weather({\"city\":\"Paris\"}) with an id", got.Tools)
				}
				if got.Text != "" || got.Finish != toolReason[p.from] || got.Input == 0 || got.Output == 0 {
					t.Errorf("turn 1: text %q, finish %q, usage %d/%d; want no text, %q, usage", got.Text, got.Finish, got.Input, got.Output, toolReason[p.from])
				}

				// Turn 2: the call and its result; the fake quotes the result.
				got = roundTrip(t, decodeApp(t, p.from, stream), p)
				if want := fakevendor.ToolResultPrefix + `{"temp":21,"sky":"clear"}`; got.Text != want {
					t.Errorf("turn 2: text %q; want %q (the tool result as the app sent it)", got.Text, want)
				}
				if len(got.Tools) != 0 || got.Finish != stopReason[p.from] || got.Input == 0 || got.Output == 0 {
					t.Errorf("turn 2: tools %+v, finish %q, usage %d/%d; want none, %q, usage", got.Tools, got.Finish, got.Input, got.Output, stopReason[p.from])
				}
			})
		}
	}
}

// TestStreamErrorEndsStream checks Stream.Error, which the proxy uses when
// the upstream breaks off after the commit point: the app's error event is
// last, and Close adds nothing after it.
func TestStreamErrorEndsStream(t *testing.T) {
	for _, p := range pairs {
		t.Run(p.String(), func(t *testing.T) {
			req := decodeApp(t, p.from, true)
			s := NewStream(req, p.from, p.to)
			var out []byte
			for _, ev := range sseEvents(t, readFile(t, "upstream", string(p.to)+"_stream_early_end.sse")) {
				var err error
				if out, _, err = s.Event(out, ev); err != nil {
					t.Fatal(err)
				}
			}
			out = s.Error(out, rewrite.AppError{Status: 502, Class: "server_error", Message: "upstream went away"})
			n := len(out)
			if out = s.Close(out); len(out) != n {
				t.Errorf("Close after Error appended %q", out[n:])
			}
			if out = s.Error(out, rewrite.AppError{Status: 502, Class: "server_error", Message: "again"}); len(out) != n {
				t.Errorf("a second Error appended %q", out[n:])
			}
			got := checkStream(t, p.from, out, streamCheck{wantError: true, includeUsage: req.IncludeUsage, model: appModel[p.from], strict: true})
			if got.Text != fixtureTextCut || got.Error != "upstream went away" {
				t.Errorf("text %q, error %q; want %q and the error's message", got.Text, got.Error, fixtureTextCut)
			}
		})
	}
}

// TestStreamPerAttempt runs two translators of one request side by side, as
// a retry does after a failed attempt: neither may see the other's state.
func TestStreamPerAttempt(t *testing.T) {
	for _, p := range pairs {
		t.Run(p.String(), func(t *testing.T) {
			req := decodeApp(t, p.from, true)
			since := time.Now()
			alone := runStream(t, req, p, readFile(t, "upstream", string(p.to)+"_stream_tool.sse")).out
			a, b := NewStream(req, p.from, p.to), NewStream(req, p.from, p.to)
			var outA, outB []byte
			for _, ev := range sseEvents(t, readFile(t, "upstream", string(p.to)+"_stream_tool.sse")) {
				outA, _, _ = a.Event(outA, ev)
				outB, _, _ = b.Event(outB, ev)
			}
			outA, outB = a.Close(outA), b.Close(outB)
			alone, outA, outB = pinCreated(t, alone, since), pinCreated(t, outA, since), pinCreated(t, outB, since)
			if !bytes.Equal(outA, alone) || !bytes.Equal(outB, alone) {
				t.Errorf("interleaved translators differ from one alone:\nalone:\n%s\nfirst:\n%s\nsecond:\n%s", alone, outA, outB)
			}
		})
	}
}

// TestOpenAIAppWithoutUsage checks that an OpenAI app that did not ask for
// usage gets no usage field at all, though detour always asks its
// upstreams for usage.
func TestOpenAIAppWithoutUsage(t *testing.T) {
	for _, up := range []rewrite.Shape{rewrite.Anthropic, rewrite.Gemini} {
		p := pair{rewrite.OpenAI, up}
		for _, kind := range streamKinds {
			t.Run(p.String()+"/"+kind, func(t *testing.T) {
				req := decodeApp(t, p.from, true)
				req.IncludeUsage = false
				run := runStream(t, req, p, readFile(t, "upstream", string(up)+"_stream_"+kind+".sse"))
				checkStream(t, p.from, run.out, streamCheck{wantError: kind == "error", model: appModel[p.from], strict: true})
			})
		}
	}
}
