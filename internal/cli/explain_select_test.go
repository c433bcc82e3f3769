package cli

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/detour-proxy/detour/internal/admin"
)

// selectPolicy writes a policy whose route chat has chain a, b, c and the
// given select (a JSON object, or "" for none), and a sample request.
func selectPolicy(t *testing.T, sel, cExtra, content string) (pol, req string) {
	t.Helper()
	dir := t.TempDir()
	pol = filepath.Join(dir, "p.json")
	if sel != "" {
		sel = `, "select": ` + sel
	}
	os.WriteFile(pol, []byte(`{
  "upstreams": {
    "a": {"shape": "openai", "base_url": "https://api.openai.com/v1", "auth": {"from": "client"}},
    "b": {"shape": "openai", "base_url": "https://b.example.com/v1", "auth": {"none": true}},
    "c": {"shape": "openai", "base_url": "https://c.example.com/v1", "auth": {"none": true}`+cExtra+`}
  },
  "routes": [{"name": "chat", "match": {"host": "api.openai.com", "path": "/v1/chat/completions"}, "chain": ["a", "b", "c"]`+sel+`}]
}`), 0o644)
	req = filepath.Join(dir, "req.json")
	os.WriteFile(req, []byte(`{"model": "gpt-4o", "messages": [{"role": "user", "content": "`+content+`"}]}`), 0o644)
	return pol, req
}

// explainLines runs explain and returns its output.
func explainLines(t *testing.T, args ...string) string {
	t.Helper()
	out, stderr, err := runCmd(t, Policy, append([]string{"explain"}, args...)...)
	if err != nil {
		t.Fatalf("explain: %v\n%s", err, stderr)
	}
	return out
}

// hasLine reports whether some line of out has every one of parts, in order.
func hasLine(out string, parts ...string) bool {
	for _, l := range strings.Split(out, "\n") {
		rest, ok := l, true
		for _, p := range parts {
			i := strings.Index(rest, p)
			if i < 0 {
				ok = false
				break
			}
			rest = rest[i+len(p):]
		}
		if ok {
			return true
		}
	}
	return false
}

func TestPolicyExplainSelectionOrdered(t *testing.T) {
	t.Parallel()
	pol, req := selectPolicy(t, "", "", "hi")
	out := explainLines(t, pol, "--request", req, "--admin", "off")
	if !hasLine(out, "selection:", "ordered, the chain as written") || !hasLine(out, "chosen:", "a (then the others in chain order)") {
		t.Errorf("explain lacks the ordered selection:\n%s", out)
	}
}

func TestPolicyExplainSelectionWeighted(t *testing.T) {
	t.Parallel()
	pol, req := selectPolicy(t, `{"strategy": "weighted", "weights": {"a": 95, "b": 5}}`, "", "hi")
	out := explainLines(t, pol, "--request", req, "--admin", "off")
	for _, want := range [][]string{
		{"selection:", "weighted, drawn at random per request"},
		{"a", "weight 95 (95.0 % of first places)"},
		{"b", "weight 5 (5.0 % of first places)"},
		{"c", "weight 0 (0.0 % of first places)"},
		{"chosen:", "drawn per request"},
	} {
		if !hasLine(out, want...) {
			t.Errorf("explain lacks a line with %q:\n%s", want, out)
		}
	}
}

