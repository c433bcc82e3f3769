package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPolicyCheckWarnsAboutPlainHTTP: an upstream reached over plain http
// on a host that is not loopback (allow_plain_http) passes the check with a
// warning naming it; a loopback one gets none.
func TestPolicyCheckWarnsAboutPlainHTTP(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "policy.json")
	os.WriteFile(file, []byte(`{"upstreams": {
    "o":     {"shape": "openai", "base_url": "https://api.openai.com/v1", "auth": {"from": "client"}},
    "local": {"shape": "openai", "base_url": "http://127.0.0.1:11434/v1", "auth": {"none": true}},
    "vllm":  {"shape": "openai", "base_url": "http://vllm.models.svc:8000/v1", "auth": {"none": true}, "allow_plain_http": true}},
  "routes": [{"name": "r", "match": {"host": "api.openai.com"}, "chain": ["o", "local", "vllm"]}]}`), 0o644)
	out, _, err := runCmd(t, Policy, "check", file)
	want := file + `: warning: upstream "vllm" is reached over plain http at vllm.models.svc:8000 (allow_plain_http)`
	if err != nil || !strings.Contains(out, want) || !strings.Contains(out, ": ok") {
		t.Errorf("%v; output lacks %q or ok:\n%s", err, want, out)
	}
	if n := strings.Count(out, "warning"); n != 1 {
		t.Errorf("%d warnings; want 1 (none for loopback):\n%s", n, out)
	}
}
