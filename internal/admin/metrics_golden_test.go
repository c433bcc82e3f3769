package admin

import (
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/detour-proxy/detour/internal/chain"
	"github.com/detour-proxy/detour/internal/health"
	"github.com/detour-proxy/detour/internal/testsupport"
	"github.com/detour-proxy/detour/policy"
	"github.com/detour-proxy/detour/rewrite"
)

// representativeMetrics drives every family detour exports into a state
// with samples: labelled counters (one label value needing escaping),
// histograms with and without labels, the scrape-time gauges of breakers
// (closed, open, half-open), cooldowns, reloads (one refused), last
// upstreams, budgets, the state backend, buffered bytes and trace export.
// It uses only the package's exported API, so the same drive produced the
// golden file on the registry detour used before its own.
func representativeMetrics(t *testing.T) *Metrics {
	t.Helper()
	withBudget, err := policy.Compile("policy.json", []byte(`{
  "upstreams": {"a": {"shape": "openai", "base_url": "https://api.openai.com/v1", "auth": {"from": "client"},
    "prices": {"*": {"input": 2.5, "output": 10}}}},
  "routes": [{"name": "r", "match": {"host": "api.openai.com"}, "chain": ["a"]}],
  "budgets": [{"name": "a-spend", "upstream": "a", "daily": 10, "monthly": 40}]
}`), policy.Options{BaseDir: t.TempDir(), DefaultCADir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	a, b, c := &policy.Upstream{Name: "a"}, &policy.Upstream{Name: "b"}, &policy.Upstream{Name: "c"}
	store := policy.NewStore(&policy.Compiled{Hash: "00000000", Fingerprint: "f",
		Upstreams: map[string]*policy.Upstream{"a": a, "b": b, "c": c},
		Routes: []*policy.Route{
			{Name: "chat", Chain: []*policy.Upstream{a, b}},
			{Name: "tiered", Chain: []*policy.Upstream{a, c}, Tiers: map[string][]*policy.Upstream{"hard": {c, b}}},
		},
		Breaker: policy.BreakerPolicy{Enabled: true},
		Budgets: withBudget.Budgets,
	})
	// One refused reload: the file does not exist.
	store.ReloadAs(policy.TriggerSIGHUP, filepath.Join(t.TempDir(), "missing.json"), func(string, []byte) (*policy.Compiled, error) {
		t.Fatal("compiled a file that does not exist")
		return nil, nil
	})

	hr := health.New()
	now := time.Now()
	hr.StartCooldownClass("a", now.Add(time.Hour), string(policy.ClassQuotaExhausted), "429 insufficient_quota")
	hr.ApplyBreakerOpen("b", now.Add(-time.Minute), now.Add(time.Hour), "overloaded", now)
	// Open until an hour ago: half-open now.
	hr.ApplyBreakerOpen("c", now.Add(-3*time.Hour), now.Add(-time.Hour), "overloaded", now.Add(-2*time.Hour))
	var buf [2]policy.Period
	for _, p := range withBudget.Budgets[0].Periods(now, &buf) {
		hr.AddSpend(p.Key, 2.5, p.End)
	}

	m := NewMetrics(store, hr)
	m.BufferedBytes(func() int64 { return 1 << 20 })
	m.Tracing(func() uint64 { return 3 }, func() uint64 { return 1 })
	m.ObserveProbe("a", "ok")
	m.ObserveProbe("a", "overloaded")
	ms := time.Millisecond
	m.Observe(&chain.Record{
		Route: "chat", AnsweredBy: "b", Status: 200, TTFB: 450 * ms, Cache: chain.CacheStored,
		Usage: rewrite.Usage{Input: 1234567, Output: 89}, CostUSD: 0.000123,
		Attempts: []chain.AttemptRecord{
			{Upstream: "a", Outcome: chain.OutcomeFallback, Class: "overloaded", Duration: 120 * ms, Headers: 100 * ms},
			{Upstream: "b", Outcome: chain.OutcomeOK, Duration: 300 * ms, Headers: 250 * ms},
		},
	})
	m.Observe(&chain.Record{
		Route: "tiered", Tier: "hard", AnsweredBy: "c", Status: 200, TTFB: 2 * time.Second, Cache: chain.CacheMiss,
		Usage: rewrite.Usage{Input: 10, Output: 20}, CostUSD: 1.5,
		Attempts: []chain.AttemptRecord{{Upstream: "c", Outcome: chain.OutcomeOK, Duration: 1990 * ms, Headers: 40 * ms}},
	})
	// A label value with each character the text format escapes.
	m.Observe(&chain.Record{Route: "we\"ird\\route\nname", Status: 502,
		Attempts: []chain.AttemptRecord{{Upstream: "a", Outcome: chain.OutcomeExhausted, Class: "server_error", Duration: 130 * time.Second, Headers: 130 * time.Second}},
	})
	m.Observe(&chain.Record{Route: "", AnsweredBy: "passthrough", Status: 200})
	return m
}

// runtimeValue matches a sample of the Go and process families, whose
// values change from run to run: the golden file keeps their names, types,
// help and labels, and stands a placeholder in for the value.
var (
	runtimeValue = regexp.MustCompile(`^((?:go|process)_[^ ]*) .*$`)
	goVersion    = regexp.MustCompile(`version="go[^"]*"`)
)

// normalizeExposition replaces what differs between runs in a scrape of
// representativeMetrics: the runtime families' values, the Go version,
// and the two budget periods' spend (the same value either way, but the
// daily and monthly samples are exact).
func normalizeExposition(text string) string {
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		l = runtimeValue.ReplaceAllString(l, "$1 VALUE")
		lines[i] = goVersion.ReplaceAllString(l, `version="GOVERSION"`)
	}
	return strings.Join(lines, "\n")
}

// TestMetricsExpositionMatchesGolden: /metrics writes every family with the
// names, types, help, label names, bucket bounds, escaping and number
// formatting of testdata/metrics.golden, which is what the Prometheus
// client library wrote for the same state.
func TestMetricsExpositionMatchesGolden(t *testing.T) {
	t.Parallel()
	m := representativeMetrics(t)
	code, hdr, text := do(t, m.Handler(), httptest.NewRequest("GET", "/metrics", nil))
	if code != 200 {
		t.Fatalf("status %d", code)
	}
	t.Logf("Content-Type: %s", hdr.Get("Content-Type"))
	testsupport.Golden(t, "testdata/metrics.golden", []byte(normalizeExposition(text)))
}