// TestPolicyExplainSelectionScoredFromLiveWindows: with a running detour
// (here its /status, faked) that runs this file, explain scores each
// upstream from its window and names the one the runner would choose.
func TestPolicyExplainSelectionScoredFromLiveWindows(t *testing.T) {
	t.Parallel()
	pol, req := selectPolicy(t, `{"strategy": "scored", "score": {"latency": 1, "errors": 10}, "min_samples": 20}`, "", "hi")
	c, err := compileFile(pol)
	if err != nil {
		t.Fatal(err)
	}
	ms := func(v float64) *float64 { return &v }
	var st admin.StatusJSON
	st.Policy.Hash, st.Policy.Version = c.Hash, c.Version
	st.Upstreams = map[string]admin.UpstreamJSON{
		"a": {Window: &admin.WindowJSON{Samples: 30, Successes: 30, P95Ms: ms(900)}},
		"b": {Window: &admin.WindowJSON{Samples: 30, Successes: 27, P95Ms: ms(300), FailureRate: 0.1}},
		"c": {Window: &admin.WindowJSON{Samples: 3, Successes: 3, P95Ms: ms(100), InFlight: 17}},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/status" {
			http.NotFound(w, r)
			return
		}
		json.NewEncoder(w).Encode(st)
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")

	out := explainLines(t, pol, "--request", req, "--admin", addr)
	for _, want := range [][]string{
		{"selection:", "scored, lowest score first: 1·p95 s + 0·price + 10·failure rate, judged after min_samples 20"},
		{"a", "score 0.9 (30 samples, p95 900ms, failure rate 0.00)"},
		{"b", "score 1.3 (30 samples, p95 300ms, failure rate 0.10)"},
		{"c", "on trial: 3 samples, p95 100ms, failure rate 0.00, fewer than min_samples 20"},
		{"chosen:", "a (then the others in chain order)"},
	} {
		if !hasLine(out, want...) {
			t.Errorf("explain lacks a line with %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "live stats not available") {
		t.Errorf("explain says live stats are not available though /status had them:\n%s", out)
	}

	// A trial with room goes first, ahead of every judged upstream.
	st.Upstreams["c"] = admin.UpstreamJSON{Window: &admin.WindowJSON{Samples: 3, Successes: 3, P95Ms: ms(100)}}
	out = explainLines(t, pol, "--request", req, "--admin", addr)
	if !hasLine(out, "chosen:", "c (then") {
		t.Errorf("explain does not put the trial with room first:\n%s", out)
	}
}

func TestPolicyExplainSelectionScoredWithoutLiveStats(t *testing.T) {
	t.Parallel()
	pol, req := selectPolicy(t, `{"strategy": "scored"}`, "", "hi")
	out := explainLines(t, pol, "--request", req, "--admin", "off")
	if !hasLine(out, "live stats not available (no running detour answered): the static order is shown") || !hasLine(out, "chosen:", "a (then") {
		t.Errorf("explain does not say it lacks live stats, or not the static order:\n%s", out)
	}
}

func TestPolicyExplainSelectionShowsPreFilterSkips(t *testing.T) {
	t.Parallel()
	pol, req := selectPolicy(t, "", `, "context_window": 10`, strings.Repeat("long text ", 20))
	out := explainLines(t, pol, "--request", req, "--admin", "off")
	if !hasLine(out, "c", "skipped: estimated 50 input tokens + 0 max_tokens exceed its context_window 10") {
		t.Errorf("explain lacks c's pre-filter skip:\n%s", out)
	}
	if !hasLine(out, "chosen:", "a (then") {
		t.Errorf("explain lacks the choice:\n%s", out)
	}
}

// TestPolicyExplainShowsARecoveringUpstream: a running detour's breaker
// that closed less than breaker.recovery ago is shown with the share it
// admits now.
func TestPolicyExplainShowsARecoveringUpstream(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pol := filepath.Join(dir, "p.json")
	os.WriteFile(pol, []byte(`{
  "upstreams": {
    "a": {"shape": "openai", "base_url": "https://api.openai.com/v1", "auth": {"from": "client"}},
    "b": {"shape": "openai", "base_url": "https://b.example.com/v1", "auth": {"none": true}}
  },
  "routes": [{"name": "chat", "match": {"host": "api.openai.com", "path": "/v1/chat/completions"}, "chain": ["a", "b"]}],
  "breaker": {"recovery": "1h"}
}`), 0o644)
	req := filepath.Join(dir, "req.json")
	os.WriteFile(req, []byte(`{"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}`), 0o644)
	c, err := compileFile(pol)
	if err != nil {
		t.Fatal(err)
	}
	var st admin.StatusJSON
	st.Policy.Hash = c.Hash
	// Closed a minute ago: in the first third of an hour's ramp. b, the
	// last upstream, is never ramped away, so it shows no ramp.
	closed := time.Now().Add(-time.Minute).UTC()
	st.Upstreams = map[string]admin.UpstreamJSON{
		"a": {Breaker: &admin.BreakerJSON{State: "closed", Since: closed}},
		"b": {Breaker: &admin.BreakerJSON{State: "closed", Since: closed}},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { json.NewEncoder(w).Encode(st) }))
	defer srv.Close()
	out := explainLines(t, pol, "--request", req, "--admin", strings.TrimPrefix(srv.URL, "http://"))
	until := closed.Add(20 * time.Minute).Format(time.RFC3339)
	if !hasLine(out, "1. a", "recovering now: admitted for 10 % of requests until "+until+" (breaker.recovery 1h0m0s)") {
		t.Errorf("explain does not show a recovering:\n%s", out)
	}
	if strings.Contains(out, "2. b  recovering") || strings.Count(out, "recovering now") != 1 {
		t.Errorf("explain shows the last upstream recovering:\n%s", out)
	}
	if !hasLine(out, "once closed, its upstream ramps over 1h0m0s: 10 %, 50 %, then 100 % of requests") {
		t.Errorf("explain lacks breaker.recovery in the breaker settings:\n%s", out)
	}
}
