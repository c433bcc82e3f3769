package proxy_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/detour-proxy/detour/internal/detourtest"
	fv "github.com/detour-proxy/detour/internal/fakevendor"
	"github.com/detour-proxy/detour/internal/mitm"
	"github.com/detour-proxy/detour/internal/testsupport"
	"github.com/detour-proxy/detour/proxy"
	"github.com/detour-proxy/detour/rewrite"
)

// wire is an app connection written by hand, for requests no http.Client
// sends.
type wire struct {
	net.Conn
	br *bufio.Reader
}

// dialBase connects to detour's listener for base-URL mode.
func dialBase(t *testing.T, h *detourtest.Harness) *wire {
	t.Helper()
	c, err := net.Dial("tcp", h.ProxyURL.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	// Every read is bounded: a detour that waits forever fails the test.
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	return &wire{Conn: c, br: bufio.NewReader(c)}
}

// dialIntercepted opens a CONNECT tunnel to host through detour and speaks
// TLS in it, trusting detour's CA, as an app with HTTPS_PROXY does.
func dialIntercepted(t *testing.T, h *detourtest.Harness, host string) *wire {
	t.Helper()
	w := dialBase(t, h)
	fmt.Fprintf(w, "CONNECT %s:443 HTTP/1.1\r\nHost: %s:443\r\n\r\n", host, host)
	resp, err := http.ReadResponse(w.br, &http.Request{Method: http.MethodConnect})
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %v %v", resp, err)
	}
	tc := tls.Client(w.Conn, &tls.Config{RootCAs: h.CAPool, ServerName: host})
	return &wire{Conn: tc, br: bufio.NewReader(tc)}
}

