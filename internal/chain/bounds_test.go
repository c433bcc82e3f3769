package chain_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/detour-proxy/detour/internal/chain"
	"github.com/detour-proxy/detour/internal/detourtest"
	fv "github.com/detour-proxy/detour/internal/fakevendor"
	"github.com/detour-proxy/detour/rewrite"
)

// chatOfSize is an OpenAI chat request of exactly n bytes.
func chatOfSize(n int) string {
	head, tail := `{"model":"gpt-4o","messages":[{"role":"user","content":"`, `"}]}`
	return head + strings.Repeat("a", n-len(head)-len(tail)) + tail
}

// rawConn is a client connection that writes requests by hand, for bodies
// no http.Client sends: a lie about Content-Length, a stall, a broken chunk.
type rawConn struct {
	net.Conn
	br *bufio.Reader
}

func dialRaw(t *testing.T, addr string) *rawConn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	// Every read below is bounded: a server that waits forever fails the
	// test instead of hanging it.
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	return &rawConn{Conn: c, br: bufio.NewReader(c)}
}

func (c *rawConn) send(t *testing.T, s string) {
	t.Helper()
	if _, err := io.WriteString(c, s); err != nil {
		t.Fatal(err)
	}
}

// response reads one response, whole.
func (c *rawConn) response(t *testing.T) (*http.Response, string) {
	t.Helper()
	resp, err := http.ReadResponse(c.br, nil)
	if err != nil {
		t.Fatalf("no response: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

// closed reports whether the server closed the connection (rather than
// keeping it for another request).
func (c *rawConn) closed() bool {
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := c.br.ReadByte()
	return err == io.EOF
}

func postHead(path string, header string) string {
	return "POST " + path + " HTTP/1.1\r\nHost: api.openai.com\r\nAuthorization: Bearer sk-app\r\nContent-Type: application/json\r\n" + header + "\r\n"
}

// openAIError decodes an OpenAI error envelope, failing when the body is
// not one.
func openAIError(t *testing.T, body string) (typ, msg string) {
	t.Helper()
	var e struct {
		Error struct{ Type, Message string } `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &e); err != nil || e.Error.Type == "" {
		t.Fatalf("body %q is not an OpenAI error envelope", body)
	}
	return e.Error.Type, e.Error.Message
}

// TestOversizeContentLengthIsRefusedBeforeTheBodyIsRead: a body announced
// larger than the limit gets 413 in the app's shape at once — the client
// has sent only its headers — and the connection is closed.
func TestOversizeContentLengthIsRefusedBeforeTheBodyIsRead(t *testing.T) {
	t.Parallel()
	a := detourtest.NewVendor(t, rewrite.OpenAI, "a")
	r := startRunner(t, "api.openai.com", openaiPolicy([]string{upstreamJSON("a", a, "")}, `["a"]`, ""),
		func(cr *chain.Runner) { cr.MaxBodyBytes = 1 << 20 })

	c := dialRaw(t, r.srv.Listener.Addr().String())
	c.send(t, postHead("/v1/chat/completions", fmt.Sprintf("Content-Length: %d\r\n", 40<<20)))
	resp, body := c.response(t)
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("status %d (%s); want 413", resp.StatusCode, body)
	}
	if typ, msg := openAIError(t, body); typ != "invalid_request_error" || !strings.Contains(msg, "exceeds the limit of 1048576 bytes") {
		t.Errorf("error %s: %q", typ, msg)
	}
	if !c.closed() {
		t.Error("connection kept open after refusing a body that was never read")
	}
	if rec := r.record(t); rec.Status != 413 || rec.Error != "request body too large" {
		t.Errorf("record status %d error %q", rec.Status, rec.Error)
	}
	if a.Calls() != 0 {
		t.Error("the upstream was called")
	}
}

// TestOversizeChunkedBodyIsCutAsItStreams: a chunked body is refused once
// it passes the limit, without reading the rest.
func TestOversizeChunkedBodyIsCutAsItStreams(t *testing.T) {
	t.Parallel()
	a := detourtest.NewVendor(t, rewrite.OpenAI, "a")
	r := startRunner(t, "api.openai.com", openaiPolicy([]string{upstreamJSON("a", a, "")}, `["a"]`, ""),
		func(cr *chain.Runner) { cr.MaxBodyBytes = 1 << 20 })

	c := dialRaw(t, r.srv.Listener.Addr().String())
	c.send(t, postHead("/v1/chat/completions", "Transfer-Encoding: chunked\r\n"))
	// 1.5 MiB in chunks, and then the body never ends: only a server that
	// stops at the limit answers.
	chunk := strings.Repeat("a", 64<<10)
	go func() {
		// The server stops reading at the limit and closes: later writes
		// may fail, which is the point.
		for i := 0; i < 24; i++ {
			if _, err := fmt.Fprintf(c, "%x\r\n%s\r\n", len(chunk), chunk); err != nil {
				return
			}
		}
	}()
	resp, body := c.response(t)
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("status %d (%s); want 413", resp.StatusCode, body)
	}
	openAIError(t, body)
	if !resp.Close {
		t.Error("no Connection: close on a refused body")
	}
}

// TestBufferedBytesBudgetRefusesNewBodiesAndKeepsTheOnesItHolds: with
// limits.buffered_bytes taken by a request still sending its body, a new
// request gets 503 in the app's shape with retry-after: 1; the first one
// goes on and is answered, and once it is over the budget takes the second.
func TestBufferedBytesBudgetRefusesNewBodiesAndKeepsTheOnesItHolds(t *testing.T) {
	t.Parallel()
	a := detourtest.NewVendor(t, rewrite.OpenAI, "a")
	var cr *chain.Runner
	r := startRunner(t, "api.openai.com", openaiPolicy([]string{upstreamJSON("a", a, "")}, `["a"]`, `, "limits": {"buffered_bytes": 1048576}`),
		func(x *chain.Runner) { cr = x })
	const size = 600 << 10
	first := chatOfSize(size)

	c := dialRaw(t, r.srv.Listener.Addr().String())
	c.send(t, postHead("/v1/chat/completions", fmt.Sprintf("Content-Length: %d\r\n", size))+first[:size/2])
	waitUntil(t, "the first body's reservation", func() bool { return cr.BufferedBytes() == size })

	resp := post(t, r.srv.URL+"/v1/chat/completions", chatOfSize(size))
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("second request: status %d retry-after %q (%s); want 503 with retry-after 1", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	if typ, msg := openAIError(t, string(body)); typ != "server_error" || !strings.Contains(msg, "limits.buffered_bytes (1048576 bytes)") {
		t.Errorf("error %s: %q", typ, msg)
	}

	c.send(t, first[size/2:])
	if resp, body := c.response(t); resp.StatusCode != http.StatusOK {
		t.Fatalf("first request: status %d (%s); want 200: a request holding its share keeps working", resp.StatusCode, body)
	}
	waitUntil(t, "the budget given back", func() bool { return cr.BufferedBytes() == 0 })
	if resp := post(t, r.srv.URL+"/v1/chat/completions", chatOfSize(size)); resp.StatusCode != http.StatusOK {
		t.Fatalf("retried request: status %d; want 200", resp.StatusCode)
	}
}

// TestSlowBodyGets408AndTheConnectionCloses: a body that trickles in is cut
// at timeouts.client_body, counted from the request's arrival, with 408 in
// the app's shape, and the connection is closed.
func TestSlowBodyGets408AndTheConnectionCloses(t *testing.T) {
	t.Parallel()
	a := detourtest.NewVendor(t, rewrite.OpenAI, "a")
	r := newRunner(t, "api.openai.com", openaiPolicy([]string{upstreamJSON("a", a, "")}, `["a"]`, `, "timeouts": {"client_body": "100ms"}`))

	c := dialRaw(t, r.srv.Listener.Addr().String())
	// Ten bytes of a hundred, then nothing: the client stalls forever.
	c.send(t, postHead("/v1/chat/completions", "Content-Length: 100\r\n")+`{"model":"`)
	resp, body := c.response(t)
	if resp.StatusCode != http.StatusRequestTimeout {
		t.Fatalf("status %d (%s); want 408", resp.StatusCode, body)
	}
	if typ, msg := openAIError(t, body); typ != "timeout" || !strings.Contains(msg, "within 100ms (timeouts.client_body)") {
		t.Errorf("error %s: %q", typ, msg)
	}
	if !c.closed() {
		t.Error("connection kept open after a body timeout")
	}
	if rec := r.record(t); rec.Status != 408 {
		t.Errorf("record status %d; want 408", rec.Status)
	}
}

// TestBodyReadInTimeIsNotCutLater: the body deadline is lifted once the
// body is in, so a stream that outlives timeouts.client_body is whole.
func TestBodyReadInTimeIsNotCutLater(t *testing.T) {
	t.Parallel()
	a := detourtest.NewVendorWith(t, rewrite.OpenAI, fv.Options{Name: "a"})
	r := newRunner(t, "api.openai.com", openaiPolicy([]string{upstreamJSON("a", a, "")}, `["a"]`, `, "timeouts": {"client_body": "50ms"}`))
	// The answer starts after the body deadline has passed.
	a.Script(fv.Fault{Kind: fv.SlowFirstByte, Delay: 200 * time.Millisecond})
	resp := post(t, r.srv.URL+"/v1/chat/completions", streamBody)
	evs := events(t, resp.Body)
	if resp.StatusCode != 200 || len(evs) == 0 || string(evs[len(evs)-1].Data) != "[DONE]" {
		t.Fatalf("status %d, %d events; want a whole stream", resp.StatusCode, len(evs))
	}
	if rec := r.record(t); rec.Status != 200 || rec.Error != "" {
		t.Errorf("record status %d error %q", rec.Status, rec.Error)
	}
}

// TestMalformedChunkedBodyGets400 (issue 10): a broken chunked encoding is
// the app's error, answered 400 in its shape and logged as 400 — not taken
// for an app that went away (an empty 200, logged 499).
func TestMalformedChunkedBodyGets400(t *testing.T) {
	t.Parallel()
	a := detourtest.NewVendor(t, rewrite.OpenAI, "a")
	r := newRunner(t, "api.openai.com", openaiPolicy([]string{upstreamJSON("a", a, "")}, `["a"]`, ""))

	c := dialRaw(t, r.srv.Listener.Addr().String())
	c.send(t, postHead("/v1/chat/completions", "Transfer-Encoding: chunked\r\n")+"5\r\n{\"mod\r\nzz\r\n")
	resp, body := c.response(t)
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("status %d (%q); want 400", resp.StatusCode, body)
	}
	if typ, msg := openAIError(t, body); typ != "invalid_request_error" || !strings.Contains(msg, "framing is broken") {
		t.Errorf("error %s: %q", typ, msg)
	}
	if !c.closed() {
		t.Error("connection kept open after a broken body")
	}
	if rec := r.record(t); rec.Status != 400 || !strings.HasPrefix(rec.Error, "malformed request body framing") || rec.Outcome() != chain.RequestFailed {
		t.Errorf("record status %d error %q outcome %s; want 400, failed", rec.Status, rec.Error, rec.Outcome())
	}
}

// drainCase is one app shape whose stream is held open by its vendor when
// the drain ends.
type drainCase struct {
	shape      rewrite.Shape
	host, path string
	body       string
	// event is the exact in-stream error event the app must get.
	event string
}

const drainMsg = "detour is shutting down and its drain timeout (drain_timeout) ran out while this request was still running; retry the request"

var drainCases = []drainCase{
	{rewrite.OpenAI, "api.openai.com", "/v1/chat/completions", streamBody,
		`data: {"error":{"message":"` + drainMsg + `","type":"server_error","param":null,"code":"server_is_overloaded"}}` + "\n\n"},
	{rewrite.Anthropic, "api.anthropic.com", "/v1/messages",
		`{"model":"claude-sonnet-4-5","max_tokens":10,"stream":true,"messages":[{"role":"user","content":"hi"}]}`,
		"event: error\n" + `data: {"type":"error","error":{"type":"overloaded_error","message":"` + drainMsg + `"}}` + "\n\n"},
	{rewrite.Gemini, "generativelanguage.googleapis.com", "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
		`{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`,
		`data: {"error":{"code":503,"message":"` + drainMsg + `","status":"UNAVAILABLE"}}` + "\n\n"},
}

// TestDrainEndsOpenStreamsWithAnAppShapedErrorEvent (issue 10): a stream
// still open when the drain ends gets the in-stream error event of the
// app's vendor — the same path as an upstream cut — and its log line says
// outcome drained.
func TestDrainEndsOpenStreamsWithAnAppShapedErrorEvent(t *testing.T) {
	t.Parallel()
	for _, tc := range drainCases {
		t.Run(string(tc.shape), func(t *testing.T) {
			t.Parallel()
			v := detourtest.NewVendor(t, tc.shape, "v")
			pol := fmt.Sprintf(`{"upstreams": {%s}, "routes": [{"name": "r", "match": {"host": %q}, "chain": ["v"]}]}`, upstreamJSON("v", v, ""), tc.host)
			drain, drainNow := context.WithCancel(context.Background())
			defer drainNow()
			log := &detourtest.SyncBuffer{}
			r := startRunner(t, tc.host, pol, func(cr *chain.Runner) {
				cr.Drain = drain
				cr.Log = zerolog.New(log)
			})
			// Some content, then the vendor holds the stream open.
			v.Script(fv.Fault{Kind: fv.StreamStall, Delay: time.Minute})

			resp := post(t, r.srv.URL+tc.path, tc.body)
			if resp.StatusCode != 200 {
				t.Fatalf("status %d", resp.StatusCode)
			}
			rd := bufio.NewReader(resp.Body)
			if _, err := rd.ReadString('\n'); err != nil {
				t.Fatalf("no first event: %v", err)
			}
			drainNow()
			rest, err := io.ReadAll(rd)
			if err != nil {
				t.Fatalf("stream ended with %v; want a clean end after the error event", err)
			}
			if !strings.HasSuffix(string(rest), tc.event) {
				t.Errorf("stream ends with\n%q\nwant\n%q", tail(string(rest), 300), tc.event)
			}

			rec := r.record(t)
			if a := rec.Attempts[0]; a.Outcome != chain.OutcomeDrained {
				t.Errorf("attempt %+v; want outcome drained", a)
			}
			if rec.Outcome() != chain.RequestDrained {
				t.Errorf("request outcome %s; want drained", rec.Outcome())
			}
			var line struct {
				Error    string `json:"error"`
				Attempts []struct {
					Outcome string `json:"outcome"`
				} `json:"attempts"`
			}
			if err := json.Unmarshal([]byte(log.String()), &line); err != nil {
				t.Fatalf("log line %q: %v", log.String(), err)
			}
			if len(line.Attempts) != 1 || line.Attempts[0].Outcome != "drained" || !strings.HasPrefix(line.Error, "drained") {
				t.Errorf("log line %s; want attempt outcome drained", log.String())
			}
		})
	}
}

// TestDrainAnswersRequestsStillWaiting: a request whose upstream has not
// answered when the drain ends gets 503 in the app's shape, with
// retry-after, and outcome drained.
func TestDrainAnswersRequestsStillWaiting(t *testing.T) {
	t.Parallel()
	v := detourtest.NewVendor(t, rewrite.OpenAI, "v")
	drain, drainNow := context.WithCancel(context.Background())
	defer drainNow()
	r := startRunner(t, "api.openai.com", openaiPolicy([]string{upstreamJSON("v", v, "")}, `["v"]`, ""),
		func(cr *chain.Runner) { cr.Drain = drain })
	v.Script(fv.Fault{Kind: fv.Hang, Delay: time.Minute})

	var wg sync.WaitGroup
	wg.Add(1)
	var resp *http.Response
	var err error
	go func() {
		defer wg.Done()
		resp, err = http.Post(r.srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(`{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`))
	}()
	waitUntil(t, "the request at the vendor", func() bool { return v.InFlight() == 1 })
	drainNow()
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("status %d retry-after %q (%s); want 503, 1", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	if _, msg := openAIError(t, string(body)); msg != drainMsg {
		t.Errorf("message %q", msg)
	}
	rec := r.record(t)
	if rec.Attempts[0].Outcome != chain.OutcomeDrained || rec.Outcome() != chain.RequestDrained {
		t.Errorf("attempt %+v, outcome %s; want drained", rec.Attempts[0], rec.Outcome())
	}
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}
