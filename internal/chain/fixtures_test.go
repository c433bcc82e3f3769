package chain_test

// Upstreams and sinks the chain tests share beyond the runner itself:
// in-memory upstreams behind Transports.Override, raw TLS upstreams for
// what the fake vendor cannot send, and a log sink for the canonical line.

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/detour-proxy/detour/internal/chain"
	"github.com/detour-proxy/detour/internal/detourtest"
	fv "github.com/detour-proxy/detour/internal/fakevendor"
	"github.com/detour-proxy/detour/internal/testsupport"
	"github.com/detour-proxy/detour/rewrite"
)

// logLines returns the canonical log lines written to logs, decoded as JSON.
func logLines(t *testing.T, logs *testsupport.SyncBuffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, ln := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		if ln == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(ln), &m); err != nil {
			t.Fatalf("log line %q: %v", ln, err)
		}
		out = append(out, m)
	}
	return out
}

// newLoggedRunner is newClockedRunner (clk may be nil: the real clock) with
// the canonical log line kept.
func newLoggedRunner(t *testing.T, host, policyJSON string, clk *clock) (*runner, *testsupport.SyncBuffer) {
	t.Helper()
	logs := &testsupport.SyncBuffer{}
	r := startRunner(t, host, policyJSON, func(cr *chain.Runner) {
		cr.Log = zerolog.New(logs)
		if clk != nil {
			cr.Now, cr.Sleep = clk.Now, clk.Sleep
		}
	})
	return r, logs
}

// newTimedVendor is detourtest.NewVendor with the fake's clock set (the
// Anthropic spend-limit message names the 1st of the fake's next month).
func newTimedVendor(t *testing.T, shape rewrite.Shape, name string, now func() time.Time) *detourtest.Vendor {
	t.Helper()
	return detourtest.NewVendorWith(t, shape, fv.Options{Name: name, Now: now})
}

// rawShapedUpstream is rawUpstream for any shape.
func rawShapedUpstream(t *testing.T, name string, shape rewrite.Shape, handler http.HandlerFunc) string {
	t.Helper()
	up := detourtest.NewTLSServer(handler)
	t.Cleanup(up.Close)
	caFile := filepath.Join(t.TempDir(), name+".pem")
	writeCert(t, caFile, up)
	base := up.URL
	if shape == rewrite.OpenAI {
		base += "/v1"
	}
	return fmt.Sprintf(`%q: {"shape": %q, "base_url": %q, "ca_file": %q, "auth": {"from": "client"}}`, name, shape, base, caFile)
}

func routePolicy(shape rewrite.Shape, ups []string, chainNames, extra string) string {
	path := map[rewrite.Shape]string{rewrite.OpenAI: "/v1/chat/completions", rewrite.Anthropic: "/v1/messages", rewrite.Gemini: "/v1beta/models/*"}[shape]
	return fmt.Sprintf(`{"upstreams": {%s},
  "routes": [{"name": "r", "match": {"host": %q, "path": %q}, "chain": %s}]%s}`,
		strings.Join(ups, ","), shape.DefaultHost(), path, chainNames, extra)
}

// requestFor is a minimal request of shape: path and body.
func requestFor(shape rewrite.Shape, stream bool) (string, string) {
	switch shape {
	case rewrite.Anthropic:
		s := ""
		if stream {
			s = `"stream":true,`
		}
		return "/v1/messages", `{"model":"claude-sonnet-4-5","max_tokens":50,` + s + `"messages":[{"role":"user","content":"hi"}]}`
	case rewrite.Gemini:
		p := "/v1beta/models/gemini-2.5-flash:generateContent"
		if stream {
			p = "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
		}
		return p, `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`
	}
	if stream {
		return "/v1/chat/completions", streamBody
	}
	return "/v1/chat/completions", chatBody
}

const geminiOK = `{"candidates":[{"content":{"role":"model","parts":[{"text":"Hello from raw."}]},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":1,"candidatesTokenCount":3,"totalTokenCount":4},"modelVersion":"gemini-2.5-flash"}`

const openaiOK = `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"Hello from raw."},"finish_reason":"stop"}]}`

// rtFunc is an in-memory upstream transport (chain.Transports.Override):
// requests are told apart by URL host.
type rtFunc func(*http.Request) (*http.Response, error)

