package cli

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/detour-proxy/detour/internal/detourtest"
	fv "github.com/detour-proxy/detour/internal/fakevendor"
	"github.com/detour-proxy/detour/rewrite"
)

func runCmd(t *testing.T, cmd Command, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var o, e bytes.Buffer
	err = cmd(context.Background(), args, &o, &e)
	return o.String(), e.String(), err
}

func TestCAInitPrintBundle(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cert, key := filepath.Join(dir, "ca", "ca.pem"), filepath.Join(dir, "ca", "ca-key.pem")
	ca := CA(nil)
	out, _, err := runCmd(t, ca, "init", "--cert", cert, "--key", key)
	if err != nil || !strings.Contains(out, "CA created") {
		t.Fatalf("init: %v %q", err, out)
	}
	if st, _ := os.Stat(key); st.Mode().Perm() != 0o600 {
		t.Errorf("key mode %v; want 0600", st.Mode().Perm())
	}
	if out, _, _ := runCmd(t, ca, "init", "--cert", cert, "--key", key); !strings.Contains(out, "CA exists") {
		t.Errorf("second init: %q", out)
	}
	printed, _, err := runCmd(t, ca, "print", "--cert", cert)
	want, _ := os.ReadFile(cert)
	if err != nil || printed != string(want) {
		t.Errorf("print = %q, %v; want the certificate file", printed, err)
	}
	bundleFile := filepath.Join(dir, "bundle.pem")
	if _, _, err := runCmd(t, ca, "bundle", "--cert", cert, "--out", bundleFile); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(bundleFile)
	n := bytes.Count(b, []byte("BEGIN CERTIFICATE"))
	if n < 2 || !bytes.Contains(b, bytes.TrimSpace(want)) {
		t.Errorf("bundle has %d certificates; want the system roots plus detour's", n)
	}
	if bytes.Contains(b, []byte("PRIVATE KEY")) {
		t.Error("the bundle contains a private key")
	}
	// Every certificate in the bundle parses.
	for rest := b; ; {
		var blk *pem.Block
		blk, rest = pem.Decode(rest)
		if blk == nil {
			break
		}
		if _, err := x509.ParseCertificate(blk.Bytes); err != nil {
			t.Fatalf("bundle holds a bad certificate: %v", err)
		}
	}
	_, _, err = runCmd(t, ca, "print", "--cert", filepath.Join(dir, "missing.pem"))
	if err == nil || !strings.Contains(err.Error(), "detour ca init") {
		t.Errorf("missing CA: %v; want a hint to run ca init", err)
	}
	if _, _, err := runCmd(t, ca, "frob"); !errors.Is(err, ErrUsage) {
		t.Errorf("unknown subcommand: %v", err)
	}
	if _, _, err := runCmd(t, ca); !errors.Is(err, ErrUsage) {
		t.Errorf("no subcommand: %v", err)
	}
}

func TestCAFromPolicyIgnoresUnrelatedProblems(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pol := filepath.Join(dir, "policy.json")
	// auth.env names a variable that is not set: serve would refuse, but
	// `ca init` needs only the CA paths.
	os.WriteFile(pol, []byte(`{"ca": {"cert_file": "c.pem", "key_file": "k.pem"},
 "upstreams": {"o": {"shape": "openai", "base_url": "https://api.openai.com/v1", "auth": {"env": "DETOUR_TEST_UNSET_VAR"}}},
 "routes": [{"name": "r", "match": {"host": "api.openai.com"}, "chain": ["o"]}]}`), 0o644)
	if _, _, err := runCmd(t, CA(nil), "init", "--policy", pol); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "k.pem")); err != nil {
		t.Errorf("CA key not created next to the policy: %v", err)
	}
}

