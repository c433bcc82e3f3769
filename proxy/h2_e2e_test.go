package proxy_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/detour-proxy/detour/internal/detourtest"
	fv "github.com/detour-proxy/detour/internal/fakevendor"
	"github.com/detour-proxy/detour/internal/mitm"
	"github.com/detour-proxy/detour/internal/testsupport"
	"github.com/detour-proxy/detour/proxy"
	"github.com/detour-proxy/detour/rewrite"
)

// Intercepted connections speak HTTP/2 as well as HTTP/1.1 (issue 12): the
// leaf offers both by ALPN, and every answer, streamed or not, is the same
// over either. These tests run each case with an HTTP/1.1 client, an
// HTTP/2-only one, and curl both ways.

// h2Client is one kind of app calling api.openai.com's chat completions
// through detour: Go's HTTP/1.1 client, Go's HTTP/2-only client, or curl
// speaking either.
type h2Client struct {
	name string
	// proto is the protocol the answer must come over (Response.Proto).
	proto string
	// h2 makes the Go client HTTP/2-only; curl, when set, is curl's
	// protocol flag.
	h2   bool
	curl string
}

var h2Clients = []h2Client{
	{name: "go HTTP/1.1", proto: "HTTP/1.1"},
	{name: "go HTTP/2 only", proto: "HTTP/2.0", h2: true},
	{name: "curl --http1.1", proto: "HTTP/1.1", curl: "--http1.1"},
	{name: "curl --http2", proto: "HTTP/2.0", curl: "--http2"},
}

// h2Way is how an app reaches detour: its Go transport, its curl command
// line for a protocol flag (ending in url), and detour's log for failures.
type h2Way struct {
	url       string
	transport func() *http.Transport
	curl      func(flag string) []string
	log       func() string
}

// viaProxy is the way in of an app with detour h as its HTTPS_PROXY.
func viaProxy(h *detourtest.Harness) h2Way {
	const chatURL = "https://api.openai.com/v1/chat/completions"
	return h2Way{
		url:       chatURL,
		transport: func() *http.Transport { return h.Transport() },
		curl: func(flag string) []string {
			return []string{"curl", flag, "-x", h.ProxyURL.String(), "--cacert", filepath.Join(h.Dir, "ca.pem"), chatURL}
		},
		log: h.Log,
	}
}

// skipUnavailable skips t for a curl client when curl has no HTTP/2.
func (c h2Client) skipUnavailable(t *testing.T) {
	if c.curl == "" {
		return
	}
	if ok, why := curlHasHTTP2(); !ok {
		t.Skipf("skipped: %s", why)
	}
}

// post sends body the client's way and returns the status, the protocol
// and the body, calling line (when set) with each line of the body as it
// arrives.
func (c h2Client) post(t *testing.T, way h2Way, body string, line func(string)) (status int, proto, answer string) {
	t.Helper()
	if c.curl != "" {
		return curlPost(t, way.curl(c.curl), way.log, body, line)
	}
	tr := way.transport()
	if c.h2 {
		tr = h2Only(tr)
	}
	return goPost(t, tr, way.url, body, line)
}

// h2Only makes t an HTTP/2-only transport: it offers only h2 by ALPN, and
// fails rather than speak HTTP/1.1.
func h2Only(t *http.Transport) *http.Transport {
	t.Protocols = new(http.Protocols)
	t.Protocols.SetHTTP2(true)
	return t
}

// curlHasHTTP2 reports whether a curl with HTTP/2 is installed.
func curlHasHTTP2() (bool, string) {
	out, err := exec.Command("curl", "-V").Output()
	if err != nil {
		return false, "curl is not installed"
	}
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, "Features:") && strings.Contains(l, " HTTP2") {
			return true, ""
		}
	}
	return false, "this curl has no HTTP/2 (no HTTP2 in curl -V's features)"
}

