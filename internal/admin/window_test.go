package admin

import (
	"encoding/json"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/detour-proxy/detour/internal/health"
	"github.com/detour-proxy/detour/policy"
)

// TestStatusShowsEachUpstreamsSelectionWindow: /status carries, per
// upstream, the window a scored selection judges it by.
func TestStatusShowsEachUpstreamsSelectionWindow(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	c := &policy.Compiled{Version: "v1", Hash: "0123456789abcdef",
		Upstreams: map[string]*policy.Upstream{"a": {Name: "a"}, "idle": {Name: "idle"}},
		Breaker:   policy.BreakerPolicy{Enabled: true}}
	store := policy.NewStore(c)
	var w health.Windows
	for _, lat := range []time.Duration{100, 200, 300} {
		w.Begin("a")
		w.Record("a", health.Success, lat*time.Millisecond, now)
	}
	w.Begin("a")
	w.Record("a", health.Failure, 0, now)
	w.Begin("a") // in flight
	h := NewHandler(Options{Store: store, Health: health.New(), Windows: &w, Now: func() time.Time { return now }})
	_, _, body := do(t, h, local(httptest.NewRequest("GET", "http://127.0.0.1:8788/status", nil)))
	var st StatusJSON
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatal(err)
	}
	aw := st.Upstreams["a"].Window
	if aw == nil || aw.Samples != 4 || aw.Successes != 3 || aw.InFlight != 1 || aw.FailureRate != 0.25 ||
		aw.SuccessRate == nil || *aw.SuccessRate != 0.75 || aw.P95Ms == nil || *aw.P95Ms != 300 {
		t.Errorf("a's window = %+v; want 4 samples, 3 successes, 1 in flight, failure rate 0.25, success rate 0.75, p95 300 ms\n%s", aw, body)
	}
	if iw := st.Upstreams["idle"].Window; iw == nil || iw.Samples != 0 || iw.SuccessRate != nil || iw.P95Ms != nil {
		t.Errorf("idle window = %+v; want 0 samples and nulls", iw)
	}
}
