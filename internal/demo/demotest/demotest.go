// Package demotest holds, for tests only, the fixture through which the
// demo's plain client (internal/demo) and openai-go (internal/sdkcheck) are
// compared, internal/demo/testdata/openai_go.json, and the loopback servers
// both packages' tests run it on. It imports only the standard library, so
// that internal/demo's tests need not link openai-go.
package demotest

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
)

// Fixture is internal/demo/testdata/openai_go.json.
type Fixture struct {
	Requests []Request `json:"requests"`
	Answers  []Answer  `json:"answers"`
}

// Request is one request as the server received it.
type Request struct {
	Stream        bool   `json:"stream"`
	Method        string `json:"method"`
	Path          string `json:"path"`
	Authorization string `json:"authorization"`
	ContentType   string `json:"contentType"`
	Body          any    `json:"body"`
}

// Answer is one answer the server gives, and whether openai-go takes it as
// an error.
type Answer struct {
	Name        string `json:"name"`
	Stream      bool   `json:"stream"`
	Status      int    `json:"status"`
	ContentType string `json:"contentType"`
	Body        string `json:"body"`
	Error       bool   `json:"error"` // whether openai-go takes it as an error
}

// ReadFixture reads the fixture at path (relative to the test's package).
func ReadFixture(t *testing.T, path string) Fixture {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f Fixture
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	return f
}

// RecordingServer answers every chat completion with "Hi", streamed when
// the request asks for it, and records what it received; got returns the
// requests so far. The server is closed when the test ends.
func RecordingServer(t *testing.T) (srv *httptest.Server, got func() []Request) {
	t.Helper()
	var mu sync.Mutex
	var seen []Request
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var body any
		if err := json.Unmarshal(b, &body); err != nil {
			t.Errorf("body is not JSON: %q", b)
		}
		stream := bytes.Contains(b, []byte(`"stream":true`))
		mu.Lock()
		seen = append(seen, Request{stream, r.Method, r.URL.Path, r.Header.Get("Authorization"), r.Header.Get("Content-Type"), body})
		mu.Unlock()
		if stream {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}\n\ndata: [DONE]\n\n")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"Hi"},"finish_reason":"stop"}]}`)
	}))
	t.Cleanup(srv.Close)
	return srv, func() []Request {
		mu.Lock()
		defer mu.Unlock()
		return append([]Request(nil), seen...)
	}
}

// AnswerServer gives a's answer to every request. The server is closed
// when the test ends.
func AnswerServer(t *testing.T, a Answer) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", a.ContentType)
		w.WriteHeader(a.Status)
		io.WriteString(w, a.Body)
	}))
	t.Cleanup(srv.Close)
	return srv
}
