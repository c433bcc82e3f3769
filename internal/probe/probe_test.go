package probe

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rs/zerolog"

	"github.com/detour-proxy/detour/internal/chain"
	"github.com/detour-proxy/detour/internal/fakevendor"
	"github.com/detour-proxy/detour/internal/health"
	"github.com/detour-proxy/detour/policy"
	"github.com/detour-proxy/detour/rewrite"
)

// Every test runs in a testing/synctest bubble: the probes' timers, the
// breakers' clock (time.Now) and the fakes' hangs are on virtual time, and
// the bubble fails the test if a probe goroutine outlives Run.

const (
	detourKey = "sk-detour-probe"
	appKey    = "sk-app-secret"
)

// memNet carries requests to fakes in memory (nothing in a synctest bubble
// may wait on a real socket), by host.
type memNet struct {
	mu    sync.Mutex
	hosts map[string]http.Handler
	n     int
}

func (m *memNet) add(h http.Handler) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.hosts == nil {
		m.hosts = map[string]http.Handler{}
	}
	m.n++
	host := fmt.Sprintf("127.0.0.1:%d", 10000+m.n)
	m.hosts[host] = h
	return "http://" + host
}

func (m *memNet) RoundTrip(req *http.Request) (resp *http.Response, err error) {
	m.mu.Lock()
	h := m.hosts[req.URL.Host]
	m.mu.Unlock()
	if h == nil {
		return nil, errors.New("connection refused")
	}
	if req.Body == nil {
		req.Body = http.NoBody // a server's request always has one
	}
	rec := httptest.NewRecorder()
	defer func() {
		// A fake that outwaits its client aborts the handler, as net/http
		// would close the connection.
		if p := recover(); p != nil {
			if p != http.ErrAbortHandler {
				panic(p)
			}
			resp, err = nil, req.Context().Err()
		}
	}()
	h.ServeHTTP(rec, req)
	if err := req.Context().Err(); err != nil {
		// The client gave up before the answer: it never got one.
		return nil, err
	}
	return rec.Result(), nil
}

