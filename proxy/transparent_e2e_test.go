package proxy_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/detour-proxy/detour/internal/detourtest"
	fv "github.com/detour-proxy/detour/internal/fakevendor"
	"github.com/detour-proxy/detour/proxy"
	"github.com/detour-proxy/detour/rewrite"
)

// A connection made straight to the transparent listener, not redirected
// by the kernel, has detour itself as its destination: it is refused, with
// a log line, and never spliced to detour's own port. This holds without
// root (no redirect rules are needed to make one).
func TestTransparentListenerRefusesADirectConnection(t *testing.T) {
	t.Parallel()
	primary := detourtest.NewVendor(t, rewrite.OpenAI, "primary")
	backup := detourtest.NewVendor(t, rewrite.OpenAI, "backup")
	h := detourtest.Start(t, detourtest.TwoUpstreams(t, rewrite.OpenAI, primary, backup, `, "transparent": {"listen": "127.0.0.1:0"}`))
	line := h.WaitLogLine(t, "transparent listener is listening", func(map[string]any) bool { return true })
	addrs, _ := line["listen"].([]any)
	if len(addrs) == 0 {
		t.Fatalf("transparent listener line without addresses: %v", line)
	}
	if hint, _ := line["redirect"].(string); !strings.HasPrefix(hint, "detour redirect install --to-port ") {
		t.Errorf("redirect hint = %q; want the command that sends traffic to this listener", hint)
	}
	for _, a := range addrs {
		addr := fmt.Sprint(a)
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("dial %s: %v", addr, err)
		}
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		_, _ = c.Write([]byte("GET / HTTP/1.1\r\nHost: api.openai.com\r\n\r\n"))
		n, err := io.ReadAll(c)
		c.Close()
		if len(n) != 0 || (err != nil && !errors.Is(err, io.EOF) && !isReset(err)) {
			t.Errorf("direct connection to %s: read %q, %v; want it closed unanswered", addr, n, err)
		}
		h.WaitLogLine(t, "request", func(l map[string]any) bool {
			return l["mode"] == proxy.ModeTransparent && l["outcome"] == proxy.EgressRefused && l["port"] != ""
		})
	}
	if primary.Calls()+backup.Calls() != 0 {
		t.Errorf("a refused connection reached a vendor")
	}
}

// Listeners handed over (by `detour run --transparent`, which installs
// its own redirect) get no hint to run `detour redirect install`.
func TestHandedOverTransparentListenerGetsNoRedirectHint(t *testing.T) {
	t.Parallel()
	primary := detourtest.NewVendor(t, rewrite.OpenAI, "primary")
	backup := detourtest.NewVendor(t, rewrite.OpenAI, "backup")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := detourtest.Start(t, detourtest.TwoUpstreams(t, rewrite.OpenAI, primary, backup, ""), func(o *proxy.Options) {
		o.TransparentListeners = []net.Listener{ln}
	})
	line := h.WaitLogLine(t, "transparent listener is listening", func(map[string]any) bool { return true })
	if hint, ok := line["redirect"]; ok {
		t.Errorf("redirect hint %q on a handed-over listener", hint)
	}
}

func isReset(err error) bool {
	var op *net.OpError
	return errors.As(err, &op)
}

// transparentListener is the IPv4 loopback address of h's transparent
// listener.
func transparentListener(t *testing.T, h *detourtest.Harness) string {
	t.Helper()
	line := h.WaitLogLine(t, "transparent listener is listening", func(map[string]any) bool { return true })
	addrs, _ := line["listen"].([]any)
	for _, a := range addrs {
		if addr := fmt.Sprint(a); strings.HasPrefix(addr, "127.0.0.1:") {
			return addr
		}
	}
	t.Fatalf("transparent listener line without a 127.0.0.1 address: %v", line)
	return ""
}

// redirected starts detour on policyJSON with a transparent listener whose
// connections look redirected from dst, as the kernel's redirect makes
// them; it returns the harness and the listener's address.
func redirected(t *testing.T, policyJSON string, dst netip.AddrPort) (*detourtest.Harness, string) {
	t.Helper()
	h := detourtest.Start(t, policyJSON)
	addr := transparentListener(t, h)
	proxy.FakeOriginalDst(t, addr, dst)
	return h, addr
}

// tripwire is an original destination that must never be dialled: a
// connection detour intercepts is answered by detour, not spliced. It
// returns its address; the test fails if anything connects to it.
func tripwire(t *testing.T) netip.AddrPort {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.Errorf("the original destination was dialled (from %s): the connection was spliced, not served by detour", c.RemoteAddr())
			c.Close()
		}
	}()
	return ln.Addr().(*net.TCPAddr).AddrPort()
}

