package proxy_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/detour-proxy/detour/internal/detourtest"
	"github.com/detour-proxy/detour/internal/fakevendor"
	"github.com/detour-proxy/detour/internal/testsupport"
	"github.com/detour-proxy/detour/rewrite"
)

// detour serve probes a probed upstream with the policy's key: a failing
// probe shows in /status and /metrics and opens the breaker.
func TestServeProbesUpstreams(t *testing.T) {
	t.Parallel()
	primary := detourtest.NewVendor(t, rewrite.OpenAI, "primary")
	primary.SetDefault(fakevendor.Fault{Kind: fakevendor.Status, Class: fakevendor.ClassOverloaded})
	backup := detourtest.NewVendor(t, rewrite.OpenAI, "backup")
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "key")
	if err := os.WriteFile(keyFile, []byte("sk-probe"), 0o600); err != nil {
		t.Fatal(err)
	}
	h := detourtest.Start(t, fmt.Sprintf(`{"upstreams": {
  "primary": {"shape": "openai", "base_url": %q, "ca_file": %q, "auth": {"file": %q}, "probe": {"interval": "1s", "timeout": "500ms"}},
  "backup": {"shape": "openai", "base_url": %q, "ca_file": %q, "auth": {"from": "client"}}},
  "routes": [{"name": "chat", "match": {"host": "api.openai.com", "path": "/v1/chat/completions"}, "chain": ["primary", "backup"]}]}`,
		primary.BaseURL(), primary.CAFile, keyFile, backup.BaseURL(), backup.CAFile))
	get := func(path string) string {
		resp, err := http.Get(h.AdminURL.String() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	var st struct {
		Upstreams map[string]struct {
			Breaker struct{ State string }
			Probe   *struct {
				LastResult string `json:"last_result"`
			}
		}
	}
	if !testsupport.Poll(10*time.Second, func() bool {
		_ = json.Unmarshal([]byte(get("/status")), &st)
		p := st.Upstreams["primary"].Probe
		return p != nil && p.LastResult == "overloaded" && st.Upstreams["primary"].Breaker.State == "open"
	}) {
		t.Fatalf("no failed probe in /status: %s", get("/status"))
	}
	if m := get("/metrics"); !strings.Contains(m, `detour_probe_total{result="overloaded",upstream="primary"}`) {
		t.Errorf("metrics lack the probe")
	}
	if got := primary.Requests()[0].Header.Get("Authorization"); got != "Bearer sk-probe" {
		t.Errorf("probe Authorization %q", got)
	}
}