func compile(t *testing.T, doc string) *policy.Compiled {
	t.Helper()
	c, err := policy.Compile("policy.json", []byte(doc), policy.Options{
		BaseDir: ".", DefaultCADir: ".",
		Getenv: func(k string) (string, bool) {
			switch k {
			case "DETOUR_KEY":
				return detourKey, true
			case "ROTATED_KEY":
				return "sk-rotated", true
			}
			return "", false
		},
		ReadFile: func(string) ([]byte, error) { return nil, os.ErrNotExist },
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// chatPolicy is a policy with upstreams primary (detour's own key; probe
// as given, "" for none) and backup, a chat route over [primary, backup],
// and extra top-level fields.
func chatPolicy(primaryBase, backupBase, probe, extra string) string {
	if probe != "" {
		probe = `, "probe": ` + probe
	}
	return fmt.Sprintf(`{"admin_listen": "off",
  "upstreams": {
    "primary": {"shape": "openai", "base_url": %q, "auth": {"env": "DETOUR_KEY"}%s},
    "backup":  {"shape": "openai", "base_url": %q, "auth": {"none": true}}
  },
  "routes": [{"name": "chat", "match": {"host": "api.openai.com", "path": "/v1/chat/completions"}, "chain": ["primary", "backup"]}]%s}`,
		primaryBase+"/v1", probe, backupBase+"/v1", extra)
}

// world is one test's fakes, policy store, health and runner.
type world struct {
	net      *memNet
	primary  *fakevendor.Vendor
	backup   *fakevendor.Vendor
	store    *policy.Store
	health   *health.Registry
	runner   *chain.Runner
	lastSeen chain.Record
	mgr      *Manager
	results  []Result
	stop     func()
}

func newWorld(t *testing.T, probe, extra string) *world {
	t.Helper()
	w := &world{net: &memNet{}, health: health.New()}
	w.primary = fakevendor.New(rewrite.OpenAI, fakevendor.Options{Name: "primary", Strict: true})
	w.backup = fakevendor.New(rewrite.OpenAI, fakevendor.Options{Name: "backup", Strict: true})
	pb, bb := w.net.add(w.primary), w.net.add(w.backup)
	w.store = policy.NewStore(compile(t, chatPolicy(pb, bb, probe, extra)))
	tr := &chain.Transports{Override: w.net}
	w.runner = &chain.Runner{Policy: w.store.Load, Health: w.health, Transports: tr, Log: zerolog.Nop(),
		OnRecord: func(r *chain.Record) { w.lastSeen = *r }}
	var mu sync.Mutex
	w.mgr = New(Options{Policy: w.store.Load, Health: w.health, Transports: tr, Log: zerolog.Nop(),
		OnResult: func(r Result) { mu.Lock(); w.results = append(w.results, r); mu.Unlock() }})
	return w
}

// start runs the manager until stop, which returns once Run has.
func (w *world) start(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.mgr.Run(ctx); close(done) }()
	w.stop = func() {
		cancel()
		<-done
		if n := w.mgr.Running(); n != 0 {
			t.Errorf("after Run returned, %d upstreams still probed", n)
		}
	}
	synctest.Wait()
}

// ask sends one app chat completion, with the app's own key, and returns
// the status and the upstream that answered.
func (w *world) ask() (int, string) {
	req := httptest.NewRequest(http.MethodPost, "http://api.openai.com/v1/chat/completions",
		strings.NewReader(`{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`))
	req.RequestURI = req.URL.String()
	req.RemoteAddr = "127.0.0.1:1234"
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+appKey)
	rec := httptest.NewRecorder()
	w.lastSeen = chain.Record{}
	w.runner.Serve(rec, req, chain.Target{Host: "api.openai.com", Mode: "proxy"})
	return rec.Code, w.lastSeen.AnsweredBy
}

var overloaded = fakevendor.Fault{Kind: fakevendor.Status, Class: fakevendor.ClassOverloaded}

// A failing probe opens the breaker before any app request: the app's
// request then skips the primary without a call to it, and is answered by
// the backup. Without probes the primary would have taken (and failed) it.
func TestFailingProbeOpensBreakerBeforeAnAppRequest(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, `{"interval": "10s", "timeout": "2s"}`, "")
		w.primary.SetDefault(overloaded)
		w.start(t)
		defer w.stop()
		if b := w.health.Breaker("primary", time.Now()); b.State != health.BreakerOpen || !strings.Contains(b.Reason, "probe failed") {
			t.Fatalf("after the first probe the breaker is %v (%q); want open by the probe", b.State, b.Reason)
		}
		reqs := w.primary.Requests()
		if len(reqs) != 1 || reqs[0].Method != http.MethodGet || reqs[0].Path != "/v1/models" {
			t.Fatalf("primary got %d requests (%+v); want the one probe, GET /v1/models", len(reqs), reqs)
		}
		status, by := w.ask()
		if status != 200 || by != "backup" {
			t.Errorf("app request: %d answered by %q; want 200 from backup", status, by)
		}
		if n := w.primary.Calls(); n != 1 {
			t.Errorf("primary got %d calls; want only the probe's (the app's request skips an open breaker)", n)
		}
		if len(w.results) != 1 || w.results[0].Label() != "overloaded" || w.results[0].Breaker != health.BreakerHard {
			t.Errorf("results %+v; want one overloaded, hard", w.results)
		}
	})
}