// plainClient is an app whose every connection the kernel redirects to
// the transparent listener at addr: it calls http:// URLs, with no proxy.
func plainClient(addr string) *http.Client {
	return &http.Client{
		Timeout: 30 * time.Second,
		Transport: &http.Transport{
			Proxy: nil,
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "tcp", addr)
			},
		},
	}
}

func postChat(t *testing.T, c *http.Client, body string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://api.openai.com/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+detourtest.AppOpenAIKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

// A redirected plain HTTP connection whose Host a route names is served by
// the chain, as an intercepted TLS one is: a failover, the chain's log
// line with mode transparent and the route, and the original destination
// never dialled.
func TestTransparentPlainHTTPIsServedByTheChain(t *testing.T) {
	t.Parallel()
	primary := detourtest.NewVendor(t, rewrite.OpenAI, "primary")
	backup := detourtest.NewVendor(t, rewrite.OpenAI, "backup")
	h, addr := redirected(t, detourtest.TwoUpstreams(t, rewrite.OpenAI, primary, backup, `, "transparent": {"listen": "127.0.0.1:0"}`), tripwire(t))
	primary.Script(fv.Fault{Kind: fv.Status, Status: 429, Class: fv.ClassInsufficientQuota})

	resp, body := postChat(t, plainClient(addr), smallChat)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d; want 200\n%s", resp.StatusCode, body)
	}
	if got := messageText(t, body); got != "Hello from backup." {
		t.Errorf("answer %q; want the backup's", got)
	}
	if primary.Calls() != 1 || backup.Calls() != 1 {
		t.Errorf("calls: primary %d, backup %d; want 1 and 1", primary.Calls(), backup.Calls())
	}
	rec := h.WaitRecords(t, 1)[0]
	if got := detourtest.Outcomes(rec); got != "primary:fallback:quota_exhausted,backup:ok" {
		t.Errorf("attempts %s; want primary:fallback:quota_exhausted,backup:ok", got)
	}
	h.WaitLogLine(t, "request", func(l map[string]any) bool {
		return l["mode"] == proxy.ModeTransparent && l["route"] == "r" && l["host"] == "api.openai.com" && l["status"] == float64(200)
	})
}

// A plain HTTP connection for a host no route names is spliced to its
// original destination, which receives the app's bytes exactly as sent.
func TestTransparentPlainHTTPForAnotherHostIsSpliced(t *testing.T) {
	t.Parallel()
	const request = "GET /some/path?q=1 HTTP/1.1\r\nHost: Example.COM:80\r\nX-Odd:   spacing kept \r\nconnection: close\r\n\r\n"
	const answer = "HTTP/1.1 200 OK\r\nContent-Length: 8\r\nConnection: close\r\n\r\nspliced!"
	origin, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { origin.Close() })
	received := make(chan string, 1)
	go func() {
		c, err := origin.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(30 * time.Second))
		buf := make([]byte, len(request))
		n, _ := io.ReadFull(c, buf)
		received <- string(buf[:n])
		_, _ = io.WriteString(c, answer)
	}()
	primary := detourtest.NewVendor(t, rewrite.OpenAI, "primary")
	backup := detourtest.NewVendor(t, rewrite.OpenAI, "backup")
	h, addr := redirected(t, detourtest.TwoUpstreams(t, rewrite.OpenAI, primary, backup, `, "transparent": {"listen": "127.0.0.1:0"}`),
		origin.Addr().(*net.TCPAddr).AddrPort())

	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(c, request); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("reading the answer: %v (read %q)", err, got)
	}
	c.Close() // the splice, and its log line, end when both sides have
	if string(got) != answer {
		t.Errorf("the app read %q; want the origin's answer %q", got, answer)
	}
	if r := <-received; r != request {
		t.Errorf("the origin received %q; want the app's bytes %q", r, request)
	}
	if primary.Calls()+backup.Calls() != 0 {
		t.Errorf("a spliced connection reached a vendor")
	}
	h.WaitLogLine(t, "request", func(l map[string]any) bool {
		return l["mode"] == proxy.ModeTransparent && l["host"] == "example.com" && l["outcome"] == proxy.EgressOK
	})
}

