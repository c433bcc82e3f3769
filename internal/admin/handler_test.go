package admin

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/detour-proxy/detour/internal/chain"
	"github.com/detour-proxy/detour/internal/health"
	"github.com/detour-proxy/detour/policy"
)

func testHandler(ready func() error) (http.Handler, *policy.Store) {
	c := &policy.Compiled{Version: "v1", Hash: "0123456789abcdef", Fingerprint: "fp1", Source: "/etc/detour/policy.json",
		LoadedAt:  time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC),
		Upstreams: map[string]*policy.Upstream{"primary": {Name: "primary", Key: "sk-never-shown"}},
		Breaker:   policy.BreakerPolicy{Enabled: true}}
	store := policy.NewStore(c)
	hr := health.New()
	return NewHandler(Options{Store: store, Health: hr, Metrics: NewMetrics(store, hr), Ready: ready}), store
}

// local makes req come from a loopback peer (httptest.NewRequest's default
// peer, 192.0.2.1, is not one).
func local(req *http.Request) *http.Request {
	req.RemoteAddr = "127.0.0.1:40000"
	return req
}

func do(t *testing.T, h http.Handler, req *http.Request) (int, http.Header, string) {
	t.Helper()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	b, _ := io.ReadAll(w.Result().Body)
	return w.Code, w.Result().Header, string(b)
}

func TestReadyzFollowsTheReadinessFunc(t *testing.T) {
	var notReady error = errors.New("proxy listener not accepting yet")
	h, _ := testHandler(func() error { return notReady })

	code, hdr, body := do(t, h, httptest.NewRequest("GET", "/readyz", nil))
	var got readyJSON
	if err := json.Unmarshal([]byte(body), &got); err != nil || code != 503 || hdr.Get("Content-Type") != "application/json" {
		t.Fatalf("not ready: %d %q %v; want 503 JSON", code, body, err)
	}
	if got.Ready || got.Reason != "proxy listener not accepting yet" {
		t.Errorf("not ready body = %+v; want the reason", got)
	}

	notReady = nil
	if code, _, body := do(t, h, httptest.NewRequest("GET", "/readyz", nil)); code != 200 || !strings.Contains(body, `"ready": true`) {
		t.Errorf("ready: %d %q; want 200", code, body)
	}
	// Liveness does not depend on readiness.
	if code, _, body := do(t, h, httptest.NewRequest("GET", "/healthz", nil)); code != 200 || body != "ok\n" {
		t.Errorf("healthz: %d %q; want 200 ok", code, body)
	}
}

func TestReadinessNeedsEverythingAndEndsAtShutdown(t *testing.T) {
	var r Readiness
	steps := []struct {
		do   func()
		want string
	}{
		{func() {}, "policy not loaded"},
		{r.PolicyLoaded, "CA not ready"},
		{r.CAReady, "proxy listener not accepting yet"},
		{r.Serving, ""},
		{r.ShuttingDown, "shutting down: draining in-flight requests"},
	}
	for _, s := range steps {
		s.do()
		got := ""
		if err := r.Check(); err != nil {
			got = err.Error()
		}
		if got != s.want {
			t.Errorf("Check = %q; want %q", got, s.want)
		}
	}
}

func TestRollbackRequestErrors(t *testing.T) {
	h, store := testHandler(nil)
	post := func(body string, mod func(*http.Request)) (int, string) {
		req := local(httptest.NewRequest("POST", "http://127.0.0.1:8788/policy/rollback", strings.NewReader(body)))
		if mod != nil {
			mod(req)
		}
		code, _, b := do(t, h, req)
		return code, b
	}
	for _, tc := range []struct {
		name, body string
		mod        func(*http.Request)
		want       int
	}{
		{"bad json", `{"hash":`, nil, 400},
		{"unknown field", `{"hash": "01234567", "force": true}`, nil, 400},
		{"short hash", `{"hash": "0123"}`, nil, 400},
		{"unknown hash", `{"hash": "ffffffff"}`, nil, 404},
		{"dns rebinding host", `{"hash": "01234567"}`, func(r *http.Request) { r.Host = "evil.example.com:8788" }, 403},
		{"cross-origin browser", `{"hash": "01234567"}`, func(r *http.Request) { r.Header.Set("Sec-Fetch-Site", "cross-site") }, 403},
		{"ok by prefix", `{"hash": "01234567"}`, nil, 200},
		{"ok via localhost", `{"hash": "0123456789ABCDEF"}`, func(r *http.Request) { r.Host = "localhost:8788" }, 200},
	} {
		if code, body := post(tc.body, tc.mod); code != tc.want {
			t.Errorf("%s: %d %s; want %d", tc.name, code, body, tc.want)
		}
	}
	if ok, _ := store.Reloads(); ok != 2 {
		t.Errorf("ok reloads = %d; want the 2 good rollbacks counted", ok)
	}

	code, hdr, _ := do(t, h, local(httptest.NewRequest("GET", "http://127.0.0.1:8788/policy/rollback", nil)))
	if code != 405 || hdr.Get("Allow") != "POST" {
		t.Errorf("GET /policy/rollback: %d Allow %q; want 405 Allow POST", code, hdr.Get("Allow"))
	}
}