// A passing probe closes a breaker a failing one opened, without an app
// request having to find out first; then the primary answers again.
func TestPassingProbeClosesTheBreaker(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, `{"interval": "10s", "timeout": "2s"}`, `, "breaker": {"enabled": true, "open_for": "10m", "half_open_probes": 1}`)
		w.primary.Script(overloaded) // the first probe fails; every call after it is answered
		w.start(t)
		defer w.stop()
		if b := w.health.Breaker("primary", time.Now()); b.State != health.BreakerOpen {
			t.Fatalf("after the failing probe the breaker is %v; want open", b.State)
		}
		time.Sleep(12 * time.Second) // past the next probe (9–11s), jitter included
		synctest.Wait()
		if b := w.health.Breaker("primary", time.Now()); b.State != health.BreakerClosed {
			t.Fatalf("after a passing probe the breaker is %v; want closed (open_for 10m has not passed)", b.State)
		}
		if status, by := w.ask(); status != 200 || by != "primary" {
			t.Errorf("app request: %d answered by %q; want 200 from primary", status, by)
		}
		st := w.mgr.Status()["primary"]
		if st.Passed != 1 || st.Failed != 1 || st.ConsecutiveFailures != 0 || st.Last.Label() != ResultOK {
			t.Errorf("status %+v; want one passed, one failed, last ok", st)
		}
	})
}

// A probe that runs out of its timeout is a timeout (a soft failure), as an
// attempt's would be, and opens the breaker too.
func TestProbeTimeoutIsATimeout(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, `{"interval": "10s", "timeout": "2s"}`, "")
		w.primary.SetDefault(fakevendor.Fault{Kind: fakevendor.Hang, Delay: time.Minute})
		start := time.Now()
		w.start(t)
		defer w.stop()
		time.Sleep(3 * time.Second) // the fake hangs a minute; the probe's timeout is 2s
		synctest.Wait()
		if len(w.results) != 1 || w.results[0].Class != policy.ClassTimeout || w.results[0].Breaker != health.BreakerSoft {
			t.Fatalf("results %+v; want one timeout, soft", w.results)
		}
		if got := w.results[0].Latency; got != 2*time.Second {
			t.Errorf("the probe took %v; want its timeout, 2s", got)
		}
		if b := w.health.Breaker("primary", start.Add(3*time.Second)); b.State != health.BreakerOpen {
			t.Errorf("breaker %v after a timed-out probe; want open", b.State)
		}
	})
}

// A probe refused for its key says nothing about the upstream's health: the
// breaker is left alone and the app's requests go on.
func TestNeutralProbeLeavesTheBreaker(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, `{"interval": "10s", "timeout": "2s"}`, "")
		w.primary.Script(fakevendor.Fault{Kind: fakevendor.Status, Class: fakevendor.ClassAuth})
		w.start(t)
		defer w.stop()
		if len(w.results) != 1 || w.results[0].Class != policy.ClassAuth || w.results[0].Breaker != health.BreakerNeutral {
			t.Fatalf("results %+v; want one auth, neutral", w.results)
		}
		if b := w.health.Breaker("primary", time.Now()); b.State != health.BreakerClosed {
			t.Errorf("breaker %v after a 401 probe; want closed", b.State)
		}
		if status, by := w.ask(); status != 200 || by != "primary" {
			t.Errorf("app request: %d answered by %q; want 200 from primary", status, by)
		}
	})
}