// A connection decided for one host by its first request's Host is not
// taken elsewhere by a later request: one for another host is answered
// 421, reaches no vendor, and is not spliced.
func TestTransparentPlainHTTPRefusesAnotherHostOnTheSameConnection(t *testing.T) {
	t.Parallel()
	primary := detourtest.NewVendor(t, rewrite.OpenAI, "primary")
	backup := detourtest.NewVendor(t, rewrite.OpenAI, "backup")
	_, addr := redirected(t, detourtest.TwoUpstreams(t, rewrite.OpenAI, primary, backup, `, "transparent": {"listen": "127.0.0.1:0"}`), tripwire(t))

	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	br := bufio.NewReader(c)
	send := func(host string) (*http.Response, string) {
		t.Helper()
		_, err := fmt.Fprintf(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
			host, detourtest.AppOpenAIKey, len(smallChat), smallChat)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("request for %s: %v", host, err)
		}
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp, string(b)
	}
	// The connection is decided by the first Host, normalised as a TLS
	// server name is (case, port, trailing dot); a later request naming
	// the same host in another spelling is the same host.
	resp, body := send("API.OpenAI.com.:80")
	if resp.StatusCode != http.StatusOK || messageText(t, body) != "Hello from primary." {
		t.Fatalf("first request: %d %s; want the primary's answer", resp.StatusCode, body)
	}
	resp, body = send("api.openai.com")
	if resp.StatusCode != http.StatusOK || messageText(t, body) != "Hello from primary." {
		t.Fatalf("second request, for the same host: %d %s; want the primary's answer", resp.StatusCode, body)
	}
	resp, body = send("other.example")
	if resp.StatusCode != http.StatusMisdirectedRequest {
		t.Errorf("request for another host on the connection: %d %s; want 421", resp.StatusCode, body)
	}
	// In OpenAI's error envelope, which the app's SDK parses.
	var env struct {
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &env); err != nil || env.Error.Type != "invalid_request_error" || !strings.Contains(env.Error.Message, "other.example") {
		t.Errorf("421 body %s; want an OpenAI invalid_request_error naming other.example", body)
	}
	if primary.Calls() != 2 || backup.Calls() != 0 {
		t.Errorf("calls: primary %d, backup %d; want 2 and 0 (the 421 reaches no vendor)", primary.Calls(), backup.Calls())
	}
}

// A stream over plain HTTP reaches the app event by event: the vendor
// sends each event after the first content only once the app has the one
// before (fakevendor's Gate), so a detour that buffered it would never
// finish. The check is causal, not a timing.
func TestTransparentPlainHTTPStreamsIncrementally(t *testing.T) {
	t.Parallel()
	gate := fv.NewGate(fv.New(rewrite.OpenAI, fv.Options{Name: "primary"}))
	t.Cleanup(gate.Open)
	up := detourtest.NewTLSServer(gate)
	t.Cleanup(up.Close)
	caFile := filepath.Join(t.TempDir(), "up.pem")
	if err := os.WriteFile(caFile, detourtest.PEMCert(up.Certificate()), 0o644); err != nil {
		t.Fatal(err)
	}
	_, addr := redirected(t, fmt.Sprintf(`{
  "transparent": {"listen": "127.0.0.1:0"},
  "upstreams": {"u": {"shape": "openai", "base_url": %q, "ca_file": %q, "auth": {"from": "client"}}},
  "routes": [{"name": "r", "match": {"host": "api.openai.com", "path": "/v1/chat/completions"}, "chain": ["u"]}]
}`, up.URL+"/v1", caFile), tripwire(t))

	req, err := http.NewRequest(http.MethodPost, "http://api.openai.com/v1/chat/completions", strings.NewReader(streamChat))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+detourtest.AppOpenAIKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := plainClient(addr).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d; want 200\n%s", resp.StatusCode, b)
	}
	var body strings.Builder
	content := false
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		l := sc.Text()
		body.WriteString(l + "\n")
		data, ok := strings.CutPrefix(l, "data: ")
		if !ok {
			continue
		}
		if !content && data != "[DONE]" && chunkContent(t, data) != "" {
			content = true
		}
		if content {
			// The app has this event: let the vendor send the next.
			gate.Release()
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("reading the stream: %v (read %q)", err, body.String())
	}
	text, done := streamText(t, body.String())
	if text != "Hello from primary." || !done {
		t.Errorf("stream text %q, [DONE] %v; want the primary's text and [DONE]\n%s", text, done, body.String())
	}
}

// A plain HTTP request with both Content-Length and Transfer-Encoding is
// refused 400 and reaches no vendor, as on an intercepted TLS connection.
func TestTransparentPlainHTTPRefusesAmbiguousFraming(t *testing.T) {
	t.Parallel()
	primary := detourtest.NewVendor(t, rewrite.OpenAI, "primary")
	backup := detourtest.NewVendor(t, rewrite.OpenAI, "backup")
	_, addr := redirected(t, detourtest.TwoUpstreams(t, rewrite.OpenAI, primary, backup, `, "transparent": {"listen": "127.0.0.1:0"}`), tripwire(t))
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	_, err = fmt.Fprintf(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: api.openai.com\r\nContent-Type: application/json\r\n"+
		"Content-Length: %d\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n", len(smallChat), len(smallChat), smallChat)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("ambiguous request: %d; want 400", resp.StatusCode)
	}
	if primary.Calls()+backup.Calls() != 0 {
		t.Errorf("an ambiguous request reached a vendor")
	}
}