func goPost(t *testing.T, tr *http.Transport, url, body string, line func(string)) (int, string, string) {
	t.Helper()
	defer tr.CloseIdleConnections()
	resp, err := tr.RoundTrip(detourtest.ChatRequestTo(detourtest.TestContext(t), url, body))
	if err != nil {
		t.Fatalf("POST through detour: %v", err)
	}
	defer resp.Body.Close()
	noConnectionHeaders(t, resp.Header)
	var all strings.Builder
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if line != nil {
			line(sc.Text())
		}
		all.WriteString(sc.Text() + "\n")
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	return resp.StatusCode, resp.Proto, all.String()
}

// curlPost runs argv (a curl command line ending in the URL, perhaps
// behind a prefix such as `ip netns exec NS`) with no buffering of its
// output (-N), and reads its output as it comes. curl refuses an HTTP/2
// answer that carries connection-specific headers, so it checks those too.
func curlPost(t *testing.T, argv []string, log func() string, body string, line func(string)) (int, string, string) {
	t.Helper()
	i := slices.Index(argv, "curl")
	args := append(slices.Clone(argv[:i+1]), "-q", "-sS", "-N", "--max-time", "20",
		"-H", "Authorization: Bearer "+detourtest.AppOpenAIKey, "-H", "Content-Type: application/json", "--data", body,
		"-w", "\n%{http_code} %{http_version}")
	args = append(args, argv[i+1:]...)
	cmd := exec.CommandContext(detourtest.TestContext(t), args[0], args[1:]...)
	// No proxy or curlrc of the environment's: the flags say it all.
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var lines []string
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if line != nil {
			line(sc.Text())
		}
		lines = append(lines, sc.Text())
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("%s: %v\n%s\ndetour's log:\n%s", strings.Join(args, " "), err, stderr.String(), log())
	}
	if len(lines) == 0 {
		t.Fatalf("%s printed nothing", strings.Join(args, " "))
	}
	var status int
	var version string
	if _, err := fmt.Sscanf(lines[len(lines)-1], "%d %s", &status, &version); err != nil {
		t.Fatalf("curl: last line %q: %v", lines[len(lines)-1], err)
	}
	proto := map[string]string{"1.1": "HTTP/1.1", "2": "HTTP/2.0"}[version]
	return status, proto, strings.Join(lines[:len(lines)-1], "\n")
}

// noConnectionHeaders checks an answer for the headers HTTP/2 forbids
// (RFC 9113 §8.2.2) and that never belong in a proxied answer anyway.
func noConnectionHeaders(t *testing.T, h http.Header) {
	t.Helper()
	for _, k := range []string{"Connection", "Keep-Alive", "Proxy-Connection", "Transfer-Encoding", "Upgrade"} {
		if v, ok := h[k]; ok {
			t.Errorf("answer carries %s: %q", k, v)
		}
	}
}

const streamChat = `{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"hi"}]}`