// Probes start, restart and stop with the policy in effect: on Sync at once,
// and without it within Resync; and Run leaves no goroutine behind.
func TestProbesFollowReloads(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, "", "")
		pb, bb := "http://127.0.0.1:10001", "http://127.0.0.1:10002"
		noProbe := w.store.Load()
		every10s := compile(t, chatPolicy(pb, bb, `{"interval": "10s", "timeout": "1s"}`, ""))
		every60s := compile(t, chatPolicy(pb, bb, `{"interval": "60s", "timeout": "1s"}`, ""))
		w.start(t)
		defer w.stop()
		if n, calls := w.mgr.Running(), w.primary.Calls(); n != 0 || calls != 0 {
			t.Fatalf("no probe in the policy: %d probed, %d calls; want none", n, calls)
		}

		w.store.Swap(every10s)
		w.mgr.Sync()
		synctest.Wait()
		if n, calls := w.mgr.Running(), w.primary.Calls(); n != 1 || calls != 1 {
			t.Fatalf("probe added: %d probed, %d calls; want 1 and the first probe at once", n, calls)
		}
		// Probes at 0, 9–11s, 18–22s, 27–33s.
		time.Sleep(23 * time.Second)
		synctest.Wait()
		if calls := w.primary.Calls(); calls != 3 {
			t.Errorf("after 23s at 10s ±10%%: %d calls; want 3", calls)
		}

		w.store.Swap(every60s)
		w.mgr.Sync()
		synctest.Wait()
		time.Sleep(40 * time.Second) // four of the old interval, less than the new one
		synctest.Wait()
		if calls := w.primary.Calls(); calls != 4 {
			t.Errorf("interval changed to 60s: %d calls 40s later; want 4 (one at the restart, none from the old loop)", calls)
		}

		// No Sync: the manager finds the policy within Resync.
		w.store.Swap(noProbe)
		time.Sleep(DefaultResync)
		synctest.Wait()
		if n := w.mgr.Running(); n != 0 {
			t.Errorf("probe removed: %d upstreams still probed", n)
		}
		before := w.primary.Calls()
		time.Sleep(5 * time.Minute)
		synctest.Wait()
		if calls := w.primary.Calls(); calls != before {
			t.Errorf("probe removed: %d calls after it; want none", calls-before)
		}
	})
}

