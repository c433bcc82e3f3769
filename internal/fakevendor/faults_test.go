package fakevendor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/detour-proxy/detour/rewrite"
)

func TestHangEndsWhenClientGoesAway(t *testing.T) {
	t.Parallel()
	for _, shape := range rewrite.Shapes {
		t.Run(string(shape), func(t *testing.T) {
			v, srv := serve(t, shape, Options{})
			v.Script(Fault{Kind: Hang})
			ctx, cancel := context.WithCancel(context.Background())
			path, body := pathAndBody(shape, true)
			done := make(chan error, 1)
			go func() {
				_, err := post(t, ctx, srv.URL+path, body)
				done <- err
			}()
			waitFor(t, 2*time.Second, "the request to arrive", func() bool { return v.InFlight() == 1 })
			select {
			case err := <-done:
				t.Fatalf("hang answered: %v", err)
			case <-time.After(50 * time.Millisecond):
			}
			cancel()
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Errorf("client error = %v; want context.Canceled", err)
			}
			waitFor(t, 2*time.Second, "the handler to return", func() bool { return v.InFlight() == 0 })
		})
	}
}

func TestHangDelayDropsConnection(t *testing.T) {
	t.Parallel()
	v, srv := serve(t, rewrite.OpenAI, Options{})
	v.Script(Fault{Kind: Hang, Delay: 30 * time.Millisecond})
	start := time.Now()
	path, body := pathAndBody(rewrite.OpenAI, false)
	_, err := post(t, context.Background(), srv.URL+path, body)
	if err == nil {
		t.Fatal("a hang answered; want the connection dropped")
	}
	if d := time.Since(start); d < 30*time.Millisecond {
		t.Errorf("dropped after %v; want at least the 30ms delay", d)
	}
}

func TestSlowFirstByte(t *testing.T) {
	t.Parallel()
	v, srv := serve(t, rewrite.Anthropic, Options{})
	v.Script(Fault{Kind: SlowFirstByte, Delay: 80 * time.Millisecond}, Fault{Kind: SlowFirstByte, Delay: time.Minute})
	start := time.Now()
	got := ask(t, srv, rewrite.Anthropic, false)
	if d := time.Since(start); d < 80*time.Millisecond {
		t.Errorf("answered after %v; want at least 80ms", d)
	}
	if got.status != 200 || !bytes.Contains(got.body, []byte(`"stop_reason":"end_turn"`)) {
		t.Errorf("slow answer = %d %s; want the normal answer", got.status, got.body)
	}

	// The second, a minute long, gives up when the client does.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	path, body := pathAndBody(rewrite.Anthropic, false)
	if _, err := post(t, ctx, srv.URL+path, body); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("client error = %v; want its deadline", err)
	}
	waitFor(t, 2*time.Second, "the handler to return", func() bool { return v.InFlight() == 0 })
}

// streamEvents is a stream's events as (name or kind, data) for every shape:
// Anthropic by event name; OpenAI and Gemini by what the data holds.
func streamEvents(t *testing.T, shape rewrite.Shape, body []byte) []string {
	t.Helper()
	var out []string
	for _, e := range parseSSE(t, body) {
		switch {
		case shape == rewrite.Anthropic:
			out = append(out, e.name)
		case e.data == "[DONE]":
			out = append(out, "done")
		case strings.HasPrefix(e.data, `{"error":`):
			out = append(out, "error")
		case strings.Contains(e.data, `"role":"assistant","content":""`):
			out = append(out, "role")
		case strings.Contains(e.data, `"finish_reason":"stop"`), strings.Contains(e.data, `"finishReason":"STOP"`):
			out = append(out, "finish")
		default:
			out = append(out, "content")
		}
	}
	return out
}