func (w *wire) response(t *testing.T) (*http.Response, string) {
	t.Helper()
	resp, err := http.ReadResponse(w.br, nil)
	if err != nil {
		t.Fatalf("no response: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

// closed reports whether detour closed the connection.
func (w *wire) closed() bool {
	_, err := w.br.ReadByte()
	return err != nil && !isTimeout(err)
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

const smallChat = `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`

// chunked frames body as one chunk and the last chunk.
func chunked(body string) string {
	return fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(body), body)
}

// TestBothContentLengthAndTransferEncodingGet400AndClose (issue 10): a
// request framed both ways is refused, and its connection closed so that
// nothing after it is read as a request — through base-URL mode and inside
// an intercepted tunnel.
func TestBothContentLengthAndTransferEncodingGet400AndClose(t *testing.T) {
	t.Parallel()
	v := detourtest.NewVendor(t, rewrite.OpenAI, "v")
	h := detourtest.Start(t, fmt.Sprintf(`{
  "upstreams": {"v": {"shape": "openai", "base_url": %q, "ca_file": %q, "auth": {"from": "client"}}},
  "routes": [{"name": "r", "match": {"host": "api.openai.com", "path": "/v1/chat/completions"}, "chain": ["v"]}]}`, v.BaseURL(), v.CAFile))
	for _, tc := range []struct {
		name       string
		dial       func() *wire
		host, path string
	}{
		{"base url", func() *wire { return dialBase(t, h) }, "127.0.0.1", "/openai/v1/chat/completions"},
		{"intercepted", func() *wire { return dialIntercepted(t, h, "api.openai.com") }, "api.openai.com", "/v1/chat/completions"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := tc.dial()
			// A sound chunked body, and a Content-Length a proxy in front
			// might have framed it by instead: the bytes after it would
			// then be another request.
			fmt.Fprintf(w, "POST %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer sk-app\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n%s"+
				"GET /smuggled HTTP/1.1\r\nHost: %s\r\n\r\n", tc.path, tc.host, chunked(smallChat), tc.host)
			resp, body := w.response(t)
			if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "both Content-Length and Transfer-Encoding") {
				t.Fatalf("status %d %q; want 400 naming both headers", resp.StatusCode, body)
			}
			if !resp.Close || !w.closed() {
				t.Error("connection kept open: the smuggled request would be read next")
			}
		})
	}
	if v.Calls() != 0 {
		t.Errorf("vendor called %d times; want 0", v.Calls())
	}
}

// TestChunkedRequestsKeepTheirConnection: watching the framing refuses no
// sound request: a chunked request and then a Content-Length one on the
// same intercepted connection are both answered.
func TestChunkedRequestsKeepTheirConnection(t *testing.T) {
	t.Parallel()
	v := detourtest.NewVendor(t, rewrite.OpenAI, "v")
	h := detourtest.Start(t, fmt.Sprintf(`{
  "upstreams": {"v": {"shape": "openai", "base_url": %q, "ca_file": %q, "auth": {"from": "client"}}},
  "routes": [{"name": "r", "match": {"host": "api.openai.com", "path": "/v1/chat/completions"}, "chain": ["v"]}]}`, v.BaseURL(), v.CAFile))
	w := dialIntercepted(t, h, "api.openai.com")
	head := "POST /v1/chat/completions HTTP/1.1\r\nHost: api.openai.com\r\nAuthorization: Bearer sk-app\r\n"
	fmt.Fprintf(w, "%sTransfer-Encoding: chunked\r\n\r\n%s", head, chunked(smallChat))
	if resp, body := w.response(t); resp.StatusCode != 200 {
		t.Fatalf("chunked request: %d %s", resp.StatusCode, body)
	}
	fmt.Fprintf(w, "%sContent-Length: %d\r\n\r\n%s", head, len(smallChat), smallChat)
	if resp, body := w.response(t); resp.StatusCode != 200 {
		t.Fatalf("second request on the connection: %d %s", resp.StatusCode, body)
	}
	if v.Calls() != 2 {
		t.Errorf("vendor calls %d; want 2", v.Calls())
	}
}

// TestSlowBodyGets408BothWaysIn: timeouts.client_body holds in base-URL
// mode and inside an intercepted tunnel.
func TestSlowBodyGets408BothWaysIn(t *testing.T) {
	t.Parallel()
	v := detourtest.NewVendor(t, rewrite.OpenAI, "v")
	h := detourtest.Start(t, fmt.Sprintf(`{
  "upstreams": {"v": {"shape": "openai", "base_url": %q, "ca_file": %q, "auth": {"from": "client"}}},
  "routes": [{"name": "r", "match": {"host": "api.openai.com", "path": "/v1/chat/completions"}, "chain": ["v"]}],
  "timeouts": {"client_body": "100ms"}}`, v.BaseURL(), v.CAFile))
	for _, tc := range []struct {
		name       string
		dial       func() *wire
		host, path string
	}{
		{"base url", func() *wire { return dialBase(t, h) }, "127.0.0.1", "/openai/v1/chat/completions"},
		{"intercepted", func() *wire { return dialIntercepted(t, h, "api.openai.com") }, "api.openai.com", "/v1/chat/completions"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := tc.dial()
			fmt.Fprintf(w, "POST %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer sk-app\r\nContent-Length: 100\r\n\r\n{\"model\":", tc.path, tc.host)
			resp, body := w.response(t)
			if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(body, `"type":"timeout"`) {
				t.Fatalf("status %d %s; want 408 in OpenAI's shape", resp.StatusCode, body)
			}
			if !w.closed() {
				t.Error("connection kept open after a body timeout")
			}
		})
	}
}

// TestMetricsShowBufferedBytes: /metrics has the gauge of buffered request
// body bytes.
func TestMetricsShowBufferedBytes(t *testing.T) {
	t.Parallel()
	v := detourtest.NewVendor(t, rewrite.OpenAI, "v")
	h := detourtest.Start(t, fmt.Sprintf(`{
  "upstreams": {"v": {"shape": "openai", "base_url": %q, "ca_file": %q, "auth": {"from": "client"}}},
  "routes": [{"name": "r", "match": {"host": "api.openai.com", "path": "/v1/chat/completions"}, "chain": ["v"]}]}`, v.BaseURL(), v.CAFile))
	resp, err := http.Get(h.AdminURL.String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(b), "\ndetour_buffered_bytes 0\n") {
		t.Errorf("/metrics lacks detour_buffered_bytes 0:\n%s", b)
	}
}

