package chain_test

// Review tests for the resilience layer (lanes, hedging, retries, gates,
// last resorts). Each test names the bug it demonstrates; see the review
// report for the fix each one expects.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/detour-proxy/detour/internal/chain"
	"github.com/detour-proxy/detour/internal/detourtest"
	fv "github.com/detour-proxy/detour/internal/fakevendor"
	"github.com/detour-proxy/detour/rewrite"
)

// rtFunc is an in-memory upstream transport (chain.Transports.Override):
// requests are told apart by URL host.
type rtFunc func(*http.Request) (*http.Response, error)

func (f rtFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// memUpstream is an upstream entry reached through the override transport
// at https://NAME.test/v1.
func memUpstream(name, extra string) string {
	return fmt.Sprintf(`%q: {"shape": "openai", "base_url": "https://%s.test/v1", "auth": {"from": "client"}%s}`, name, name, extra)
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

// Bug: runHedged starts new lanes after a lane has already claimed the
// answer. The claim cancels the lanes that exist, but runHedged only learns
// that the request is decided when the winner's result arrives (for a
// stream: after the whole pump). Until then a loser's kindNext (a failure
// that was classified before the claim) or the hedge timer starts the next
// upstream: an extra upstream call that can only end hedge_lost, whose lane
// is not cancelled (it was not in s.lanes at claim time), and which Serve
// waits for before the handler returns.
func TestReviewHedgeStartsNoUpstreamAfterAWinner(t *testing.T) {
	releaseA, finishA := make(chan struct{}), make(chan struct{})
	bClose := &closeGate{Reader: strings.NewReader(overloadedBody), closing: make(chan struct{}), release: make(chan struct{})}
	var claimed atomic.Bool
	var cAfterClaim atomic.Int32
	rt := rtFunc(func(req *http.Request) (*http.Response, error) {
		ctx := req.Context()
		switch req.URL.Hostname() {
		case "a.test":
			select {
			case <-releaseA:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			pr, pw := io.Pipe()
			go func() {
				io.WriteString(pw, roleChunk)
				io.WriteString(pw, `data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"one"}}]}`+"\n\n")
				select {
				case <-finishA:
					io.WriteString(pw, `data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`+"\n\ndata: [DONE]\n\n")
					pw.Close()
				case <-ctx.Done():
					pw.CloseWithError(ctx.Err())
				}
			}()
			return &http.Response{StatusCode: 200, Status: "200 OK", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
				Header: http.Header{"Content-Type": {"text/event-stream"}}, Body: pr, Request: req}, nil
		case "b.test":
			resp := jsonResponse(req, 503, overloadedBody)
			resp.Body = bClose
			return resp, nil
		default: // c.test
			if claimed.Load() {
				cAfterClaim.Add(1)
			}
			return jsonResponse(req, 503, overloadedBody), nil
		}
	})
	r := startRunner(t, "api.openai.com", openaiPolicy([]string{memUpstream("a", ""), memUpstream("b", ""), memUpstream("c", "")}, `["a","b","c"]`,
		`, "hedge_after": "100ms", "breaker": {"enabled": false}`), func(cr *chain.Runner) { cr.Transports = &chain.Transports{Override: rt} })

	type result struct {
		resp *http.Response
		err  error
	}
	got := make(chan result, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, r.srv.URL+"/v1/chat/completions", strings.NewReader(streamBody))
		req.Header.Set("Authorization", "Bearer sk-app")
		resp, err := http.DefaultClient.Do(req)
		got <- result{resp, err}
	}()

	// a is slow: b starts as a hedge and fails with a 503. Its failure is
	// classified; its lane is about to report kindNext.
	waitFor(t, "b's attempt to finish", bClose.closing)
	// Now a answers and commits: it wins and the app gets its first event.
	close(releaseA)
	res := <-got
	if res.err != nil {
		t.Fatal(res.err)
	}
	defer res.resp.Body.Close()
	br := bufio.NewReader(res.resp.Body)
	for {
		line, err := br.ReadString('\n')
		if strings.Contains(line, `"one"`) {
			break
		}
		if err != nil {
			t.Fatalf("stream ended before a's first content: %v", err)
		}
	}
	claimed.Store(true)
	// b's lane reports its failure only now, after a's claim.
	close(bClose.release)
	deadline := time.Now().Add(time.Second)
	for cAfterClaim.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	close(finishA)
	io.Copy(io.Discard, br)
	rec := r.record(t)
	if n := cAfterClaim.Load(); n != 0 {
		t.Errorf("upstream c was called %d time(s) after a had already answered the app (attempts %q); a decided request must start no lane", n, trail(rec))
	}
	if res.resp.Header.Get(chain.HeaderAnsweredBy) != "a" {
		t.Errorf("answered by %q; want a", res.resp.Header.Get(chain.HeaderAnsweredBy))
	}
}

// Bug: a failure that was to be retried is not kept in s.failures (failed()
// adds it only when it does not retry). When the retry then does not
// happen — the deadline passed during the wait, or admit refuses the retry
// (local limit, a breaker or cooldown another request started) —
// runUpstream returns kindNext with nothing recorded, and writeExhausted
// answers as if nothing had been sent: a 400 "no upstream serves model" or
// a 429 "local limit", hiding the upstream's own 5xx.
func TestReviewRetryThatDoesNotHappenKeepsItsFailure(t *testing.T) {
	t.Run("deadline passes during the wait", func(t *testing.T) {
		a := detourtest.NewVendor(t, rewrite.OpenAI, "a")
		a.SetDefault(fv.Fault{Kind: fv.Status, Status: 500})
		r := startRunner(t, "api.openai.com", openaiPolicy([]string{upstreamJSON("a", a, "")}, `["a"]`,
			`, "deadline": "2s", "retry": {"base": "1ms", "max": "1ms"}, "errors": {"classes": {"server_error": {"retries": 1}}}`),
			func(cr *chain.Runner) {
				// A wait that ends late (a loaded scheduler, a GC pause): the
				// wait was shorter than what was left, the wake-up is not.
				cr.Sleep = func(ctx context.Context, d time.Duration) error {
					time.Sleep(2200 * time.Millisecond)
					return ctx.Err()
				}
			})
		resp := post(t, r.srv.URL+"/v1/chat/completions", chatBody)
		body, _ := io.ReadAll(resp.Body)
		rec := r.record(t)
		if resp.StatusCode < 500 {
			t.Errorf("status %d body %s (attempts %q); want a's 5xx failure (or a 504), not a client error", resp.StatusCode, body, trail(rec))
		}
		if a.Calls() != 1 {
			t.Errorf("a called %d times; want 1 (the retry came after the deadline)", a.Calls())
		}
	})
	t.Run("local limit refuses the retry", func(t *testing.T) {
		a := detourtest.NewVendor(t, rewrite.OpenAI, "a")
		a.SetDefault(fv.Fault{Kind: fv.Status, Status: 500})
		r, _ := newClockedRunner(t, "api.openai.com", openaiPolicy([]string{upstreamJSON("a", a, `, "limits": {"rpm": 1, "burst": 1}`)}, `["a"]`,
			`, "errors": {"classes": {"server_error": {"retries": 1}}}`))
		resp := post(t, r.srv.URL+"/v1/chat/completions", chatBody)
		body, _ := io.ReadAll(resp.Body)
		rec := r.record(t)
		if resp.StatusCode != 500 && resp.StatusCode != 502 {
			t.Errorf("status %d body %s (attempts %q); want a's server_error: a was sent the request and failed", resp.StatusCode, body, trail(rec))
		}
	})
}

// Bug: when the deadline passes before an upstream, candidate() halts the
// chain and the static upstream at its end (the last resort that "never
// fails") is never reached — though the same chain without the middle
// upstream does serve it after the same deadline.
func TestReviewDeadlineStillServesTheStaticLastResort(t *testing.T) {
	cases := []struct {
		name, chain, extra string
	}{
		{"control: a then sorry", `["a","sorry"]`, ""},
		{"a, b then sorry", `["a","b","sorry"]`, ""},
		{"a, b, c then sorry, hedged", `["a","b","c","sorry"]`, `, "hedge_after": "250ms"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := detourtest.NewVendor(t, rewrite.OpenAI, "a")
			b := detourtest.NewVendor(t, rewrite.OpenAI, "b")
			cv := detourtest.NewVendor(t, rewrite.OpenAI, "c")
			a.SetDefault(fv.Fault{Kind: fv.Hang, Delay: time.Minute})
			b.SetDefault(fv.Fault{Kind: fv.Hang, Delay: time.Minute})
			r := newRunner(t, "api.openai.com", openaiPolicy([]string{upstreamJSON("a", a, ""), upstreamJSON("b", b, ""), upstreamJSON("c", cv, ""), sorry}, c.chain,
				`, "deadline": "300ms"`+c.extra))
			resp := post(t, r.srv.URL+"/v1/chat/completions", chatBody)
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != 200 || !strings.Contains(string(body), "The assistant is busy.") {
				t.Errorf("status %d body %s (attempts %q); want the static answer", resp.StatusCode, body, trail(r.record(t)))
			}
		})
	}
}

// Checked (passes): without hedging a panic in an attempt unwinds through
// the deferred endAttempt, so the upstream's concurrency slot and breaker
// ticket are given back, and net/http recovers the handler.
func TestReviewPanicInSequentialAttemptReleasesItsSlot(t *testing.T) {
	var calls atomic.Int32
	rt := rtFunc(func(req *http.Request) (*http.Response, error) {
		if calls.Add(1) == 1 {
			panic("review: boom in an attempt")
		}
		return jsonResponse(req, 200, `{"id":"x","object":"chat.completion","created":1,"model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"Hello from a."},"finish_reason":"stop"}]}`), nil
	})
	r := startRunner(t, "api.openai.com", openaiPolicy([]string{memUpstream("a", `, "limits": {"concurrency": 1}`)}, `["a"]`, ""),
		func(cr *chain.Runner) { cr.Transports = &chain.Transports{Override: rt} })
	r.srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	req, _ := http.NewRequest(http.MethodPost, r.srv.URL+"/v1/chat/completions", strings.NewReader(chatBody))
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
	}
	if got := openaiText(t, post(t, r.srv.URL+"/v1/chat/completions", chatBody)); got != "Hello from a." {
		t.Fatalf("answer %q", got)
	}
	if n := r.health.Limit("a", time.Now()).InFlight; n != 0 {
		t.Errorf("%d slots still held", n)
	}
}

// Bug: hedged lanes run in goroutines with no recover. A panic in any
// attempt (a translator, a transport, a dialer) — which net/http recovers
// when the chain runs sequentially, in the handler's goroutine — kills the
// whole sidecar once hedge_after is set. The child process below serves one
// hedged request whose first upstream panics; it must survive.
func TestReviewPanicInAHedgedLaneIsNotFatal(t *testing.T) {
	if os.Getenv("DETOUR_REVIEW_PANIC_CHILD") == "1" {
		rt := rtFunc(func(req *http.Request) (*http.Response, error) {
			if req.URL.Hostname() == "a.test" {
				panic("review: boom in a hedged lane")
			}
			return jsonResponse(req, 200, `{"id":"x","object":"chat.completion","created":1,"model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"Hello from b."},"finish_reason":"stop"}]}`), nil
		})
		r := startRunner(t, "api.openai.com", openaiPolicy([]string{memUpstream("a", ""), memUpstream("b", "")}, `["a","b"]`, `, "hedge_after": "50ms"`),
			func(cr *chain.Runner) { cr.Transports = &chain.Transports{Override: rt} })
		req, _ := http.NewRequest(http.MethodPost, r.srv.URL+"/v1/chat/completions", strings.NewReader(chatBody))
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
		// Still serving.
		req, _ = http.NewRequest(http.MethodGet, r.srv.URL+"/v1/models", nil)
		_, _ = (&http.Client{Timeout: 2 * time.Second}).Do(req)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestReviewPanicInAHedgedLaneIsNotFatal$", "-test.count=1")
	cmd.Env = append(os.Environ(), "DETOUR_REVIEW_PANIC_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		i := strings.Index(string(out), "panic: ")
		msg := string(out)
		if i >= 0 {
			msg = msg[i:min(len(msg), i+300)]
		}
		t.Errorf("a panic in a hedged lane killed the process (%v):\n%s", err, msg)
	}
}