func TestPolicyCheckListsEveryProblem(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{
  "upstreams": {"o": {"shape": "opanai", "base_url": "https://api.openai.com/v1", "auth": {"from": "client"}, "timout": "1s"}},
  "routes": [{"name": "r", "match": {"host": "api.openai.com"}, "chain": ["o", "p"]}]
}`), 0o644)
	_, stderr, err := runCmd(t, Policy, "check", bad)
	var exit ExitError
	if !errors.As(err, &exit) || exit.Code != 1 {
		t.Fatalf("err = %v; want exit status 1", err)
	}
	for _, want := range []string{
		bad + `:2:23: upstreams.o.shape: must be one of openai, anthropic, gemini, openai-responses, azure-openai, bedrock; got "opanai"`,
		bad + `:2:111: upstreams.o.timout: unknown field "timout"`,
		bad + `:3:80: routes[0].chain[1]: no upstream named "p"`,
		"3 problem(s)",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("output lacks %q:\n%s", want, stderr)
		}
	}
	good := filepath.Join(dir, "good.json")
	os.WriteFile(good, []byte(`{"upstreams": {"o": {"shape": "openai", "base_url": "https://api.openai.com/v1", "auth": {"from": "client"}}},
  "routes": [{"name": "r", "match": {"host": "api.openai.com"}, "chain": ["o"]}]}`), 0o644)
	if out, _, err := runCmd(t, Policy, "check", good); err != nil || !strings.Contains(out, "ok") || !strings.Contains(out, "intercepts api.openai.com") {
		t.Errorf("good policy: %v %q", err, out)
	}
	public := filepath.Join(dir, "public.json")
	os.WriteFile(public, []byte(`{"listen": "0.0.0.0:8787", "admin_listen": "0.0.0.0:8788", "egress": {"tunnel": "deny"},
  "upstreams": {"o": {"shape": "openai", "base_url": "https://api.openai.com/v1", "auth": {"from": "client"}}},
  "routes": [{"name": "r", "match": {"host": "api.openai.com"}, "chain": ["o"]}]}`), 0o644)
	out, _, err := runCmd(t, Policy, "check", public)
	for _, want := range []string{
		public + `: warning: listen "0.0.0.0:8787" is not a loopback address`,
		public + `: warning: admin_listen "0.0.0.0:8788" is not a loopback address`,
		`everything else is refused (egress.tunnel "deny")`,
	} {
		if err != nil || !strings.Contains(out, want) {
			t.Errorf("public listeners: %v; output lacks %q:\n%s", err, want, out)
		}
	}
	if out, _, _ := runCmd(t, Policy, "check", good); strings.Contains(out, "warning") || !strings.Contains(out, "detour's own listeners and egress.deny_cidrs 127.0.0.0/8, ::1/128") {
		t.Errorf("good policy output %q; want no warning and the default deny_cidrs", out)
	}
	os.WriteFile(public, []byte(`{"listen": "0.0.0.0:8787",
  "upstreams": {"o": {"shape": "openai", "base_url": "https://api.openai.com/v1", "auth": {"from": "client"}}},
  "routes": [{"name": "r", "match": {"host": "api.openai.com"}, "chain": ["o"]}]}`), 0o644)
	if _, stderr, err := runCmd(t, Policy, "check", public); !errors.As(err, &exit) || !strings.Contains(stderr, public+`:1:2: listen: "0.0.0.0:8787" is not a loopback address`) {
		t.Errorf("open listen: %v\n%s", err, stderr)
	}
	if _, _, err := runCmd(t, Policy, "check", filepath.Join(dir, "nope.json")); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("missing file: %v", err)
	}
	if _, _, err := runCmd(t, Policy, "check"); !errors.Is(err, ErrUsage) {
		t.Errorf("no file: %v", err)
	}
}

func TestPolicyExplain(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pol := filepath.Join(dir, "p.json")
	os.WriteFile(pol, []byte(`{
  "upstreams": {
    "openai": {"shape": "openai", "base_url": "https://api.openai.com/v1", "auth": {"from": "client"}},
    "gw":     {"shape": "openai", "base_url": "https://gw.example.com/v1", "auth": {"none": true}, "models": {"gpt-4o*": "gw-large"}},
    "local":  {"shape": "openai", "base_url": "http://127.0.0.1:11434/v1", "auth": {"none": true}, "models": {"o3*": "qwen"}}
  },
  "routes": [{"name": "chat", "match": {"host": "api.openai.com", "path": "/v1/chat/completions"}, "chain": ["openai", "gw", "local"]}]
}`), 0o644)
	req := filepath.Join(dir, "req.json")
	os.WriteFile(req, []byte(`{"model": "gpt-4o-mini", "stream": true, "messages": [{"role": "user", "content": "hi"}]}`), 0o644)
	out, _, err := runCmd(t, Policy, "explain", pol, "--request", req)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"route:", "chat (api.openai.com /v1/chat/completions)",
		`model "gpt-4o-mini", stream true`,
		"1. openai", "fast path: body forwarded as bytes", "the app's own key",
		"2. gw", "model gw-large", `only "model" rewritten`,
		`3. local`, `skipped: no models entry matches "gpt-4o-mini"`,
		"stops on:", "auth, content_filter, invalid_request",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("explain lacks %q:\n%s", want, out)
		}
	}
	out, _, _ = runCmd(t, Policy, "explain", pol, "--request", req, "--host", "example.com")
	if !strings.Contains(out, "no route") || !strings.Contains(out, "not even decrypt") {
		t.Errorf("unrouted host: %q", out)
	}
}

func TestPolicyExplainTiersStaticAndResilience(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pol := filepath.Join(dir, "p.json")
	os.WriteFile(pol, []byte(`{
  "upstreams": {
    "openai": {"shape": "openai", "base_url": "https://api.openai.com/v1", "auth": {"from": "client"}, "limits": {"rpm": 120, "concurrency": 8}},
    "local":  {"shape": "openai", "base_url": "http://127.0.0.1:11434/v1", "auth": {"none": true}, "models": {"*": "qwen"}},
    "sorry":  {"shape": "static", "text": "Busy."}
  },
  "routes": [{"name": "chat", "match": {"host": "api.openai.com", "path": "/v1/chat/completions"},
              "tiers": {"hard": ["openai", "sorry"], "easy": ["local", "openai", "sorry"]}}],
  "classifier": {"easy_patterns": ["summar"]},
  "hedge_after": "5s",
  "cache": {}
}`), 0o644)
	req := filepath.Join(dir, "req.json")
	os.WriteFile(req, []byte(`{"model": "gpt-4o", "messages": [{"role": "user", "content": "Summarize this."}]}`), 0o644)
	out, _, err := runCmd(t, Policy, "explain", pol, "--request", req, "--admin", "off")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`tier:`, `easy (easy_pattern:"Summar")`, "1. local", "2. openai", "limits: 120 rpm (burst 2) 8 in flight",
		`3. sorry`, `static: answers "Busy."`, "hedging:", "after 5s", "retries:", "rate_limited ×1",
		"breaker:", "opens after 5 failures", "cache:", "temperature > 0 never cached",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("explain lacks %q:\n%s", want, out)
		}
	}
	out, _, _ = runCmd(t, Policy, "explain", pol, "--request", req, "--admin", "off", "--tier", "hard")
	if !strings.Contains(out, "hard (header:x-detour-tier)") || strings.Contains(out, "local") {
		t.Errorf("--tier hard:\n%s", out)
	}
}

// startFakeVendor runs `detour fake-vendor args… --listen 127.0.0.1:0` until
// the test ends and returns the upstream it printed for a policy, decoded,
// and its output. The port is the one the vendor bound and reported: never
// a port picked beforehand, which another process can take meanwhile.
func startFakeVendor(t *testing.T, args ...string) (upstream map[string]any, out *detourtest.SyncBuffer, stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out = &detourtest.SyncBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- FakeVendor(ctx, append(args, "--listen", "127.0.0.1:0"), out, io.Discard)
	}()
	stop = sync.OnceValue(func() error {
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(10 * time.Second):
			return errors.New("fake-vendor did not stop within 10s")
		}
	})
	t.Cleanup(func() { _ = stop() })
	deadline := time.After(10 * time.Second)
	for {
		changed := out.Changed()
		for _, line := range strings.Split(out.String(), "\n") {
			if js, ok := strings.CutPrefix(line, "policy upstream: "); ok {
				if err := json.Unmarshal([]byte(js), &upstream); err != nil {
					t.Fatalf("the printed upstream is not JSON: %v\n%s", err, line)
				}
				return upstream, out, stop
			}
		}
		select {
		case err := <-done:
			t.Fatalf("fake-vendor returned %v before listening:\n%s", err, out.String())
		case <-deadline:
			t.Fatalf("fake-vendor printed no upstream after 10s:\n%s", out.String())
		case <-changed:
		}
	}
}

func TestFakeVendorServesAndFails(t *testing.T) {
	t.Parallel()
	up, out, stop := startFakeVendor(t, "--shape", "anthropic", "--faults", "529:overloaded=1")
	base, _ := up["base_url"].(string)
	if !strings.HasPrefix(base, "http://127.0.0.1:") || up["ca_file"] != nil {
		t.Fatalf("upstream %v; want a plain-HTTP base_url on loopback and no ca_file", up)
	}
	resp, err := http.Post(base+"/v1/messages", "application/json", strings.NewReader(`{"model":"claude","max_tokens":5,"messages":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 529 || !strings.Contains(string(body), "overloaded_error") {
		t.Errorf("got %d %s; want the injected 529", resp.StatusCode, body)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "served 1 requests") {
		t.Errorf("output %q", out.String())
	}
	_, _, err = runCmd(t, FakeVendor, "--faults", "429=2")
	if !errors.Is(err, ErrUsage) {
		t.Errorf("bad faults: %v", err)
	}
}

// With --tls the printed upstream is a complete one: pasted into a policy
// as it is, detour trusts the vendor's self-signed certificate through the
// ca_file it names and gets its answer.
func TestFakeVendorTLSUpstreamCarriesItsCAFile(t *testing.T) {
	t.Parallel()
	up, _, stop := startFakeVendor(t, "--shape", "openai", "--tls", "--name", "tls-fake")
	caFile, _ := up["ca_file"].(string)
	if caFile == "" || !strings.HasPrefix(up["base_url"].(string), "https://127.0.0.1:") {
		t.Fatalf("upstream %v; want an https base_url and the ca_file of its certificate", up)
	}
	if _, err := os.Stat(caFile); err != nil {
		t.Fatalf("ca_file: %v", err)
	}
	upJSON, _ := json.Marshal(up)
	h := detourtest.Start(t, `{"upstreams": {"fake": `+string(upJSON)+`},
  "routes": [{"name": "r", "match": {"host": "api.openai.com", "path": "/v1/chat/completions"}, "chain": ["fake"]}]}`)
	resp, err := h.Client().Post("https://api.openai.com/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "Hello from tls-fake.") {
		t.Errorf("through detour: %d %s; want the fake vendor's answer", resp.StatusCode, body)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(caFile); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("ca_file %s left behind after the vendor stopped (%v)", caFile, err)
	}
}

func TestPolicyExplainAsksARunningDetourForCooldowns(t *testing.T) {
	t.Parallel()
	primary := detourtest.NewVendor(t, rewrite.OpenAI, "primary")
	backup := detourtest.NewVendor(t, rewrite.OpenAI, "backup")
	pol := fmt.Sprintf(`{
  "upstreams": {
    "primary": {"shape": "openai", "base_url": %q, "ca_file": %q, "auth": {"from": "client"}},
    "backup":  {"shape": "openai", "base_url": %q, "ca_file": %q, "auth": {"from": "client"}}
  },
  "routes": [{"name": "r", "match": {"host": "api.openai.com", "path": "/v1/chat/completions"}, "chain": ["primary", "backup"]}]
}`, primary.BaseURL(), primary.CAFile, backup.BaseURL(), backup.CAFile)
	h := detourtest.Start(t, pol)
	primary.Script(fv.Fault{Kind: fv.Status, Status: 429, Class: fv.ClassInsufficientQuota})
	req, _ := http.NewRequest(http.MethodPost, "https://api.openai.com/v1/chat/completions", strings.NewReader(`{"model":"gpt-4o","messages":[]}`))
	resp, err := h.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()

	reqFile := filepath.Join(t.TempDir(), "req.json")
	os.WriteFile(reqFile, []byte(`{"model":"gpt-4o","messages":[]}`), 0o644)
	out, _, err := runCmd(t, Policy, "explain", h.PolicyPath, "--request", reqFile, "--admin", h.AdminURL.Host)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "primary") || !strings.Contains(out, "skipped now: cooling down until") || !strings.Contains(out, "insufficient_quota") {
		t.Errorf("explain does not show the live cooldown:\n%s", out)
	}
}
