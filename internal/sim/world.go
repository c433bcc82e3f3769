package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/detour-proxy/detour/internal/chain"
	"github.com/detour-proxy/detour/internal/health"
	"github.com/detour-proxy/detour/policy"
)

// epoch is where every virtual clock starts, so that nothing printed
// depends on when the simulation ran.
var epoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// clock is a virtual clock: it moves only when the simulation sets it or
// the runner sleeps (retry backoff), never with real time.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: epoch} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Sleep is Runner.Sleep: the wait passes at once, in virtual time.
func (c *clock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if d > 0 {
		c.now = c.now.Add(d)
	}
	return nil
}

// SetAtLeast moves the clock to t unless it is already past it (a
// request's retries may have slept beyond the next request's start).
func (c *clock) SetAtLeast(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.After(c.now) {
		c.now = t
	}
}

// memNet is the in-memory network of the virtual-clock tables: an
// http.RoundTripper that hands each upstream request to the handler of its
// host:port, and refuses connections to any other address. It counts the
// calls each address receives.
type memNet struct {
	mu     sync.Mutex
	hosts  map[string]http.Handler
	calls  map[string]int
	onCall func(host string)
	ports  int
}

func newMemNet() *memNet {
	return &memNet{hosts: map[string]http.Handler{}, calls: map[string]int{}}
}

// add makes the next loopback address serve h (nil: refuse connections)
// and returns it with its base URL (the API root of an OpenAI-shaped
// upstream). The port is only a dispatch key; nothing listens on it.
func (m *memNet) add(h http.Handler) (host, baseURL string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ports++
	host = fmt.Sprintf("127.0.0.1:%d", 10000+m.ports)
	if h != nil {
		m.hosts[host] = h
	}
	return host, "http://" + host + "/v1"
}

// RoundTrip serves req from memory. The whole answer is produced before
// RoundTrip returns: the fakes are told no faults that wait or stream.
func (m *memNet) RoundTrip(req *http.Request) (*http.Response, error) {
	m.mu.Lock()
	h := m.hosts[req.URL.Host]
	m.calls[req.URL.Host]++
	onCall := m.onCall
	m.mu.Unlock()
	if onCall != nil {
		onCall(req.URL.Host)
	}
	if h == nil {
		if req.Body != nil {
			req.Body.Close()
		}
		// What net/http returns for a closed port, so that detour
		// classifies it as it would the real thing.
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	}
	rec := newMemWriter()
	h.ServeHTTP(rec, req)
	if req.Body != nil {
		req.Body.Close()
	}
	return rec.response(req), nil
}

// callsTo is the number of requests sent to host so far.
func (m *memNet) callsTo(host string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.calls[host]
}

// outcome is what one simulated request came to.
type outcome struct {
	// status is the HTTP status the app got.
	status int
	// answeredBy names the upstream that answered, from detour's record
	// of the request; "" when none did.
	answeredBy string
}

// ok reports whether the app got an answer.
func (o outcome) ok() bool { return o.status == http.StatusOK && o.answeredBy != "" }

// app is one detour runner with its policy, as an app would reach it.
type app struct {
	runner *chain.Runner
	last   outcome
}

// newApp returns a runner of pol. clk nil means real time; rt nil means the
// real transports.
func newApp(pol *policy.Compiled, clk *clock, rt http.RoundTripper) *app {
	a := &app{}
	a.runner = &chain.Runner{
		Policy:     func() *policy.Compiled { return pol },
		Health:     health.New(),
		Transports: &chain.Transports{Override: rt},
		Log:        zerolog.Nop(),
		OnRecord: func(r *chain.Record) {
			a.last = outcome{status: r.Status, answeredBy: r.AnsweredBy}
		},
	}
	if clk != nil {
		a.runner.Now, a.runner.Sleep = clk.Now, clk.Sleep
	}
	return a
}

// The app's request: an OpenAI chat completion, as the openai SDKs send it.
var (
	validBody = []byte(`{"model":"gpt-4o","messages":[{"role":"user","content":"Say hello."}]}`)
	// invalidBody lacks messages: every OpenAI-shaped upstream (a Strict
	// fake) refuses it with 400 invalid_request_error.
	invalidBody = []byte(`{"model":"gpt-4o","max_tokens":16}`)
)

// do sends one request through the runner and returns what became of it.
func (a *app) do(ctx context.Context, body []byte) outcome {
	// As a server hands it to its handler: a proxy request with the
	// absolute URI, from a loopback client.
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://api.openai.com/v1/chat/completions", bytes.NewReader(body))
	if err != nil {
		return outcome{}
	}
	req.RequestURI = req.URL.String()
	req.RemoteAddr = "127.0.0.1:1234"
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer sk-simulated")
	w := newMemWriter()
	a.last = outcome{}
	a.runner.Serve(w, req, chain.Target{Host: "api.openai.com", Mode: "proxy"})
	o := a.last
	o.status = w.code
	return o
}

// upstream is one upstream of a generated policy.
type upstream struct {
	name    string
	baseURL string
}

// policyDoc builds a policy file: the upstreams (OpenAI-shaped, no
// credential), one route for api.openai.com chat completions whose chain is
// the upstreams in order, and extra top-level sections.
func policyDoc(version string, ups []upstream, extra map[string]any) map[string]any {
	upMap := map[string]any{}
	names := make([]string, 0, len(ups))
	for _, u := range ups {
		upMap[u.name] = map[string]any{"shape": "openai", "base_url": u.baseURL, "auth": map[string]any{"none": true}}
		names = append(names, u.name)
	}
	doc := map[string]any{
		"version":      version,
		"admin_listen": "off",
		// Never read: the simulation terminates no TLS.
		"ca":        map[string]any{"cert_file": "sim-ca.pem", "key_file": "sim-ca-key.pem"},
		"upstreams": upMap,
		"routes": []any{map[string]any{
			"name":  "openai-chat",
			"match": map[string]any{"host": "api.openai.com", "path": "/v1/chat/completions"},
			"chain": names,
		}},
	}
	for k, v := range extra {
		doc[k] = v
	}
	return doc
}

// compile compiles a generated policy with an environment that reads
// nothing from the machine.
func compile(doc map[string]any) (*policy.Compiled, error) {
	data, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	return policy.Compile("simulate.json", data, policy.Options{
		BaseDir:      ".",
		Getenv:       func(string) (string, bool) { return "", false },
		ReadFile:     func(p string) ([]byte, error) { return nil, os.ErrNotExist },
		Now:          func() time.Time { return epoch },
		DefaultCADir: ".",
	})
}

// breakerOff is the breaker section that turns the breaker off.
func breakerOff() map[string]any { return map[string]any{"enabled": false} }

// breakerOn is the breaker section that turns it on with every default.
func breakerOn() map[string]any { return map[string]any{"enabled": true} }

// class is an errors.classes entry: fall over at once, no retries, and the
// given cooldown ("0s": none).
func class(cooldown string) map[string]any {
	return map[string]any{"then": "fallback", "retries": 0, "cooldown": cooldown}
}

// seedFor derives an independent seed for one part of the simulation
// (a table, a cell, an upstream) from the run's seed.
func seedFor(seed int64, parts ...any) int64 {
	h := fnv.New64a()
	fmt.Fprint(h, seed)
	for _, p := range parts {
		fmt.Fprintf(h, "/%v", p)
	}
	return int64(h.Sum64() &^ (1 << 63))
}

// newRand returns the generator of one part of the simulation.
func newRand(seed int64, parts ...any) *rand.Rand {
	return rand.New(rand.NewPCG(uint64(seedFor(seed, parts...)), 0x73696d))
}
