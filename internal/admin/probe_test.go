package admin

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/detour-proxy/detour/internal/health"
	"github.com/detour-proxy/detour/internal/probe"
	"github.com/detour-proxy/detour/policy"
)

// /status shows a probed upstream's probe, null for the others; /metrics
// counts probes by upstream and result.
func TestStatusAndMetricsShowProbes(t *testing.T) {
	t.Parallel()
	c := &policy.Compiled{Version: "v1", Hash: "0123456789abcdef", Fingerprint: "fp1",
		Upstreams: map[string]*policy.Upstream{"primary": {Name: "primary"}, "backup": {Name: "backup"}},
		Breaker:   policy.BreakerPolicy{Enabled: true}}
	store := policy.NewStore(c)
	hr := health.New()
	m := NewMetrics(store, hr)
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	h := NewHandler(Options{Store: store, Health: hr, Metrics: m, Probes: func() map[string]probe.Status {
		return map[string]probe.Status{"primary": {
			Request: policy.ProbeModels, Interval: 30 * time.Second, Failed: 2, ConsecutiveFailures: 2,
			Last: probe.Result{Upstream: "primary", At: at, Latency: 12 * time.Millisecond, Status: 503,
				Class: policy.ClassOverloaded, Reason: "503 overloaded"},
		}}
	}})
	_, _, body := do(t, h, local(httptest.NewRequest("GET", "http://127.0.0.1:8788/status", nil)))
	var st StatusJSON
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatal(err)
	}
	p := st.Upstreams["primary"].Probe
	if p == nil || p.Request != "models" || p.Interval != "30s" || p.LastResult != "overloaded" || p.LastStatus != 503 ||
		p.LastAt == nil || !p.LastAt.Equal(at) || p.LastMs == nil || *p.LastMs != 12 || p.Failed != 2 || p.ConsecutiveFailures != 2 {
		t.Errorf("primary's probe = %+v; want the manager's status", p)
	}
	if st.Upstreams["backup"].Probe != nil || !strings.Contains(strings.ReplaceAll(body, " ", ""), `"probe":null`) {
		t.Errorf("an upstream without a probe shows %+v; want null", st.Upstreams["backup"].Probe)
	}

	m.ObserveProbe("primary", "overloaded")
	m.ObserveProbe("primary", probe.ResultOK)
	m.ObserveProbe("primary", probe.ResultOK)
	_, _, text := do(t, m.Handler(), httptest.NewRequest("GET", "/metrics", nil))
	for _, line := range []string{
		`detour_probe_total{result="ok",upstream="primary"} 2`,
		`detour_probe_total{result="overloaded",upstream="primary"} 1`,
	} {
		if !strings.Contains(text, line+"\n") {
			t.Errorf("metrics lack %s", line)
		}
	}
}
