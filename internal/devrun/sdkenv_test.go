package devrun

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/detour-proxy/detour/internal/fakevendor"
)

// childVars runs a shell under detour run that writes its environment to a
// file, and returns that environment and detour run's stderr.
func childVars(t *testing.T, policyPath string, extra ...string) (map[string]string, string) {
	t.Helper()
	out := t.TempDir()
	res, _, stderr := run(t, Options{
		Command:    []string{"sh", "-c", `env > "$OUT/env"; cp "$(echo "$JAVA_TOOL_OPTIONS" | sed 's/.*-Djavax.net.ssl.trustStore=\([^ ]*\).*/\1/')" "$OUT/store.p12"`},
		PolicyPath: policyPath,
		Env:        baseEnv(append([]string{"OUT=" + out}, extra...)...),
	})
	if res.ExitCode != 0 {
		t.Fatalf("exit %d\n%s", res.ExitCode, stderr.String())
	}
	data, err := os.ReadFile(filepath.Join(out, "env"))
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, line := range strings.Split(string(data), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			env[k] = v
		}
	}
	if st, err := os.Stat(filepath.Join(out, "store.p12")); err != nil || st.Size() == 0 {
		t.Errorf("the trust store JAVA_TOOL_OPTIONS names was not there while CMD ran (%v)", err)
	}
	return env, stderr.String()
}

// CMD gets the base URL of the one vendor the policy routes (none for the
// others), and JAVA_TOOL_OPTIONS with detour's proxy and trust store; a
// base URL the user set is kept, and the start says so once.
func TestSDKAndJavaVariables(t *testing.T) {
	t.Parallel()
	policyPath, _, _ := vendors(t, fakevendor.Fault{})
	env, _ := childVars(t, policyPath)
	proxy := env["DETOUR_PROXY_URL"]
	if got := env["OPENAI_BASE_URL"]; got != proxy+"/openai/v1" {
		t.Errorf("OPENAI_BASE_URL = %q; want %s/openai/v1", got, proxy)
	}
	for _, k := range []string{"ANTHROPIC_BASE_URL", "GOOGLE_GEMINI_BASE_URL"} {
		if v, ok := env[k]; ok {
			t.Errorf("%s = %q for a policy that routes no such host; want it unset", k, v)
		}
	}
	port := strings.TrimPrefix(proxy, "http://127.0.0.1:")
	for _, want := range []string{"-Dhttps.proxyHost=127.0.0.1 -Dhttps.proxyPort=" + port, "-Dhttp.proxyPort=" + port, "-Djavax.net.ssl.trustStoreType=PKCS12", "-Dhttp.nonProxyHosts=localhost|127.*|[::1]|169.254.*"} {
		if !strings.Contains(env["JAVA_TOOL_OPTIONS"], want) {
			t.Errorf("JAVA_TOOL_OPTIONS = %q; want it to hold %s", env["JAVA_TOOL_OPTIONS"], want)
		}
	}

	env, stderr := childVars(t, policyPath, "OPENAI_BASE_URL=https://gateway.example/v1")
	if got := env["OPENAI_BASE_URL"]; got != "https://gateway.example/v1" {
		t.Errorf("the user's OPENAI_BASE_URL became %q; want it kept", got)
	}
	if n := strings.Count(stderr, "detour run: note: OPENAI_BASE_URL is already set (https://gateway.example/v1): left as it is"); n != 1 {
		t.Errorf("the start says %d times that the user's OPENAI_BASE_URL was kept; want once:\n%s", n, stderr)
	}
	if strings.Contains(stderr, "base URL in") {
		t.Errorf("the start line claims a base URL detour did not set:\n%s", stderr)
	}
}

// Node 20's fetch ignores HTTPS_PROXY; an app that calls OpenAI as the
// official SDK does (fetch to OPENAI_BASE_URL) reaches detour by the base
// URL detour set, and gets the failover.
func TestNodeFetchReachesDetourByBaseURL(t *testing.T) {
	node := requireTool(t, "node")
	t.Parallel()
	policyPath, primary, backup := vendors(t, fakevendor.Fault{Kind: fakevendor.Status, Status: 503})
	res, stdout, stderr := run(t, Options{
		Command:    []string{node, filepath.Join("testdata", "node", "fetch.mjs")},
		PolicyPath: policyPath,
		Env:        baseEnv("OPENAI_API_KEY=sk-test-not-a-real-key"),
	})
	if res.ExitCode != 0 {
		t.Fatalf("node exited %d\nstdout:\n%s\nstderr:\n%s", res.ExitCode, stdout.String(), stderr.String())
	}
	if got := strings.TrimSpace(stdout.String()); got != "Hello from backup." {
		t.Errorf("node printed %q; want the backup's answer", got)
	}
	if primary.Calls() < 1 || backup.Calls() != 1 {
		t.Errorf("primary called %d times, backup %d", primary.Calls(), backup.Calls())
	}
	if s := res.Summary; s.FailedOver != 1 || s.WaysIn["base URL"] != 1 {
		t.Errorf("summary = %+v; want one failover, by the base URL", s)
	}
}