func TestStreamFaults(t *testing.T) {
	t.Parallel()
	type want map[rewrite.Shape]string
	for _, tc := range []struct {
		fault Fault
		want  want
		// wantErrData is a substring of the error event's data, per shape.
		wantErrData want
	}{
		{Fault{}, want{
			rewrite.OpenAI:    "role content content content finish done",
			rewrite.Anthropic: "message_start content_block_start ping content_block_delta content_block_delta content_block_delta content_block_stop message_delta message_stop",
			rewrite.Gemini:    "content content finish",
		}, nil},
		{Fault{Kind: StreamErrorEarly}, want{
			rewrite.OpenAI:    "role error",
			rewrite.Anthropic: "message_start error",
			rewrite.Gemini:    "error",
		}, want{
			rewrite.OpenAI:    `{"error":{"message":"The server had an error while processing your request. Sorry about that!","type":"server_error","param":null,"code":null}}`,
			rewrite.Anthropic: `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`,
			rewrite.Gemini:    `{"error":{"code":503,"message":"The model is overloaded. Please try again later.","status":"UNAVAILABLE"}}`,
		}},
		{Fault{Kind: StreamErrorMid, Class: ClassRateLimit}, want{
			rewrite.OpenAI:    "role content content error",
			rewrite.Anthropic: "message_start content_block_start ping content_block_delta content_block_delta error",
			rewrite.Gemini:    "content content error",
		}, want{
			rewrite.OpenAI:    `"code":"rate_limit_exceeded"`,
			rewrite.Anthropic: `"type":"rate_limit_error"`,
			rewrite.Gemini:    `"code":429,`,
		}},
		{Fault{Kind: StreamEOF}, want{
			rewrite.OpenAI:    "role content content",
			rewrite.Anthropic: "message_start content_block_start ping content_block_delta content_block_delta",
			rewrite.Gemini:    "content content",
		}, nil},
		{Fault{Kind: StreamStall, Delay: 20 * time.Millisecond}, want{
			rewrite.OpenAI:    "role content content content finish done",
			rewrite.Anthropic: "message_start content_block_start ping content_block_delta content_block_delta content_block_delta content_block_stop message_delta message_stop",
			rewrite.Gemini:    "content content finish",
		}, nil},
	} {
		for _, shape := range rewrite.Shapes {
			t.Run(tc.fault.String()+"/"+string(shape), func(t *testing.T) {
				v, srv := serve(t, shape, Options{})
				v.Script(tc.fault)
				got := ask(t, srv, shape, true)
				if got.status != 200 || got.readErr != nil {
					t.Fatalf("status %d, read error %v", got.status, got.readErr)
				}
				if ct := got.header.Get("Content-Type"); ct != "text/event-stream" {
					t.Errorf("Content-Type = %q", ct)
				}
				if events := strings.Join(streamEvents(t, shape, got.body), " "); events != tc.want[shape] {
					t.Errorf("events = %s\nwant     %s", events, tc.want[shape])
				}
				if w := tc.wantErrData[shape]; w != "" {
					all := parseSSE(t, got.body)
					if last := all[len(all)-1].data; !strings.Contains(last, w) {
						t.Errorf("error event = %s; want %s", last, w)
					}
				}
			})
		}
	}
}

func TestStreamCutDropsConnection(t *testing.T) {
	t.Parallel()
	for _, shape := range rewrite.Shapes {
		t.Run(string(shape), func(t *testing.T) {
			v, srv := serve(t, shape, Options{})
			v.Script(Fault{Kind: StreamCut})
			got := ask(t, srv, shape, true)
			if got.status != 200 || !errors.Is(got.readErr, io.ErrUnexpectedEOF) {
				t.Fatalf("status %d, read error %v; want 200 then an unexpected EOF", got.status, got.readErr)
			}
			events := streamEvents(t, shape, got.body)
			n := 0
			for _, e := range events {
				if e == "content" || e == "content_block_delta" {
					n++
				}
			}
			if n != 2 {
				t.Errorf("events before the cut = %v; want 2 content events", events)
			}
			for _, e := range events {
				if e == "finish" || e == "done" || e == "message_stop" || e == "error" {
					t.Errorf("closing or error event %q before the cut", e)
				}
			}
		})
	}
}

func TestStreamStallUntilClientGoesAway(t *testing.T) {
	t.Parallel()
	v, srv := serve(t, rewrite.Anthropic, Options{})
	v.Script(Fault{Kind: StreamStall})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	path, body := pathAndBody(rewrite.Anthropic, true)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+path, strings.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()

	// Read until the second delta; then nothing more comes.
	got := make(chan []byte, 1)
	go func() {
		var buf bytes.Buffer
		b := make([]byte, 1024)
		for {
			n, err := resp.Body.Read(b)
			buf.Write(b[:n])
			if strings.Count(buf.String(), "event: content_block_delta") == 2 && bytes.HasSuffix(buf.Bytes(), []byte("\n\n")) {
				got <- bytes.Clone(buf.Bytes())
				// Wait for more; there should be none before cancel.
				n, _ = resp.Body.Read(b)
				got <- b[:n]
				return
			}
			if err != nil {
				got <- nil
				return
			}
		}
	}()
	select {
	case b := <-got:
		if b == nil {
			t.Fatal("stream ended before the stall")
		}
	case <-time.After(2 * time.Second):
		t.Fatal("no content before the stall")
	}
	select {
	case b := <-got:
		t.Fatalf("bytes after the stall: %q", b)
	case <-time.After(100 * time.Millisecond):
	}
	cancel()
	if b := <-got; len(b) != 0 {
		t.Errorf("bytes after cancel: %q", b)
	}
	waitFor(t, 2*time.Second, "the handler to return", func() bool { return v.InFlight() == 0 })
}

