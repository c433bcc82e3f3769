package admin_test

import (
	"bytes"
	"net/http/httptest"
	"os/exec"
	"testing"

	"github.com/detour-proxy/detour/internal/admin"
)

// TestMetricsPassPromtoolCheck: what /metrics serves for a state with every
// family in it is valid text format that promtool's linter accepts (help on
// every family, counters ending in _total, units in names, no duplicate
// series).
func TestMetricsPassPromtoolCheck(t *testing.T) {
	t.Parallel()
	bin := promtool(t)
	m := admin.RepresentativeMetrics(t)
	w := httptest.NewRecorder()
	m.Handler().ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	cmd := exec.Command(bin, "check", "metrics")
	cmd.Stdin = bytes.NewReader(w.Body.Bytes())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s\n%s", err, out, w.Body.Bytes())
	}
}