func TestStatusNeverShowsKeysOrBaseURLs(t *testing.T) {
	h, _ := testHandler(nil)
	_, _, body := do(t, h, local(httptest.NewRequest("GET", "http://127.0.0.1:8788/status", nil)))
	var st StatusJSON
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatal(err)
	}
	u, ok := st.Upstreams["primary"]
	if !ok || u.Breaker == nil || u.Breaker.State != "closed" || u.Breaker.Opens != 0 || u.Limits != nil || u.CooldownUntil != nil || u.SuccessRate != nil || u.P50Ms != nil {
		t.Errorf("idle upstream = %+v; want a closed breaker, no limits and nulls", u)
	}
	if st.Policy.Trigger != "start" || st.Policy.Hash != "0123456789abcdef" {
		t.Errorf("policy = %+v", st.Policy)
	}
	if strings.Contains(body, "sk-never-shown") {
		t.Errorf("/status shows a key:\n%s", body)
	}
}

// TestObserveCountsFailoversAcrossSkippedUpstreams: a fall-over is counted
// to the upstream that was tried next, not one skipped in between; overhead
// is clamped at zero.
func TestObserveCountsFailoversAcrossSkippedUpstreams(t *testing.T) {
	store := policy.NewStore(&policy.Compiled{Hash: "00000000", Fingerprint: "f"})
	m := NewMetrics(store, health.New())
	m.Observe(&chain.Record{
		Route: "r", AnsweredBy: "c", Status: 200, TTFB: time.Millisecond,
		Attempts: []chain.AttemptRecord{
			{Upstream: "a", Outcome: chain.OutcomeFallback, Class: "overloaded", Duration: 2 * time.Millisecond, Headers: time.Millisecond},
			{Upstream: "b", Outcome: chain.OutcomeSkipped},
			{Upstream: "c", Outcome: chain.OutcomeOK, Duration: 3 * time.Millisecond, Headers: time.Millisecond},
		},
	})
	m.Observe(&chain.Record{Route: "", AnsweredBy: "passthrough", Status: 200})
	_, _, text := do(t, m.Handler(), httptest.NewRequest("GET", "/metrics", nil))
	for _, line := range []string{
		`detour_failovers_total{from="a",route="r",to="c"} 1`,
		`detour_attempts_total{class="skipped",upstream="b"} 1`,
		`detour_attempts_total{class="overloaded",upstream="a"} 1`,
		`detour_attempts_total{class="ok",upstream="c"} 1`,
		`detour_requests_total{outcome="answered",route="r",tier=""} 1`,
		`detour_requests_total{outcome="passthrough",route="",tier=""} 1`,
		`detour_upstream_latency_seconds_count{phase="commit",upstream="c"} 1`,
		`detour_upstream_latency_seconds_count{phase="headers",upstream="a"} 1`,
		// TTFB 1ms minus 5ms of attempts: clamped to 0, in the first bucket.
		`detour_overhead_seconds_bucket{le="0.0005"} 1`,
		`detour_cache_total{result="hit"} 0`,
	} {
		if !strings.Contains(text, line+"\n") {
			t.Errorf("metrics lack %s", line)
		}
	}
	if n := strings.Count(text, "detour_failovers_total{"); n != 1 {
		t.Errorf("%d failover series; want 1 (none to the skipped b)\n%s", n, text)
	}
}
