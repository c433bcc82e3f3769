package chain_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/detour-proxy/detour/internal/chain"
	"github.com/detour-proxy/detour/internal/health"
	"github.com/detour-proxy/detour/policy"
)

// writeCounter is a ResponseWriter that counts the writes of the body.
type writeCounter struct {
	*httptest.ResponseRecorder
	writes int
}

func (w *writeCounter) Write(p []byte) (int, error) {
	w.writes++
	return w.ResponseRecorder.Write(p)
}

// serveStreamFrom serves one streamed chat request in base-URL mode to w
// through a chain of one in-memory OpenAI upstream whose answer is a 200
// event stream read from body.
func serveStreamFrom(t *testing.T, body io.Reader, w http.ResponseWriter) {
	t.Helper()
	rt := rtFunc(func(req *http.Request) (*http.Response, error) {
		_, _ = io.Copy(io.Discard, req.Body)
		return &http.Response{StatusCode: 200, Status: "200 OK", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Header: http.Header{"Content-Type": {"text/event-stream"}}, Body: io.NopCloser(body), Request: req}, nil
	})
	pol, err := policy.Compile("policy.json", []byte(openaiPolicy([]string{memUpstream("up", "")}, `["up"]`, "")),
		policy.Options{BaseDir: t.TempDir(), DefaultCADir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	r := &chain.Runner{
		Policy:     func() *policy.Compiled { return pol },
		Health:     health.New(),
		Transports: &chain.Transports{Override: rt},
		Log:        zerolog.Nop(),
		Sleep:      func(ctx context.Context, d time.Duration) error { return ctx.Err() },
	}
	req := httptest.NewRequest(http.MethodPost, "http://api.openai.com/v1/chat/completions", strings.NewReader(streamBody))
	req.Header.Set("Authorization", "Bearer sk-app")
	r.Serve(w, req, chain.Target{Host: "api.openai.com", Mode: "base_url"})
}

// TestStreamBurstIsOneWrite: the events of an untranslated stream that
// arrived together reach the app with one Write after the commit point's
// (each Write of a burst became an HTTP chunk of its own once net/http's
// 2 KiB buffer was full), byte for byte as the upstream sent them.
func TestStreamBurstIsOneWrite(t *testing.T) {
	t.Parallel()
	var up strings.Builder
	up.WriteString(`data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}` + "\n\n")
	for range 40 {
		up.WriteString(`data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"word "}}]}` + "\n\n")
	}
	up.WriteString(`data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\ndata: [DONE]\n\n")
	stream := up.String()
	body := &readCounter{r: strings.NewReader(stream)}
	w := &writeCounter{ResponseRecorder: httptest.NewRecorder()}
	serveStreamFrom(t, body, w)
	if w.Code != 200 {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	if got := w.Body.String(); got != stream {
		t.Errorf("the app got\n%q\nwant the upstream's stream\n%q", got, stream)
	}
	// What one read brought is written together: one write per read of
	// the upstream's body, and one more where the commit point splits the
	// first read (the held-back opening event and the first content go
	// first), where there was one write per event.
	events := strings.Count(stream, "\n\n")
	if w.writes > body.reads+1 {
		t.Errorf("%d writes for %d events that came in %d reads; want at most %d", w.writes, events, body.reads, body.reads+1)
	}
}

// readCounter counts the reads of an upstream's body that brought bytes.
type readCounter struct {
	r     io.Reader
	reads int
}

func (c *readCounter) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if n > 0 {
		c.reads++
	}
	return n, err
}

// panicFlusher is a ResponseWriter whose Flush panics, as a handler's
// writer may with http.ErrAbortHandler.
type panicFlusher struct{ *httptest.ResponseRecorder }

func (panicFlusher) Flush() { panic(http.ErrAbortHandler) }

// TestStreamFirstFlushPanicsOnTheHandlersGoroutine: a panic of the commit
// point's write is raised on the goroutine that called Serve, where
// net/http recovers it, not on the helper that wrote (where it would end
// the process).
func TestStreamFirstFlushPanicsOnTheHandlersGoroutine(t *testing.T) {
	t.Parallel()
	stream := `data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"hi"}}]}` + "\n\ndata: [DONE]\n\n"
	got := func() (v any) {
		defer func() { v = recover() }()
		serveStreamFrom(t, strings.NewReader(stream), panicFlusher{httptest.NewRecorder()})
		return nil
	}()
	if got != http.ErrAbortHandler {
		t.Errorf("Serve's goroutine recovered %v; want http.ErrAbortHandler", got)
	}
}