// TestStopEndsStreamsAtTheDrainTimeout (issue 10): when detour stops, a
// stream still open at drain_timeout gets an in-stream error in the app's
// shape and its log line (outcome drained), and detour then exits.
func TestStopEndsStreamsAtTheDrainTimeout(t *testing.T) {
	t.Parallel()
	v := detourtest.NewVendor(t, rewrite.OpenAI, "v")
	dir := t.TempDir()
	policyPath := filepath.Join(dir, "policy.json")
	pol := fmt.Sprintf(`{
  "ca": {"cert_file": %q, "key_file": %q}, "admin_listen": "off", "drain_timeout": "200ms",
  "upstreams": {"v": {"shape": "openai", "base_url": %q, "ca_file": %q, "auth": {"from": "client"}}},
  "routes": [{"name": "r", "match": {"host": "api.openai.com", "path": "/v1/chat/completions"}, "chain": ["v"]}]}`,
		filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca-key.pem"), v.BaseURL(), v.CAFile)
	if err := os.WriteFile(policyPath, []byte(pol), 0o644); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	logs := &detourtest.SyncBuffer{}
	ready := make(chan struct{})
	served := make(chan error, 1)
	go func() {
		served <- proxy.Serve(ctx, proxy.Options{PolicyPath: policyPath, Stderr: logs, Listener: ln,
			Ready: func(net.Addr, *mitm.CA) { close(ready) }})
	}()
	select {
	case <-ready:
	case err := <-served:
		t.Fatalf("detour did not start: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("detour did not start within 10s")
	}
	v.Script(fv.Fault{Kind: fv.StreamStall, Delay: time.Minute})

	req, _ := http.NewRequest(http.MethodPost, "http://"+ln.Addr().String()+"/openai/v1/chat/completions",
		strings.NewReader(`{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Authorization", "Bearer sk-app")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	rd := bufio.NewReader(resp.Body)
	if _, err := rd.ReadString('\n'); err != nil {
		t.Fatalf("no first event: %v", err)
	}
	stop()
	rest, err := io.ReadAll(rd)
	if err != nil {
		t.Fatalf("stream ended with %v; want a clean end after the error event", err)
	}
	want := `data: {"error":{"message":"detour is shutting down and its drain timeout (drain_timeout) ran out while this request was still running; retry the request","type":"server_error","param":null,"code":"server_is_overloaded"}}` + "\n\n"
	if !strings.HasSuffix(string(rest), want) {
		t.Errorf("stream ends with %q; want the drain's error event", rest)
	}
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("Serve = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("detour did not stop after its drain timeout")
	}
	if !strings.Contains(logs.String(), `"outcome":"drained"`) || !strings.Contains(logs.String(), `"drain_timeout":200`) {
		t.Errorf("log lacks the drained request or the drain timeout:\n%s", logs.String())
	}
}

// TestUntrustedCAIsStillExplained: intercepted connections are watched for
// their framing above TLS, which takes the handshake out of net/http's
// hands; a failed one must still be logged with the hint about the CA.
func TestUntrustedCAIsStillExplained(t *testing.T) {
	t.Parallel()
	v := detourtest.NewVendor(t, rewrite.OpenAI, "v")
	h := detourtest.Start(t, fmt.Sprintf(`{
  "upstreams": {"v": {"shape": "openai", "base_url": %q, "ca_file": %q, "auth": {"from": "client"}}},
  "routes": [{"name": "r", "match": {"host": "api.openai.com", "path": "/v1/chat/completions"}, "chain": ["v"]}]}`, v.BaseURL(), v.CAFile))
	w := dialBase(t, h)
	fmt.Fprintf(w, "CONNECT api.openai.com:443 HTTP/1.1\r\nHost: api.openai.com:443\r\n\r\n")
	if resp, err := http.ReadResponse(w.br, &http.Request{Method: http.MethodConnect}); err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %v %v", resp, err)
	}
	// An app that trusts only the system roots.
	tc := tls.Client(w.Conn, &tls.Config{ServerName: "api.openai.com"})
	if err := tc.Handshake(); err == nil {
		t.Fatal("handshake succeeded without trusting detour's CA")
	}
	if !testsupport.Poll(5*time.Second, func() bool { return strings.Contains(h.Log(), "the app does not trust detour's CA") }) {
		t.Fatalf("no hint about the CA in the log:\n%s", h.Log())
	}
}