func (f rtFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// memUpstream is an upstream entry reached through the override transport
// at https://NAME.test/v1.
func memUpstream(name, extra string) string {
	return fmt.Sprintf(`%q: {"shape": "openai", "base_url": "https://%s.test/v1", "auth": {"from": "client"}%s}`, name, name, extra)
}

// invalidRequestBody is OpenAI's 400 for a request without messages.
const invalidRequestBody = `{"error":{"message":"Missing required parameter: 'messages'.","type":"invalid_request_error","param":"messages","code":"missing_required_parameter"}}`

// helloFrom is an OpenAI chat completion that says "Hello from NAME.".
func helloFrom(name string) string {
	return `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"Hello from ` + name + `."},"finish_reason":"stop"}]}`
}

const overloadedBody = `{"error":{"message":"The engine is currently overloaded","type":"server_error","param":null,"code":"server_is_overloaded"}}`

func jsonResponse(req *http.Request, status int, body string) *http.Response {
	return &http.Response{
		StatusCode: status, Status: http.StatusText(status), Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:  http.Header{"Content-Type": {"application/json"}},
		Body:    io.NopCloser(strings.NewReader(body)),
		Request: req,
	}
}

// closeGate is a response body whose Close announces itself and then waits
// for the test: it holds a finished attempt between its classification and
// the moment its lane reports to runHedged.
type closeGate struct {
	io.Reader
	once    sync.Once
	closing chan struct{}
	release chan struct{}
}

func (c *closeGate) Close() error {
	c.once.Do(func() { close(c.closing) })
	<-c.release
	return nil
}

func waitFor(t *testing.T, what string, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// eventually reports whether cond holds within 10 s: a bounded poll, for
// state nothing announces (a fake vendor's in-flight count).
func eventually(cond func() bool) bool {
	return testsupport.Poll(10*time.Second, cond)
}

// waitUntil is eventually that fails the test when cond never holds.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testsupport.Eventually(t, 10*time.Second, what, cond)
}

// newMemRunner is startRunner without a listener: requests go to the chain
// in process (serveMem), so that a test whose upstreams are in memory too
// (Transports.Override) can run in a testing/synctest bubble, where
// loopback sockets do not block durably.
func newMemRunner(t *testing.T, host, policyJSON string, tune func(*chain.Runner)) *runner {
	t.Helper()
	return buildRunner(t, host, policyJSON, tune)
}

// serveMem serves req in process and returns the response once its
// headers are written; its body streams as the chain writes (and flushes)
// it, and must be read to the end.
func (r *runner) serveMem(req *http.Request) *http.Response {
	pr, pw := io.Pipe()
	w := &memWriter{h: http.Header{}, pw: pw, ready: make(chan struct{}),
		resp: &http.Response{Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Body: pr, Request: req}}
	go func() {
		defer pw.Close()
		r.handler.ServeHTTP(w, req)
		w.WriteHeader(http.StatusOK)
	}()
	<-w.ready
	return w.resp
}

// memWriter is the app's end of serveMem: an http.ResponseWriter and
// http.Flusher whose body is a pipe to the test.
type memWriter struct {
	h     http.Header
	pw    *io.PipeWriter
	once  sync.Once
	ready chan struct{}
	resp  *http.Response
}

func (m *memWriter) Header() http.Header { return m.h }

func (m *memWriter) WriteHeader(code int) {
	m.once.Do(func() {
		m.resp.StatusCode, m.resp.Status = code, http.StatusText(code)
		m.resp.Header = m.h.Clone()
		close(m.ready)
	})
}

func (m *memWriter) Write(p []byte) (int, error) {
	m.WriteHeader(http.StatusOK)
	return m.pw.Write(p)
}

func (m *memWriter) Flush() {}

// memVendors is an upstream transport (Transports.Override) that serves
// each request in process from the fake vendor its URL's host names
// (NAME.test, as memUpstream writes it), streaming the answer through a
// pipe. With it a test runs inside a testing/synctest bubble: the fakes'
// delays and detour's timers pass on virtual time.
type memVendors map[string]*fv.Vendor

// newMemVendors makes one OpenAI-shaped fake vendor per name.
func newMemVendors(names ...string) memVendors {
	m := memVendors{}
	for _, n := range names {
		m[n] = fv.New(rewrite.OpenAI, fv.Options{Name: n})
	}
	return m
}

// RoundTrip answers once the vendor has written its headers, or fails
// with the request's context.
func (m memVendors) RoundTrip(req *http.Request) (*http.Response, error) {
	v := m[strings.TrimSuffix(req.URL.Hostname(), ".test")]
	pr, pw := io.Pipe()
	w := &memWriter{h: http.Header{}, pw: pw, ready: make(chan struct{}),
		resp: &http.Response{Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Body: pr, Request: req}}
	go func() {
		defer pw.Close()
		v.ServeHTTP(w, req)
		w.WriteHeader(http.StatusOK)
	}()
	select {
	case <-w.ready:
		return w.resp, nil
	case <-req.Context().Done():
		pr.Close()
		return nil, req.Context().Err()
	}
}

// newMemVendorRunner is newMemRunner over vendors: every upstream of the
// policy is reached in memory.
func newMemVendorRunner(t *testing.T, vendors memVendors, policyJSON string, tune func(*chain.Runner)) *runner {
	t.Helper()
	return newMemRunner(t, "api.openai.com", policyJSON, func(cr *chain.Runner) {
		cr.Transports = &chain.Transports{Override: vendors}
		if tune != nil {
			tune(cr)
		}
	})
}

// post sends the app's request the way the runner serves: through its
// server, or in process (serveMem) when it has none.
func (r *runner) post(t *testing.T, path, body string) *http.Response {
	t.Helper()
	if r.srv != nil {
		return post(t, r.srv.URL+path, body)
	}
	req, _ := http.NewRequest(http.MethodPost, "http://api.openai.com"+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer sk-app")
	req.Header.Set("Content-Type", "application/json")
	resp := r.serveMem(req)
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}
