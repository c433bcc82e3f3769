package fakevendor

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/detour-proxy/detour/internal/testsupport"
	"github.com/detour-proxy/detour/rewrite"
)

// fixedNow pins created timestamps and the spend-limit reset date.
func fixedNow() time.Time { return time.Unix(1735689600, 0) } // 2025-01-01T00:00:00Z

// serve starts a fake vendor of shape on loopback.
func serve(t *testing.T, shape rewrite.Shape, opts Options) (*Vendor, *httptest.Server) {
	t.Helper()
	if opts.Now == nil {
		opts.Now = fixedNow
	}
	v := New(shape, opts)
	srv := httptest.NewServer(v)
	t.Cleanup(srv.Close)
	return v, srv
}

// testModel is the model each shape's test requests ask for.
var testModel = map[rewrite.Shape]string{
	rewrite.OpenAI:    "gpt-4o",
	rewrite.Anthropic: "claude-sonnet-4-5",
	rewrite.Gemini:    "gemini-2.5-flash",
}

// pathAndBody is the path and body of a minimal request of shape.
func pathAndBody(shape rewrite.Shape, stream bool) (string, string) {
	switch shape {
	case rewrite.Anthropic:
		b := `{"model":"claude-sonnet-4-5","max_tokens":64,"messages":[{"role":"user","content":"Say hi"}]}`
		if stream {
			b = `{"model":"claude-sonnet-4-5","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"Say hi"}]}`
		}
		return "/v1/messages", b
	case rewrite.Gemini:
		b := `{"contents":[{"role":"user","parts":[{"text":"Say hi"}]}]}`
		if stream {
			return "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse", b
		}
		return "/v1beta/models/gemini-2.5-flash:generateContent", b
	}
	b := `{"model":"gpt-4o","messages":[{"role":"user","content":"Say hi"}]}`
	if stream {
		b = `{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"Say hi"}]}`
	}
	return "/v1/chat/completions", b
}

// reply is what a raw HTTP client saw.
type reply struct {
	status int
	header http.Header
	body   []byte
	// readErr is the error reading the body (e.g. an unexpected EOF).
	readErr error
}

// post sends body to url and reads the whole answer; the error is a
// transport error before any response.
// It does not fail the test itself, so goroutines may call it.
func post(t *testing.T, ctx context.Context, url, body string) (reply, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return reply{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	b, rerr := io.ReadAll(resp.Body)
	return reply{status: resp.StatusCode, header: resp.Header, body: b, readErr: rerr}, nil
}

// mustPost is post that fails the test on a transport error.
func mustPost(t *testing.T, url, body string) reply {
	t.Helper()
	r, err := post(t, context.Background(), url, body)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	return r
}

// ask sends the minimal request of shape to srv.
func ask(t *testing.T, srv *httptest.Server, shape rewrite.Shape, stream bool) reply {
	t.Helper()
	path, body := pathAndBody(shape, stream)
	return mustPost(t, srv.URL+path, body)
}

// sseEvent is one parsed SSE event.
type sseEvent struct {
	name string
	data string
}

// parseSSE splits an SSE body into events, failing on anything but
// `event:` and `data:` lines (the fake sends nothing else) and on a data
// field spread over several lines.
func parseSSE(t *testing.T, body []byte) []sseEvent {
	t.Helper()
	var out []sseEvent
	for _, block := range bytes.Split(bytes.TrimSuffix(body, []byte("\n\n")), []byte("\n\n")) {
		if len(block) == 0 {
			continue
		}
		var e sseEvent
		seenData := false
		for _, line := range strings.Split(string(block), "\n") {
			switch {
			case strings.HasPrefix(line, "event: "):
				e.name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: ") && !seenData:
				e.data, seenData = strings.TrimPrefix(line, "data: "), true
			default:
				t.Fatalf("unexpected SSE line %q in block %q", line, block)
			}
		}
		if !seenData {
			t.Fatalf("SSE block without data: %q", block)
		}
		out = append(out, e)
	}
	return out
}

// waitFor polls cond until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	testsupport.Eventually(t, d, what, cond)
}

// stringsReader is an http.Request body, nil when s is empty.
func stringsReader(s string) io.Reader {
	if s == "" {
		return nil
	}
	return strings.NewReader(s)
}

// readAll reads and closes resp's body.
func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading body: %v", err)
	}
	return string(b)
}
