package cli

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/detour-proxy/detour/internal/detourtest"
	fv "github.com/detour-proxy/detour/internal/fakevendor"
	"github.com/detour-proxy/detour/rewrite"
)

// TestPolicyExplainShowsLiveStateOnlyForTheRunningPolicy: explain shows
// the running detour's cooldowns only when it runs FILE itself (same
// hash); for another file it says which policy is running and shows none
// of its state, since the same upstream name may mean another upstream.
// explain sends FILE's admin token: a wrong one is refused even on
// loopback, which shows it is sent.
func TestPolicyExplainShowsLiveStateOnlyForTheRunningPolicy(t *testing.T) {
	t.Parallel()
	primary := detourtest.NewVendor(t, rewrite.OpenAI, "primary")
	backup := detourtest.NewVendor(t, rewrite.OpenAI, "backup")
	dir := t.TempDir()
	token, otherToken := filepath.Join(dir, "token"), filepath.Join(dir, "other-token")
	os.WriteFile(token, []byte("running-token\n"), 0o600)
	os.WriteFile(otherToken, []byte("some-other-token\n"), 0o600)
	policyWith := func(version, tokenFile string) string {
		return fmt.Sprintf(`{
  "version": %q,
  "admin": {"token_file": %q},
  "ca": {"cert_file": %q, "key_file": %q},
  "upstreams": {
    "primary": {"shape": "openai", "base_url": %q, "ca_file": %q, "auth": {"from": "client"}},
    "backup":  {"shape": "openai", "base_url": %q, "ca_file": %q, "auth": {"from": "client"}}
  },
  "routes": [{"name": "r", "match": {"host": "api.openai.com", "path": "/v1/chat/completions"}, "chain": ["primary", "backup"]}]
}`, version, tokenFile, filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca-key.pem"),
			primary.BaseURL(), primary.CAFile, backup.BaseURL(), backup.CAFile)
	}
	h := detourtest.Start(t, policyWith("running-1", token))
	primary.Script(fv.Fault{Kind: fv.Status, Status: 429, Class: fv.ClassInsufficientQuota})
	req, _ := http.NewRequest(http.MethodPost, "https://api.openai.com/v1/chat/completions", strings.NewReader(`{"model":"gpt-4o","messages":[]}`))
	resp, err := h.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	reqFile := filepath.Join(dir, "req.json")
	os.WriteFile(reqFile, []byte(`{"model":"gpt-4o","messages":[]}`), 0o644)
	rc, err := compileFile(h.PolicyPath)
	if err != nil {
		t.Fatal(err)
	}
	running := rc.Hash

	// The very file detour runs: its cooldown is shown.
	out, _, err := runCmd(t, Policy, "explain", h.PolicyPath, "--request", reqFile, "--admin", h.AdminURL.Host)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"skipped now: cooling down until", "insufficient_quota",
		"the detour at " + h.AdminURL.Host + " runs this file (version running-1, hash " + running[:12] + ")", "(1 upstream(s) cooling down)"} {
		if !strings.Contains(out, want) {
			t.Errorf("explain of the running file lacks %q:\n%s", want, out)
		}
	}

	// Another file, with the same upstream names: no live state, and the
	// running policy named.
	other := filepath.Join(dir, "other.json")
	os.WriteFile(other, []byte(policyWith("edited-2", token)), 0o644)
	out, _, err = runCmd(t, Policy, "explain", other, "--request", reqFile, "--admin", h.AdminURL.Host)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, "cooling down until") || strings.Contains(out, "skipped now") {
		t.Errorf("explain of another file shows the running policy's cooldowns:\n%s", out)
	}
	want := "the detour at " + h.AdminURL.Host + " runs another policy: version running-1 (hash " + running[:12] +
		", from " + h.PolicyPath + ", start), not this file"
	if !strings.Contains(out, want) || !strings.Contains(out, "its cooldowns and breakers are not shown") {
		t.Errorf("explain of another file does not say which policy runs; want %q in:\n%s", want, out)
	}

	// A file naming another token file: its token is sent, and refused.
	os.WriteFile(other, []byte(policyWith("edited-3", otherToken)), 0o644)
	out, _, err = runCmd(t, Policy, "explain", other, "--request", reqFile, "--admin", h.AdminURL.Host)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "no running detour answered (GET http://"+h.AdminURL.Host+"/status: 401 Unauthorized: wrong admin token") {
		t.Errorf("explain with a wrong token:\n%s", out)
	}
	if strings.Contains(out, "some-other-token") || strings.Contains(h.Log(), "some-other-token") {
		t.Error("a token was printed or logged")
	}
}