// messageText is the content of a chat completion.
func messageText(t *testing.T, body string) string {
	t.Helper()
	var resp struct {
		Choices []struct {
			Message struct{ Content string } `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal([]byte(body), &resp); err != nil || len(resp.Choices) != 1 {
		t.Fatalf("answer %q is not a chat completion: %v", body, err)
	}
	return resp.Choices[0].Message.Content
}

// streamText joins the content deltas of an OpenAI stream, and reports
// whether it ended with [DONE].
func streamText(t *testing.T, body string) (string, bool) {
	t.Helper()
	var text strings.Builder
	for _, l := range strings.Split(body, "\n") {
		data, ok := strings.CutPrefix(l, "data: ")
		if !ok {
			continue
		}
		if data == "[DONE]" {
			return text.String(), true
		}
		text.WriteString(chunkContent(t, data))
	}
	return text.String(), false
}

func chunkContent(t *testing.T, data string) string {
	t.Helper()
	var chunk struct {
		Choices []struct {
			Delta struct{ Content string } `json:"delta"`
		} `json:"choices"`
	}
	if err := json.Unmarshal([]byte(data), &chunk); err != nil {
		t.Fatalf("stream event %q: %v", data, err)
	}
	if len(chunk.Choices) == 0 {
		return ""
	}
	return chunk.Choices[0].Delta.Content
}

// TestInterceptedAnswersAreAlikeOverH2AndHTTP1: an answer, a streamed
// answer, and a failover (primary 429 insufficient_quota, then the
// backup), through CONNECT interception, with each client. On a leaf that
// offers only http/1.1, the HTTP/2-only client gets a TLS alert, and the
// others speak HTTP/1.1 where HTTP/2 is wanted.
func TestInterceptedAnswersAreAlikeOverH2AndHTTP1(t *testing.T) {
	t.Parallel()
	for _, c := range h2Clients {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.skipUnavailable(t)
			primary := detourtest.NewVendor(t, rewrite.OpenAI, "primary")
			backup := detourtest.NewVendor(t, rewrite.OpenAI, "backup")
			h := detourtest.Start(t, detourtest.TwoUpstreams(t, rewrite.OpenAI, primary, backup, ""))
			way := viaProxy(h)

			status, proto, body := c.post(t, way, smallChat, nil)
			if status != http.StatusOK || proto != c.proto {
				t.Fatalf("answer: %d over %s; want 200 over %s\n%s", status, proto, c.proto, body)
			}
			if got := messageText(t, body); got != "Hello from primary." {
				t.Errorf("answer %q; want the primary's", got)
			}

			status, proto, body = c.post(t, way, streamChat, nil)
			text, done := streamText(t, body)
			if status != http.StatusOK || proto != c.proto || text != "Hello from primary." || !done {
				t.Errorf("stream: %d over %s, text %q, [DONE] %v; want 200 over %s, the primary's text, [DONE]\n%s",
					status, proto, text, done, c.proto, body)
			}

			primary.Script(fv.Fault{Kind: fv.Status, Status: 429, Class: fv.ClassInsufficientQuota})
			status, proto, body = c.post(t, way, smallChat, nil)
			if status != http.StatusOK || proto != c.proto {
				t.Fatalf("failover: %d over %s; want 200 over %s\n%s", status, proto, c.proto, body)
			}
			if got := messageText(t, body); got != "Hello from backup." {
				t.Errorf("failover: answer %q; want the backup's", got)
			}
			rec := h.WaitRecords(t, 3)[2]
			if got := detourtest.Outcomes(rec); got != "primary:fallback:quota_exhausted,backup:ok" {
				t.Errorf("failover attempts %s; want primary:fallback:quota_exhausted,backup:ok", got)
			}
		})
	}
}

// gatedStream is an OpenAI upstream whose stream waits, after its first
// content event, until the app has received that event: a detour that held
// events back (buffered the answer, or did not flush a frame per event)
// would make it wait out its bound and send TOO-LATE instead.
func gatedStream(got chan struct{}) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fl := w.(http.Flusher)
		chunk := func(delta, finish string) {
			fmt.Fprintf(w, "data: {\"id\":\"chatcmpl-h2\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,\"model\":\"gpt-4o\",\"choices\":[{\"index\":0,\"delta\":%s,\"finish_reason\":%s}]}\n\n", delta, finish)
			fl.Flush()
		}
		chunk(`{"role":"assistant","content":""}`, "null")
		chunk(`{"content":"one"}`, "null")
		select {
		case <-got:
		case <-time.After(10 * time.Second):
			chunk(`{"content":" TOO-LATE"}`, "null")
		case <-r.Context().Done():
			return
		}
		chunk(`{"content":" two"}`, "null")
		chunk(`{}`, `"stop"`)
		_, _ = io.WriteString(w, "data: [DONE]\n\n")
	})
}

// TestInterceptedStreamsAreIncrementalOverH2AndHTTP1: each event of a
// stream reaches the app before the upstream sends the next one, over
// either protocol. The check is causal, not a timing: the upstream sends
// its second delta only once the app has its first.
func TestInterceptedStreamsAreIncrementalOverH2AndHTTP1(t *testing.T) {
	t.Parallel()
	for _, c := range h2Clients {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.skipUnavailable(t)
			got := make(chan struct{})
			up := detourtest.NewTLSServer(gatedStream(got))
			t.Cleanup(up.Close)
			caFile := filepath.Join(t.TempDir(), "up.pem")
			if err := os.WriteFile(caFile, detourtest.PEMCert(up.Certificate()), 0o644); err != nil {
				t.Fatal(err)
			}
			h := detourtest.Start(t, fmt.Sprintf(`{
  "upstreams": {"u": {"shape": "openai", "base_url": %q, "ca_file": %q, "auth": {"from": "client"}}},
  "routes": [{"name": "r", "match": {"host": "api.openai.com", "path": "/v1/chat/completions"}, "chain": ["u"]}]
}`, up.URL+"/v1", caFile))
			way := viaProxy(h)
			released := false
			status, proto, body := c.post(t, way, streamChat, func(l string) {
				if data, ok := strings.CutPrefix(l, "data: "); ok && data != "[DONE]" && !released && chunkContent(t, data) == "one" {
					released = true
					close(got)
				}
			})
			text, done := streamText(t, body)
			if status != http.StatusOK || proto != c.proto || !done {
				t.Fatalf("stream: %d over %s, [DONE] %v; want 200 over %s, [DONE]\n%s", status, proto, done, c.proto, body)
			}
			if text != "one two" {
				t.Errorf("text %q; want %q (TOO-LATE means the first event was held back)", text, "one two")
			}
		})
	}
}

// TestH2ClientGoingAwayCancelsUpstreamAndCountsNoFailure: an HTTP/2 app
// that abandons its request (RST_STREAM) cancels the upstream call, and
// that counts as no failure of the upstream's.
func TestH2ClientGoingAwayCancelsUpstreamAndCountsNoFailure(t *testing.T) {
	t.Parallel()
	primary := detourtest.NewVendor(t, rewrite.OpenAI, "primary")
	backup := detourtest.NewVendor(t, rewrite.OpenAI, "backup")
	h := detourtest.Start(t, detourtest.TwoUpstreams(t, rewrite.OpenAI, primary, backup, ""))
	primary.Script(fv.Fault{Kind: fv.Hang, Delay: time.Minute})
	tr := h2Only(h.Transport())
	defer tr.CloseIdleConnections()

	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		// Calls, not InFlight: the vendor's handler is in flight from the
		// request's headers on, but takes the scripted Hang only once it
		// has read the whole body. A cancel before that (HTTP/2 sends
		// the body after the headers) would leave the Hang to the next
		// request.
		testsupport.Poll(10*time.Second, func() bool { return primary.Calls() != 0 })
		cancel()
	}()
	if resp, err := tr.RoundTrip(detourtest.ChatRequest(ctx, smallChat)); !errors.Is(err, context.Canceled) {
		if err == nil {
			resp.Body.Close()
		}
		t.Fatalf("err = %v; want context.Canceled", err)
	}
	rec := h.WaitRecords(t, 1)[0]
	if rec.Status != 499 || detourtest.Outcomes(rec) != "primary:client_gone" {
		t.Errorf("record status %d attempts %s; want 499 primary:client_gone", rec.Status, detourtest.Outcomes(rec))
	}
	if !testsupport.Poll(5*time.Second, func() bool { return primary.InFlight() == 0 }) {
		t.Error("the upstream call was not cancelled when the app reset its stream")
	}
	if backup.Calls() != 0 {
		t.Errorf("backup called %d times for an abandoned request", backup.Calls())
	}
	// No cooldown: the next request, on the same connection, goes to the
	// primary again.
	resp, err := tr.RoundTrip(detourtest.ChatRequest(detourtest.TestContext(t), smallChat))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Proto != "HTTP/2.0" || messageText(t, string(b)) != "Hello from primary." {
		t.Errorf("next request: %d over %s, %s; want 200 over HTTP/2.0 from the primary", resp.StatusCode, resp.Proto, b)
	}
	if primary.Calls() != 2 {
		t.Errorf("primary calls = %d; want 2 (an abandoned request is no upstream failure)", primary.Calls())
	}
}

// TestH2RequestBodyOverTheLimitGets413: the request body bound holds over
// HTTP/2, with a declared length and without one, and the refusal carries
// no connection-specific header (net/http's HTTP/2 server takes the
// refusal's Connection: close as a graceful GOAWAY).
func TestH2RequestBodyOverTheLimitGets413(t *testing.T) {
	t.Parallel()
	primary := detourtest.NewVendor(t, rewrite.OpenAI, "primary")
	backup := detourtest.NewVendor(t, rewrite.OpenAI, "backup")
	h := detourtest.Start(t, detourtest.TwoUpstreams(t, rewrite.OpenAI, primary, backup, `, "limits": {"buffered_bytes": 1048576}`))
	tr := h2Only(h.Transport())
	defer tr.CloseIdleConnections()
	big := `{"model":"gpt-4o","messages":[{"role":"user","content":"` + strings.Repeat("x", 1<<20) + `"}]}`
	for _, declared := range []bool{true, false} {
		req := detourtest.ChatRequest(detourtest.TestContext(t), big)
		if !declared {
			// Unknown length: HTTP/2 sends no content-length, and the
			// limit is found while reading.
			req.Body = io.NopCloser(strings.NewReader(big))
			req.ContentLength = -1
		}
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatalf("declared length %v: %v", declared, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge || resp.Proto != "HTTP/2.0" {
			t.Errorf("declared length %v: %d over %s; want 413 over HTTP/2.0\n%s", declared, resp.StatusCode, resp.Proto, b)
		}
		noConnectionHeaders(t, resp.Header)
	}
	if n := primary.Calls() + backup.Calls(); n != 0 {
		t.Errorf("%d vendor calls for refused bodies", n)
	}
	// The app's next request is answered (on a new connection after the
	// GOAWAY).
	resp, err := tr.RoundTrip(detourtest.ChatRequest(detourtest.TestContext(t), smallChat))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("request after the refusals: %d; want 200", resp.StatusCode)
	}
}

// h2Frames opens a CONNECT tunnel to host through detour and speaks HTTP/2
// frames in it by hand, for requests no HTTP/2 client sends.
func h2Frames(t *testing.T, h *detourtest.Harness, host string) (*http2.Framer, *tls.Conn) {
	t.Helper()
	w := dialBase(t, h)
	fmt.Fprintf(w, "CONNECT %s:443 HTTP/1.1\r\nHost: %s:443\r\n\r\n", host, host)
	resp, err := http.ReadResponse(w.br, &http.Request{Method: http.MethodConnect})
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %v %v", resp, err)
	}
	tc := tls.Client(w.Conn, &tls.Config{RootCAs: h.CAPool, ServerName: host, NextProtos: []string{"h2"}})
	if err := tc.Handshake(); err != nil {
		t.Fatalf("TLS handshake offering only h2: %v", err)
	}
	if p := tc.ConnectionState().NegotiatedProtocol; p != "h2" {
		t.Fatalf("ALPN = %q; want h2", p)
	}
	if _, err := io.WriteString(tc, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(tc, tc)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	return fr, tc
}

// h2Outcome sends one request of header fields (and body) on stream 1 and
// returns the answer's :status, or the code of the stream's reset.
func h2Outcome(t *testing.T, fr *http2.Framer, fields [][2]string, body string) (status string, reset http2.ErrCode) {
	t.Helper()
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range fields {
		_ = enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndHeaders: true, EndStream: body == ""}); err != nil {
		t.Fatal(err)
	}
	if body != "" {
		_ = fr.WriteData(1, true, []byte(body))
	}
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("reading frames: %v", err)
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				_ = fr.WriteSettingsAck()
			}
		case *http2.MetaHeadersFrame:
			if f.StreamID == 1 {
				return f.PseudoValue("status"), 0
			}
		case *http2.RSTStreamFrame:
			if f.StreamID == 1 {
				return "", f.ErrCode
			}
		case *http2.GoAwayFrame:
			return "", f.ErrCode
		}
	}
}

// TestH2RefusesConnectionSpecificAndForeignHostRequests: over HTTP/2 a
// request cannot be framed two ways (HTTP/2 frames it, and a
// Transfer-Encoding, Connection or Upgrade header is malformed, RFC 9113
// §8.2.2), and, as over HTTP/1.1, a request inside the tunnel must be for
// the tunnel's host (421). None reaches a vendor.
func TestH2RefusesConnectionSpecificAndForeignHostRequests(t *testing.T) {
	t.Parallel()
	primary := detourtest.NewVendor(t, rewrite.OpenAI, "primary")
	backup := detourtest.NewVendor(t, rewrite.OpenAI, "backup")
	h := detourtest.Start(t, detourtest.TwoUpstreams(t, rewrite.OpenAI, primary, backup, ""))
	request := func(authority string, extra ...[2]string) [][2]string {
		return append([][2]string{
			{":method", "POST"}, {":scheme", "https"}, {":authority", authority}, {":path", "/v1/chat/completions"},
			{"authorization", "Bearer " + detourtest.AppOpenAIKey}, {"content-type", "application/json"},
		}, extra...)
	}
	for _, tc := range []struct {
		name   string
		fields [][2]string
	}{
		{"content-length and transfer-encoding", request("api.openai.com",
			[2]string{"content-length", fmt.Sprint(len(smallChat))}, [2]string{"transfer-encoding", "chunked"})},
		{"connection", request("api.openai.com", [2]string{"connection", "keep-alive"})},
		{"upgrade", request("api.openai.com", [2]string{"upgrade", "websocket"})},
	} {
		fr, _ := h2Frames(t, h, "api.openai.com")
		// net/http answers 400; a stream reset with PROTOCOL_ERROR is the
		// other refusal RFC 9113 allows.
		if status, code := h2Outcome(t, fr, tc.fields, smallChat); status != "400" && (status != "" || code != http2.ErrCodeProtocol) {
			t.Errorf("%s: status %q, reset %v; want 400 or the stream reset with PROTOCOL_ERROR", tc.name, status, code)
		}
	}
	fr, _ := h2Frames(t, h, "api.openai.com")
	if status, code := h2Outcome(t, fr, request("other.example"), smallChat); status != "421" {
		t.Errorf("request for another host inside the tunnel: status %q, reset %v; want 421", status, code)
	}
	// The same connection-level frames, well formed, are answered: the
	// refusals above are the headers', not the hand-written client's.
	fr, _ = h2Frames(t, h, "api.openai.com")
	if status, code := h2Outcome(t, fr, request("api.openai.com"), smallChat); status != "200" {
		t.Errorf("well-formed request: status %q, reset %v; want 200", status, code)
	}
	if primary.Calls() != 1 || backup.Calls() != 0 {
		t.Errorf("vendor calls: primary %d, backup %d; want only the well-formed request's", primary.Calls(), backup.Calls())
	}
}

// TestStopEndsAnH2StreamAtTheDrainTimeout: when detour stops, a stream an
// app reads over HTTP/2 gets the same in-stream error at drain_timeout as
// over HTTP/1.1, and detour then exits: net/http's HTTP/2 server is part
// of the inner server's shutdown.
func TestStopEndsAnH2StreamAtTheDrainTimeout(t *testing.T) {
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
	ready := make(chan *mitm.CA, 1)
	served := make(chan error, 1)
	go func() {
		served <- proxy.Serve(ctx, proxy.Options{PolicyPath: policyPath, Stderr: logs, Listener: ln,
			Ready: func(_ net.Addr, ca *mitm.CA) { ready <- ca }})
	}()
	var pool *x509.CertPool
	select {
	case ca := <-ready:
		pool = x509.NewCertPool()
		pool.AddCert(ca.Cert)
	case err := <-served:
		t.Fatalf("detour did not start: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("detour did not start within 10s")
	}
	v.Script(fv.Fault{Kind: fv.StreamStall, Delay: time.Minute})

	tr := h2Only(&http.Transport{Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: ln.Addr().String()}), TLSClientConfig: &tls.Config{RootCAs: pool}})
	defer tr.CloseIdleConnections()
	resp, err := tr.RoundTrip(detourtest.ChatRequest(detourtest.TestContext(t), streamChat))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.Proto != "HTTP/2.0" {
		t.Fatalf("stream over %s; want HTTP/2.0", resp.Proto)
	}
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
	if !strings.Contains(logs.String(), `"outcome":"drained"`) {
		t.Errorf("log lacks the drained request:\n%s", logs.String())
	}
}