// Probes carry the upstream's own credential in its vendor's header, or
// none, and never the app's key; each shape's probe is a request its fake
// (a strict one) answers.
func TestProbesUseOnlyThePolicysCredential(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		shape            rewrite.Shape
		base, auth       string
		request          string
		method, path     string
		header, wantCred string
	}{
		{rewrite.OpenAI, "/v1", `{"env": "DETOUR_KEY"}`, "models", "GET", "/v1/models", "Authorization", "Bearer " + detourKey},
		{rewrite.OpenAI, "/v1", `{"env": "DETOUR_KEY"}`, "completion", "POST", "/v1/chat/completions", "Authorization", "Bearer " + detourKey},
		{rewrite.OpenAI, "/v1", `{"none": true}`, "models", "GET", "/v1/models", "Authorization", ""},
		{rewrite.Anthropic, "", `{"env": "DETOUR_KEY"}`, "models", "GET", "/v1/models", "X-Api-Key", detourKey},
		{rewrite.Anthropic, "", `{"env": "DETOUR_KEY"}`, "completion", "POST", "/v1/messages", "X-Api-Key", detourKey},
		{rewrite.Gemini, "", `{"env": "DETOUR_KEY"}`, "models", "GET", "/v1beta/models", "X-Goog-Api-Key", detourKey},
		{rewrite.Gemini, "", `{"env": "DETOUR_KEY"}`, "completion", "POST", "/v1beta/models/m-1:generateContent", "X-Goog-Api-Key", detourKey},
	} {
		t.Run(fmt.Sprintf("%s/%s/%s", tc.shape, tc.request, tc.auth), func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				n := &memNet{}
				probed := fakevendor.New(tc.shape, fakevendor.Options{Strict: true})
				app := fakevendor.New(rewrite.OpenAI, fakevendor.Options{})
				pb, ab := n.add(probed), n.add(app)
				model := ""
				if tc.request == "completion" {
					model = `, "model": "m-1"`
				}
				// The app's requests go to "client", which forwards the
				// app's key; "probed" is only probed.
				doc := fmt.Sprintf(`{"admin_listen": "off",
  "upstreams": {
    "client": {"shape": "openai", "base_url": %q, "auth": {"from": "client"}},
    "probed": {"shape": %q, "base_url": %q, "auth": %s, "models": {"*": "m-1"}, "probe": {"interval": "5s", "timeout": "1s", "request": %q%s}}
  },
  "routes": [{"name": "chat", "match": {"host": "api.openai.com", "path": "/v1/chat/completions"}, "chain": ["client", "probed"]}]}`,
					ab+"/v1", tc.shape, pb+tc.base, tc.auth, tc.request, model)
				store := policy.NewStore(compile(t, doc))
				hr := health.New()
				tr := &chain.Transports{Override: n}
				w := &world{runner: &chain.Runner{Policy: store.Load, Health: hr, Transports: tr, Log: zerolog.Nop()}}
				m := New(Options{Policy: store.Load, Health: hr, Transports: tr, Log: zerolog.Nop()})
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan struct{})
				go func() { m.Run(ctx); close(done) }()
				for range 3 {
					if status, _ := w.ask(); status != 200 {
						t.Fatalf("app request: %d", status)
					}
					time.Sleep(6 * time.Second)
					synctest.Wait()
				}
				cancel()
				<-done

				if got := app.Requests()[0].Header.Get("Authorization"); got != "Bearer "+appKey {
					t.Fatalf("the app's own upstream got Authorization %q; the test's app key did not travel", got)
				}
				reqs := probed.Requests()
				if len(reqs) < 3 {
					t.Fatalf("%d probes in 18s at 5s; want at least 3", len(reqs))
				}
				for _, r := range reqs {
					if r.Method != tc.method || r.Path != tc.path {
						t.Errorf("probe %s %s; want %s %s", r.Method, r.Path, tc.method, tc.path)
					}
					if got := r.Header.Get(tc.header); got != tc.wantCred {
						t.Errorf("probe %s = %q; want %q", tc.header, got, tc.wantCred)
					}
					for k, vs := range r.Header {
						for _, v := range vs {
							if strings.Contains(v, appKey) {
								t.Errorf("probe header %s carries the app's key", k)
							}
						}
					}
					for _, k := range policy.CredentialHeaders() {
						if http.CanonicalHeaderKey(k) != tc.header && r.Header.Get(k) != "" {
							t.Errorf("probe sent credential header %s = %q; want only %s", k, r.Header.Get(k), tc.header)
						}
					}
					if r.Method == http.MethodPost {
						var body map[string]json.RawMessage
						if err := json.Unmarshal(r.Body, &body); err != nil || bytes.Contains(r.Body, []byte(appKey)) {
							t.Errorf("probe body %s", r.Body)
						}
					}
				}
				st := m.Status()
				if len(st) != 0 {
					t.Errorf("after Run returned, status still lists %d upstreams", len(st))
				}
				if b := hr.Breaker("probed", time.Now()); b.State != health.BreakerClosed || b.Opens != 0 {
					t.Errorf("probed upstream's breaker %+v; want never opened (every probe answered)", b)
				}
			})
		})
	}
}

// A reload that changes an upstream but not its probe settings (a rotated
// key) neither restarts nor delays its probes: the next probe, on its own
// schedule, carries the new key.
func TestProbeUsesTheKeyInEffect(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, `{"interval": "10s", "timeout": "1s"}`, "")
		w.start(t)
		defer w.stop()
		doc := chatPolicy("http://127.0.0.1:10001", "http://127.0.0.1:10002", `{"interval": "10s", "timeout": "1s"}`, "")
		w.store.Swap(compile(t, strings.Replace(doc, `"DETOUR_KEY"`, `"ROTATED_KEY"`, 1)))
		w.mgr.Sync()
		synctest.Wait()
		if n := w.primary.Calls(); n != 1 {
			t.Fatalf("%d calls right after the key changed; want only the first probe (no restart)", n)
		}
		time.Sleep(12 * time.Second)
		synctest.Wait()
		reqs := w.primary.Requests()
		if len(reqs) != 2 {
			t.Fatalf("%d probes in 12s at 10s; want 2", len(reqs))
		}
		if a, b := reqs[0].Header.Get("Authorization"), reqs[1].Header.Get("Authorization"); a != "Bearer "+detourKey || b != "Bearer sk-rotated" {
			t.Errorf("probes sent %q then %q; want the old key, then the rotated one", a, b)
		}
	})
}
