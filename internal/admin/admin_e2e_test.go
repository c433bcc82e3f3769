package admin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/detour-proxy/detour/internal/admin"
	"github.com/detour-proxy/detour/internal/detourtest"
	fv "github.com/detour-proxy/detour/internal/fakevendor"
	"github.com/detour-proxy/detour/internal/mitm"
	"github.com/detour-proxy/detour/internal/testsupport"
	"github.com/detour-proxy/detour/proxy"
	"github.com/detour-proxy/detour/rewrite"
)

const (
	appKey    = "sk-app-openai-ADMIN-SECRET"
	backupKey = "sk-backup-ADMIN-SECRET"
)

// setup starts two fake OpenAI vendors and returns a policy template whose
// route "r" chains them in the given order, with the backup's key in a file.
type setup struct {
	primary, backup *detourtest.Vendor
	keyFile         string
}

func newSetup(t *testing.T) *setup {
	t.Helper()
	s := &setup{
		primary: detourtest.NewVendor(t, rewrite.OpenAI, "primary"),
		backup:  detourtest.NewVendor(t, rewrite.OpenAI, "backup"),
		keyFile: filepath.Join(t.TempDir(), "backup.key"),
	}
	if err := os.WriteFile(s.keyFile, []byte(backupKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return s
}

func (s *setup) policy(version string, chain ...string) string {
	quoted := make([]string, len(chain))
	for i, c := range chain {
		quoted[i] = fmt.Sprintf("%q", c)
	}
	return fmt.Sprintf(`{
  "version": %q,
  "upstreams": {
    "primary": {"shape": "openai", "base_url": %q, "ca_file": %q, "auth": {"from": "client"}},
    "backup":  {"shape": "openai", "base_url": %q, "ca_file": %q, "auth": {"file": %q}}
  },
  "routes": [{"name": "r", "match": {"host": "api.openai.com", "path": "/v1/chat/completions"}, "chain": [%s]}]
}`, version, s.primary.BaseURL(), s.primary.CAFile, s.backup.BaseURL(), s.backup.CAFile, s.keyFile, strings.Join(quoted, ", "))
}

// chat sends one chat completion through detour as an unmodified app would
// and returns the upstream that answered.
func chat(t *testing.T, h *detourtest.Harness) string {
	t.Helper()
	req, _ := http.NewRequest("POST", "https://api.openai.com/v1/chat/completions",
		strings.NewReader(`{"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}`))
	req.Header.Set("Authorization", "Bearer "+appKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := h.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("chat: %d %s", resp.StatusCode, body)
	}
	return resp.Header.Get(detourHeaderAnsweredBy)
}

const detourHeaderAnsweredBy = "X-Detour-Answered-By"

func get(t *testing.T, h *detourtest.Harness, path string) (int, string) {
	t.Helper()
	resp, err := http.Get(h.AdminURL.String() + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func getJSON(t *testing.T, h *detourtest.Harness, path string, v any) string {
	t.Helper()
	code, body := get(t, h, path)
	if code != 200 {
		t.Fatalf("GET %s: %d %s", path, code, body)
	}
	if err := json.Unmarshal([]byte(body), v); err != nil {
		t.Fatalf("GET %s: %v\n%s", path, err, body)
	}
	return body
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testsupport.Eventually(t, 10*time.Second, what, cond)
}

// TestAdminAfterAFailover: a quota-exhausted primary falls over to the
// backup, and /metrics and /status say so, without ever showing a key.
func TestAdminAfterAFailover(t *testing.T) {
	t.Parallel()
	s := newSetup(t)
	h := detourtest.Start(t, s.policy("v1", "primary", "backup"))
	waitUntil(t, "readyz 200", func() bool { code, _ := get(t, h, "/readyz"); return code == 200 })

	s.primary.Script(fv.Fault{Kind: fv.Status, Status: 429, Class: fv.ClassInsufficientQuota})
	before := time.Now()
	if by := chat(t, h); by != "backup" {
		t.Fatalf("answered by %q; want backup", by)
	}
	h.WaitRecords(t, 1)

	_, metrics := get(t, h, "/metrics")
	for _, line := range []string{
		`detour_failovers_total{from="primary",route="r",to="backup"} 1`,
		`detour_attempts_total{class="quota_exhausted",upstream="primary"} 1`,
		`detour_attempts_total{class="ok",upstream="backup"} 1`,
		`detour_requests_total{outcome="answered",route="r",tier=""} 1`,
		`detour_cooldown_active{upstream="primary"} 1`,
		`detour_cooldown_active{upstream="backup"} 0`,
		`detour_breaker_state{upstream="primary"} 0`,
		`detour_cache_total{result="hit"} 0`,
		`detour_policy_reloads_total{result="ok"} 0`,
		`detour_upstream_latency_seconds_count{phase="headers",upstream="primary"} 1`,
		`detour_upstream_latency_seconds_count{phase="commit",upstream="backup"} 1`,
		`detour_overhead_seconds_count 1`,
	} {
		if !strings.Contains(metrics, line+"\n") {
			t.Errorf("/metrics lacks %s", line)
		}
	}
	for _, re := range []string{
		`(?m)^detour_tokens_total\{direction="input",upstream="backup"\} [1-9]`,
		`(?m)^detour_tokens_total\{direction="output",upstream="backup"\} [1-9]`,
		`(?m)^go_goroutines `,
		`(?m)^process_resident_memory_bytes `,
	} {
		if !regexp.MustCompile(re).MatchString(metrics) {
			t.Errorf("/metrics does not match %s", re)
		}
	}

	var st admin.StatusJSON
	status := getJSON(t, h, "/status", &st)
	p, b := st.Upstreams["primary"], st.Upstreams["backup"]
	// quota_exhausted cools down for the default 10 minutes.
	if p.CooldownUntil == nil || p.CooldownUntil.Before(before.Add(9*time.Minute)) || p.CooldownUntil.After(time.Now().Add(11*time.Minute)) {
		t.Errorf("primary cooldown_until = %v; want about 10 minutes from now", p.CooldownUntil)
	}
	if p.CooldownReason == "" || p.Breaker == nil || p.Breaker.State != "closed" || p.Requests != 1 || p.SuccessRate == nil || *p.SuccessRate != 0 {
		t.Errorf("primary = %+v; want a reason, breaker closed (quota does not count), 1 request, success rate 0", p)
	}
	if b.CooldownUntil != nil || b.Requests != 1 || b.InFlight != 0 || b.SuccessRate == nil || *b.SuccessRate != 1 || b.P50Ms == nil || b.P95Ms == nil {
		t.Errorf("backup = %+v; want no cooldown, 1 request, success rate 1, latencies", b)
	}
	if st.Policy.Version != "v1" || st.Policy.Trigger != "start" || st.Policy.Source != h.PolicyPath || len(st.Policy.Hash) != 64 {
		t.Errorf("policy = %+v", st.Policy)
	}

	_, history := get(t, h, "/policy/history")
	policyFile, _ := os.ReadFile(h.PolicyPath)
	for name, body := range map[string]string{"/status": status, "/metrics": metrics, "/policy/history": history} {
		for _, secret := range []string{backupKey, appKey, string(policyFile)} {
			if strings.Contains(body, secret) {
				t.Errorf("%s shows a secret (%.20q…)", name, secret)
			}
		}
		if strings.Contains(body, s.backup.Server.URL) {
			t.Errorf("%s shows an upstream base_url", name)
		}
	}
}

// TestAdminPolicyHistoryAndRollback: start, a watched reload and a refused
// broken reload appear in /policy/history; rolling back to the first hash
// changes which upstream answers, and is recorded too.
func TestAdminPolicyHistoryAndRollback(t *testing.T) {
	t.Parallel()
	s := newSetup(t)
	h := detourtest.Start(t, s.policy("v1", "primary", "backup"))
	if by := chat(t, h); by != "primary" {
		t.Fatalf("v1 answered by %q; want primary", by)
	}
	var hist admin.HistoryJSON
	getJSON(t, h, "/policy/history", &hist)
	if len(hist.Entries) != 1 || hist.Entries[0].Trigger != "start" || !hist.Entries[0].Active {
		t.Fatalf("history at start = %+v", hist.Entries)
	}
	v1Hash := hist.Entries[0].Hash

	h.WritePolicy(t, s.policy("v2", "backup", "primary"))
	waitUntil(t, "the watcher's reload of v2", func() bool {
		getJSON(t, h, "/policy/history", &hist)
		return len(hist.Entries) == 2
	})
	if by := chat(t, h); by != "backup" {
		t.Fatalf("v2 answered by %q; want backup", by)
	}
	h.WritePolicy(t, `{"upstreams": `)
	waitUntil(t, "the refused reload", func() bool {
		getJSON(t, h, "/policy/history", &hist)
		return len(hist.Entries) == 3
	})
	got := []string{}
	for _, e := range hist.Entries {
		got = append(got, fmt.Sprintf("%s %s %s active=%v", e.Trigger, e.Result, e.Version, e.Active))
	}
	want := []string{"watch refused  active=false", "watch ok v2 active=true", "start ok v1 active=false"}
	if strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Fatalf("history =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if hist.Entries[0].Error == "" || hist.Entries[0].LoadedAt.IsZero() {
		t.Errorf("refused entry = %+v; want its error and time", hist.Entries[0])
	}

	// The wrong method and a bad body, over real HTTP.
	resp, err := http.Get(h.AdminURL.String() + "/policy/rollback")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 405 {
		t.Errorf("GET /policy/rollback = %d; want 405", resp.StatusCode)
	}
	rollback := func(body string) (int, string) {
		resp, err := http.Post(h.AdminURL.String()+"/policy/rollback", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := rollback(`not json`); code != 400 {
		t.Errorf("rollback with bad JSON = %d %s; want 400", code, body)
	}
	if code, body := rollback(`{"hash": "00000000"}`); code != 404 {
		t.Errorf("rollback to an unknown hash = %d %s; want 404", code, body)
	}

	code, body := rollback(fmt.Sprintf(`{"hash": %q}`, v1Hash[:8]))
	var entry admin.EntryJSON
	if code != 200 || json.Unmarshal([]byte(body), &entry) != nil || entry.Hash != v1Hash || !entry.Active {
		t.Fatalf("rollback to v1 = %d %s", code, body)
	}
	if by := chat(t, h); by != "primary" {
		t.Errorf("after the rollback answered by %q; want primary (v1)", by)
	}
	getJSON(t, h, "/policy/history", &hist)
	if e := hist.Entries[0]; e.Trigger != "rollback" || e.Result != "ok" || e.Hash != v1Hash || e.Version != "v1" || !e.Active {
		t.Errorf("newest history entry = %+v; want the rollback to v1, active", e)
	}
	var st admin.StatusJSON
	getJSON(t, h, "/status", &st)
	if st.Policy.Hash != v1Hash || st.Policy.Trigger != "rollback" {
		t.Errorf("status policy = %+v; want v1 by rollback", st.Policy)
	}
	_, metrics := get(t, h, "/metrics")
	for _, line := range []string{`detour_policy_reloads_total{result="ok"} 2`, `detour_policy_reloads_total{result="refused"} 1`} {
		if !strings.Contains(metrics, line+"\n") {
			t.Errorf("/metrics lacks %s", line)
		}
	}

	// The file changes again: the next good reload replaces the rollback.
	h.WritePolicy(t, s.policy("v3", "backup", "primary"))
	waitUntil(t, "the reload of v3", func() bool {
		getJSON(t, h, "/status", &st)
		return st.Policy.Version == "v3"
	})
}

// TestShutdownIsNotReadyWhileDraining: after the stop signal /readyz says
// 503 while an in-flight request finishes, so that a readinessProbe takes
// the pod out of rotation before it goes away.
func TestShutdownIsNotReadyWhileDraining(t *testing.T) {
	t.Parallel()
	s := newSetup(t)
	// The primary holds the request in flight across the stop until the
	// test has seen readyz turn 503, rather than for a delay long enough
	// for the test to look (a wait the test paid in full).
	hold := make(chan struct{})
	release := sync.OnceFunc(func() { close(hold) })
	t.Cleanup(release)
	s.primary = detourtest.NewVendorAround(t, rewrite.OpenAI, fv.Options{Name: "primary"}, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-hold:
			case <-r.Context().Done():
				return
			}
			next.ServeHTTP(w, r)
		})
	})
	dir := t.TempDir()
	policyPath := filepath.Join(dir, "policy.json")
	pol := strings.Replace(s.policy("v1", "primary", "backup"), `"routes"`,
		fmt.Sprintf(`"ca": {"cert_file": %q, "key_file": %q}, "routes"`, filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca-key.pem")), 1)
	if err := os.WriteFile(policyPath, []byte(pol), 0o644); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	adminLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	adminURL := "http://" + adminLn.Addr().String()
	ready := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	served := make(chan error, 1)
	logs := &detourtest.SyncBuffer{}
	go func() {
		served <- proxy.Serve(ctx, proxy.Options{
			PolicyPath: policyPath, Stderr: logs, Listener: ln, AdminListener: adminLn,
			Ready: func(net.Addr, *mitm.CA) { close(ready) },
		})
	}()
	<-ready
	readyz := func() (int, string) {
		resp, err := http.Get(adminURL + "/readyz")
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	waitUntil(t, "ready", func() bool { code, _ := readyz(); return code == 200 })

	// The held answer keeps one request in flight across the stop.
	answered := make(chan int, 1)
	go func() {
		req, _ := http.NewRequest("POST", "http://"+ln.Addr().String()+"/openai/v1/chat/completions",
			strings.NewReader(`{"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}`))
		req.Header.Set("Authorization", "Bearer "+appKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			answered <- 0
			return
		}
		resp.Body.Close()
		answered <- resp.StatusCode
	}()
	waitUntil(t, "the request in flight", func() bool {
		resp, err := http.Get(adminURL + "/status")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var st admin.StatusJSON
		return json.NewDecoder(resp.Body).Decode(&st) == nil && st.Upstreams["primary"].InFlight == 1
	})

	cancel()
	waitUntil(t, "readyz 503 while draining", func() bool {
		code, body := readyz()
		return code == 503 && strings.Contains(body, "shutting down")
	})
	if code, _ := readyz(); code != 503 {
		t.Errorf("readyz during drain = %d; want 503", code)
	}
	release()
	if code := <-answered; code != 200 {
		t.Errorf("in-flight request got %d; want 200 after the drain", code)
	}
	if err := <-served; err != nil {
		t.Errorf("Serve = %v", err)
	}
	if _, err := http.Get(adminURL + "/healthz"); err == nil {
		t.Error("admin listener still open after Serve returned")
	}
}

// TestStatusAndMetricsShowResilience: a dead primary opens its breaker; the
// backup's limits, the cache and the route's tiers are all visible.
func TestStatusAndMetricsShowResilience(t *testing.T) {
	t.Parallel()
	s := newSetup(t)
	pol := fmt.Sprintf(`{
  "upstreams": {
    "primary": {"shape": "openai", "base_url": %q, "ca_file": %q, "auth": {"from": "client"}},
    "backup":  {"shape": "openai", "base_url": %q, "ca_file": %q, "auth": {"file": %q}, "limits": {"rpm": 600, "concurrency": 4}}
  },
  "routes": [{"name": "r", "match": {"host": "api.openai.com", "path": "/v1/chat/completions"}, "tiers": {"hard": ["primary", "backup"], "easy": ["backup"]}}],
  "breaker": {"consecutive_failures": 2, "open_for": "1h"},
  "errors": {"classes": {"overloaded": {"retries": 0}, "server_error": {"retries": 1}}},
  "hedge_after": "3s",
  "cache": {"entries": 50, "allow_temperature": true}
}`, s.primary.BaseURL(), s.primary.CAFile, s.backup.BaseURL(), s.backup.CAFile, s.keyFile)
	h := detourtest.Start(t, pol)
	s.primary.SetDefault(fv.Fault{Kind: fv.Status, Status: 503})
	for range 4 {
		if by := chat(t, h); by != "backup" {
			t.Fatalf("answered by %q", by)
		}
	}
	if s.primary.Calls() != 2 {
		t.Errorf("primary called %d times; want 2 before its breaker opened", s.primary.Calls())
	}
	var st admin.StatusJSON
	body := getJSON(t, h, "/status", &st)
	p, b := st.Upstreams["primary"], st.Upstreams["backup"]
	if p.Breaker == nil || p.Breaker.State != "open" || p.Breaker.Opens != 1 || p.Breaker.Until == nil || !strings.Contains(p.Breaker.Reason, "2 consecutive") {
		t.Errorf("primary breaker = %+v; want open once, with an end and a reason", p.Breaker)
	}
	if b.Limits == nil || b.Limits.RPM != 600 || b.Limits.Concurrency != 4 || b.Limits.Burst != 10 || b.Limits.InFlight != 0 {
		t.Errorf("backup limits = %+v", b.Limits)
	}
	if st.Cache == nil || st.Cache.Entries != 1 || st.Cache.MaxEntries != 50 {
		t.Errorf("cache = %+v; want 1 of 50 entries (the four identical requests share one)", st.Cache)
	}
	if r := st.Resilience; r.HedgeAfter != "3s" || r.Retries["server_error"] != 1 || r.Retries["rate_limited"] != 1 || r.Breaker.ConsecutiveFailures != 2 ||
		r.Cooldowns["quota_exhausted"].Cooldown != "10m0s" || r.Classifier.Undecided != "hard" || r.Classifier.LongInputChars != 2000 {
		t.Errorf("resilience = %+v", r)
	}
	if len(st.Routes) != 1 || len(st.Routes[0].Tiers["easy"]) != 1 {
		t.Errorf("routes = %+v", st.Routes)
	}
	if strings.Contains(body, "SECRET") || strings.Contains(body, "127.0.0.1") {
		t.Errorf("/status shows a key or a base URL:\n%s", body)
	}
	_, metrics := get(t, h, "/metrics")
	for _, re := range []string{
		`detour_breaker_state\{upstream="primary"\} 1`,
		`detour_breaker_state\{upstream="backup"\} 0`,
		`detour_cache_total\{result="stored"\} 4`,
		`detour_attempts_total\{class="skipped",upstream="primary"\} 2`,
		`detour_requests_total\{outcome="answered",route="r",tier="hard"\} 4`,
	} {
		if !regexp.MustCompile(re).MatchString(metrics) {
			t.Errorf("/metrics does not match %s", re)
		}
	}
}