func TestStreamFaultsOnNonStreamingRequests(t *testing.T) {
	t.Parallel()
	for _, shape := range rewrite.Shapes {
		t.Run(string(shape), func(t *testing.T) {
			v, srv := serve(t, shape, Options{})
			v.Script(
				Fault{Kind: StreamErrorEarly},
				Fault{Kind: StreamErrorMid, Class: ClassAuth},
				Fault{Kind: StreamCut},
				Fault{Kind: StreamEOF},
				Fault{Kind: StreamStall, Delay: 20 * time.Millisecond},
			)
			early := ask(t, srv, shape, false)
			if want := streamErrorClass(shape); early.status != classStatus(shape, want) {
				t.Errorf("stream_error_early: status %d; want the %s status %d", early.status, want, classStatus(shape, want))
			}
			if mid := ask(t, srv, shape, false); mid.status != classStatus(shape, ClassAuth) {
				t.Errorf("stream_error_mid:auth: status %d", mid.status)
			}
			cut := ask(t, srv, shape, false)
			if !errors.Is(cut.readErr, io.ErrUnexpectedEOF) || json.Valid(cut.body) || len(cut.body) == 0 {
				t.Errorf("stream_cut: read error %v, body %q; want half a body, then an unexpected EOF", cut.readErr, cut.body)
			}
			eof := ask(t, srv, shape, false)
			if eof.readErr != nil || json.Valid(eof.body) || len(eof.body) == 0 {
				t.Errorf("stream_eof: read error %v, body %q; want half a body, cleanly", eof.readErr, eof.body)
			}
			stall := ask(t, srv, shape, false)
			if stall.readErr != nil || !json.Valid(stall.body) {
				t.Errorf("stream_stall: read error %v, body %q; want the whole body after the stall", stall.readErr, stall.body)
			}
		})
	}
}

func TestBad200s(t *testing.T) {
	t.Parallel()
	for _, shape := range rewrite.Shapes {
		t.Run(string(shape), func(t *testing.T) {
			v, srv := serve(t, shape, Options{})
			v.Script(Fault{Kind: HTML200}, Fault{Kind: HTML200, Status: 502}, Fault{Kind: Empty200})

			html := ask(t, srv, shape, false)
			if html.status != 200 || html.header.Get("Content-Type") != "text/html; charset=utf-8" || !bytes.HasPrefix(html.body, []byte("<!DOCTYPE html>")) {
				t.Errorf("html_200 = %d %q %.40s", html.status, html.header.Get("Content-Type"), html.body)
			}
			if cdn := ask(t, srv, shape, true); cdn.status != 502 || !bytes.HasPrefix(cdn.body, []byte("<!DOCTYPE html>")) {
				t.Errorf("html_200 with status 502 = %d %.40s", cdn.status, cdn.body)
			}
			empty := ask(t, srv, shape, false)
			if empty.status != 200 || len(empty.body) != 0 || !strings.HasPrefix(empty.header.Get("Content-Type"), "application/json") {
				t.Errorf("empty_200 = %d %q %q", empty.status, empty.header.Get("Content-Type"), empty.body)
			}
			// Reset so that the truncated answer has the same id as the normal one.
			v.Reset()
			normal := ask(t, srv, shape, false).body
			v.Reset()
			v.Script(Fault{Kind: Truncated200})
			trunc := ask(t, srv, shape, false)
			if trunc.status != 200 || json.Valid(trunc.body) || !bytes.HasPrefix(normal, trunc.body) || len(trunc.body) != len(normal)/2 {
				t.Errorf("truncated_json = %d %q; want the first half of %q", trunc.status, trunc.body, normal)
			}
		})
	}
}

func TestUnknownKind(t *testing.T) {
	t.Parallel()
	v, srv := serve(t, rewrite.OpenAI, Options{})
	v.Script(Fault{Kind: "bogus"})
	if got := ask(t, srv, rewrite.OpenAI, false); got.status != 500 || !strings.Contains(string(got.body), `"bogus"`) {
		t.Errorf("unknown kind: %d %s", got.status, got.body)
	}
}

func TestEventDelay(t *testing.T) {
	t.Parallel()
	// OpenAI without usage: 6 events, so 5 pauses.
	_, srv := serve(t, rewrite.OpenAI, Options{EventDelay: 20 * time.Millisecond})
	start := time.Now()
	got := ask(t, srv, rewrite.OpenAI, true)
	if d := time.Since(start); d < 100*time.Millisecond {
		t.Errorf("stream took %v; want at least 5 × 20ms", d)
	}
	if n := len(parseSSE(t, got.body)); n != 6 {
		t.Errorf("%d events; want 6", n)
	}

	// The pauses end when the client goes away.
	v2, srv2 := serve(t, rewrite.Gemini, Options{EventDelay: time.Minute})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	path, body := pathAndBody(rewrite.Gemini, true)
	if r, err := post(t, ctx, srv2.URL+path, body); err == nil && r.readErr == nil {
		t.Errorf("stream with minute-long pauses finished: %q", r.body)
	}
	waitFor(t, 2*time.Second, "the handler to return", func() bool { return v2.InFlight() == 0 })
}

func TestStatusWithoutClassOrStatusIs500(t *testing.T) {
	t.Parallel()
	for _, shape := range rewrite.Shapes {
		v, srv := serve(t, shape, Options{})
		v.Script(Fault{Kind: Status})
		if got := ask(t, srv, shape, false); got.status != 500 {
			t.Errorf("%s: status %d; want 500", shape, got.status)
		}
	}
}
