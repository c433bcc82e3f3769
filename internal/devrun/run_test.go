package devrun

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/detour-proxy/detour/internal/detourtest"
	"github.com/detour-proxy/detour/internal/fakevendor"
	"github.com/detour-proxy/detour/internal/mitm"
	"github.com/detour-proxy/detour/internal/testsupport"
	"github.com/detour-proxy/detour/rewrite"
)

// vendors starts a primary and a backup fake OpenAI and writes a policy
// whose chat route goes primary → backup, with detour's CA (testCA's) in a
// temporary directory. It returns the policy file.
func vendors(t *testing.T, primaryFault fakevendor.Fault) (policyPath string, primary, backup *detourtest.Vendor) {
	t.Helper()
	primary = detourtest.NewVendor(t, rewrite.OpenAI, "primary")
	backup = detourtest.NewVendor(t, rewrite.OpenAI, "backup")
	primary.SetDefault(primaryFault)
	dir := t.TempDir()
	writeTestCA(t, dir)
	upstream := func(v *detourtest.Vendor) map[string]any {
		return map[string]any{"shape": "openai", "base_url": v.BaseURL(), "ca_file": v.CAFile, "auth": map[string]any{"none": true}}
	}
	pol := map[string]any{
		"version":   "run-test",
		"ca":        map[string]string{"cert_file": filepath.Join(dir, "ca.pem"), "key_file": filepath.Join(dir, "ca-key.pem")},
		"upstreams": map[string]any{"primary": upstream(primary), "backup": upstream(backup)},
		"routes": []any{map[string]any{
			"name":  "openai-chat",
			"match": map[string]string{"host": "api.openai.com", "path": "/v1/chat/completions"},
			"chain": []string{"primary", "backup"},
		}},
	}
	data, err := json.MarshalIndent(pol, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	policyPath = filepath.Join(dir, "policy.json")
	if err := os.WriteFile(policyPath, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return policyPath, primary, backup
}

// testCA is the CA of every policy vendors writes, as PEM (certificate,
// key): one CA for all the binary's runs, so that their trust files are the
// same bytes and Run encodes the Java trust store once (javaStoreMemo), as a
// developer's runs with their one CA do. Each test still gets its own copy
// of the files.
var testCA = sync.OnceValues(func() ([2][]byte, error) {
	ca, err := mitm.Generate()
	if err != nil {
		return [2][]byte{}, err
	}
	der, err := x509.MarshalPKCS8PrivateKey(ca.Key)
	if err != nil {
		return [2][]byte{}, err
	}
	return [2][]byte{ca.CertPEM, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})}, nil
})

// writeTestCA writes testCA to dir as ca.pem and ca-key.pem.
func writeTestCA(t *testing.T, dir string) {
	t.Helper()
	pair, err := testCA()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ca.pem"), pair[0], 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ca-key.pem"), pair[1], 0o600); err != nil {
		t.Fatal(err)
	}
}

// quietPolicy is a policy for runs whose child makes no LLM call.
func quietPolicy(t *testing.T) string {
	t.Helper()
	p, _, _ := vendors(t, fakevendor.Fault{})
	return p
}

// baseEnv is the test process's environment without anything that would
// point an SDK elsewhere than its vendor's host, and without a
// NODE_EXTRA_CA_CERTS or JAVA_TOOL_OPTIONS of the machine's, plus extra.
func baseEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OPENAI_") && !strings.HasPrefix(kv, "NODE_EXTRA_CA_CERTS=") &&
			!strings.HasPrefix(kv, "ANTHROPIC_") && !strings.HasPrefix(kv, "GOOGLE_GEMINI_BASE_URL=") && !strings.HasPrefix(kv, "JAVA_TOOL_OPTIONS=") {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

// withDefaults fills in what every test run needs: captured output, the
// log in a file of the test's own, the test environment, and a signal
// channel of its own (never the process's signals: the test runner's Ctrl-C
// is not for the child).
func withDefaults(t *testing.T, opts Options) (Options, *detourtest.SyncBuffer, *detourtest.SyncBuffer) {
	t.Helper()
	stdout, stderr := &detourtest.SyncBuffer{}, &detourtest.SyncBuffer{}
	if opts.Stdout == nil {
		opts.Stdout = stdout
	}
	if opts.Stderr == nil {
		opts.Stderr = stderr
	}
	if opts.LogFile == "" {
		opts.LogFile = filepath.Join(t.TempDir(), "detour.log")
	}
	if opts.Env == nil {
		opts.Env = baseEnv()
	}
	if opts.Signals == nil {
		opts.Signals = make(chan os.Signal)
	}
	return opts, stdout, stderr
}

// run runs opts.Command under detour and fails the test when it cannot.
func run(t *testing.T, opts Options) (Result, *detourtest.SyncBuffer, *detourtest.SyncBuffer) {
	t.Helper()
	opts, stdout, stderr := withDefaults(t, opts)
	res, err := Run(context.Background(), opts)
	if err != nil {
		t.Fatalf("Run: %v\nstderr:\n%s", err, stderr.String())
	}
	return res, stdout, stderr
}

// runAsync runs opts.Command under detour in the background; the result
// arrives on the channel (errors are reported with t.Error).
func runAsync(t *testing.T, opts Options) <-chan Result {
	t.Helper()
	opts, _, stderr := withDefaults(t, opts)
	done := make(chan Result, 1)
	go func() {
		res, err := Run(context.Background(), opts)
		if err != nil {
			t.Errorf("Run: %v\nstderr:\n%s", err, stderr.String())
		}
		done <- res
	}()
	return done
}

func TestMain(m *testing.M) {
	if addr := os.Getenv(dialerEnv); addr != "" {
		os.Exit(dialerMain(addr))
	}
	if os.Getenv(serverEnv) == "1" {
		os.Exit(serverMain())
	}
	testsupport.Main(m)
}

// The proof with an unmodified Go program: openai-go with no configuration
// at all reaches "api.openai.com" through detour, the primary fails with
// 503, the backup answers, and the program never notices.
func TestOpenAIGoAppFailsOverUnmodified(t *testing.T) {
	t.Parallel()
	bin := appCommand(t)
	policyPath, primary, backup := vendors(t, fakevendor.Fault{Kind: fakevendor.Status, Status: 503})
	res, stdout, stderr := run(t, Options{
		Command:    []string{bin},
		PolicyPath: policyPath,
		Env:        baseEnv("OPENAI_API_KEY=sk-test-not-a-real-key"),
	})
	t.Logf("detour run's stderr:\n%s", stderr.String())
	if res.ExitCode != 0 {
		t.Fatalf("app exited %d\nstdout:\n%s\nstderr:\n%s", res.ExitCode, stdout.String(), stderr.String())
	}
	if got, want := strings.TrimSpace(stdout.String()), "Hello from backup."; got != want {
		t.Errorf("app printed %q; want %q", got, want)
	}
	if primary.Calls() < 1 || backup.Calls() != 1 {
		t.Errorf("primary called %d times, backup %d; want the primary tried and the backup once", primary.Calls(), backup.Calls())
	}
	if res.Summary.FailedOver != 1 || res.Summary.Failovers["primary→backup"] != 1 || res.Summary.AnsweredBy["backup"] != 1 {
		t.Errorf("summary = %+v; want one failover primary→backup", res.Summary)
	}
	if !strings.Contains(stderr.String(), "1 failed over (primary→backup 1)") {
		t.Errorf("stderr lacks the failover summary:\n%s", stderr.String())
	}
}

func TestExitCodePassesThrough(t *testing.T) {
	t.Parallel()
	pol := quietPolicy(t)
	for _, tc := range []struct {
		script string
		want   int
	}{
		{"exit 0", 0},
		{"exit 7", 7},
		{"kill -KILL $$", 128 + int(syscall.SIGKILL)},
	} {
		res, _, stderr := run(t, Options{Command: []string{"sh", "-c", tc.script}, PolicyPath: pol})
		if res.ExitCode != tc.want {
			t.Errorf("sh -c %q: exit code %d; want %d", tc.script, res.ExitCode, tc.want)
		}
		if !strings.Contains(stderr.String(), "no requests were intercepted") {
			t.Errorf("sh -c %q: stderr lacks the summary:\n%s", tc.script, stderr.String())
		}
	}
}

// SIGTERM sent to detour reaches the child, and detour waits for the child
// to finish its own shutdown rather than stopping with it.
func TestSignalIsPassedOnAndChildDecidesTheEnd(t *testing.T) {
	t.Parallel()
	pol := quietPolicy(t)
	sigs := make(chan os.Signal, 1)
	var stdout detourtest.SyncBuffer
	done := runAsync(t, Options{
		Command:    []string{"sh", "-c", `trap 'echo got TERM; sleep 0.2; echo clean exit; exit 0' TERM; echo ready; while :; do sleep 0.05; done`},
		PolicyPath: pol, Signals: sigs, Stdout: &stdout,
	})
	waitFor(t, &stdout, "ready")
	sigs <- syscall.SIGTERM
	select {
	case res := <-done:
		if res.ExitCode != 0 {
			t.Errorf("exit code %d; want 0 (the child's own, after its trap ran)", res.ExitCode)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("run did not end after the child's trap")
	}
	if got := stdout.String(); !strings.Contains(got, "got TERM\nclean exit") {
		t.Errorf("child output %q; want its TERM trap to have run to the end", got)
	}
}

// While the child handles SIGTERM, detour still answers: an app that
// finishes its LLM calls during shutdown gets them answered.
func TestDetourServesUntilChildExits(t *testing.T) {
	t.Parallel()
	bin := appCommand(t)
	policyPath, _, _ := vendors(t, fakevendor.Fault{})
	sigs := make(chan os.Signal, 1)
	var stdout detourtest.SyncBuffer
	done := runAsync(t, Options{
		Command:    []string{"sh", "-c", `trap '"$APP"; exit $?' TERM; echo ready; while :; do sleep 0.05; done`},
		PolicyPath: policyPath, Signals: sigs, Stdout: &stdout,
		Env: baseEnv("OPENAI_API_KEY=sk-test", "APP="+bin),
	})
	waitFor(t, &stdout, "ready")
	sigs <- syscall.SIGTERM
	select {
	case res := <-done:
		if res.ExitCode != 0 || !strings.Contains(stdout.String(), "Hello from primary.") {
			t.Errorf("exit code %d, output %q; want the app's answer after SIGTERM", res.ExitCode, stdout.String())
		}
		if res.Summary.Requests != 1 {
			t.Errorf("summary %+v; want the request made during shutdown", res.Summary)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("run did not end")
	}
}

// DETOUR_ADMIN_URL points at detour's admin listener while the child runs.
func TestAdminURLAnswers(t *testing.T) {
	t.Parallel()
	pol := quietPolicy(t)
	sigs := make(chan os.Signal, 1)
	var stdout detourtest.SyncBuffer
	done := runAsync(t, Options{
		Command:    []string{"sh", "-c", `trap 'exit 0' TERM; echo "admin=$DETOUR_ADMIN_URL"; while :; do sleep 0.05; done`},
		PolicyPath: pol, Signals: sigs, Stdout: &stdout,
	})
	waitFor(t, &stdout, "\n")
	adminURL := strings.TrimSpace(strings.TrimPrefix(stdout.String(), "admin="))
	resp, err := http.Get(adminURL + "/healthz")
	if err != nil {
		t.Errorf("GET %s/healthz: %v", adminURL, err)
	} else {
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s/healthz: %s; want 200", adminURL, resp.Status)
		}
	}
	sigs <- syscall.SIGTERM
	if res := <-done; res.ExitCode != 0 {
		t.Errorf("exit code %d; want 0", res.ExitCode)
	}
}

// A signal that arrives while detour is still starting ends the run before
// the command starts, with the status a shell would give.
func TestSignalBeforeStartRunsNothing(t *testing.T) {
	t.Parallel()
	pol := quietPolicy(t)
	sigs := make(chan os.Signal, 1)
	sigs <- syscall.SIGINT
	res, stdout, _ := run(t, Options{Command: []string{"sh", "-c", "echo started"}, PolicyPath: pol, Signals: sigs})
	if res.ExitCode != 128+int(syscall.SIGINT) || stdout.String() != "" {
		t.Errorf("exit code %d, output %q; want %d and no output", res.ExitCode, stdout.String(), 128+int(syscall.SIGINT))
	}
}

// Cancelling the context is the hard stop: the child gets SIGTERM.
func TestCancelTerminatesChild(t *testing.T) {
	t.Parallel()
	pol := quietPolicy(t)
	ctx, cancel := context.WithCancel(context.Background())
	var stdout detourtest.SyncBuffer
	done := make(chan Result, 1)
	go func() {
		res, err := Run(ctx, Options{
			Command: []string{"sh", "-c", "echo ready; exec sleep 60"}, PolicyPath: pol, Env: baseEnv(),
			LogFile: filepath.Join(t.TempDir(), "log"), Stdout: &stdout, Signals: make(chan os.Signal),
		})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	waitFor(t, &stdout, "ready")
	cancel()
	select {
	case res := <-done:
		if want := 128 + int(syscall.SIGTERM); res.ExitCode != want {
			t.Errorf("exit code %d; want %d", res.ExitCode, want)
		}
	case <-time.After(killGrace + 5*time.Second):
		t.Fatal("run did not end after cancel")
	}
}

// The child's environment: proxy and trust variables set (replacing
// inherited values), everything else inherited, and the trust files hold
// detour's CA (the bundle with the system roots) and are gone after the run.
func TestChildEnvironmentAndTrustFiles(t *testing.T) {
	t.Parallel()
	pol := quietPolicy(t)
	out := t.TempDir()
	script := `env > "$OUT/env"; cp "$SSL_CERT_FILE" "$OUT/bundle.pem"; cp "$NODE_EXTRA_CA_CERTS" "$OUT/node.pem"`
	res, _, stderr := run(t, Options{
		Command: []string{"sh", "-c", script}, PolicyPath: pol,
		Env: baseEnv("OUT="+out, "KEEP_ME=yes", "HTTPS_PROXY=http://old.example:3128", "no_proxy=example.com"),
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
	proxyURL := env["DETOUR_PROXY_URL"]
	if !strings.HasPrefix(proxyURL, "http://127.0.0.1:") {
		t.Fatalf("DETOUR_PROXY_URL = %q; want a loopback URL", proxyURL)
	}
	for _, k := range []string{"HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"} {
		if env[k] != proxyURL {
			t.Errorf("%s = %q; want %q", k, env[k], proxyURL)
		}
	}
	for _, k := range []string{"NO_PROXY", "no_proxy"} {
		if env[k] != "localhost,127.0.0.1,::1,169.254.169.254,169.254.0.0/16" {
			t.Errorf("%s = %q; want localhost,127.0.0.1,::1,169.254.169.254,169.254.0.0/16", k, env[k])
		}
	}
	bundle := env["SSL_CERT_FILE"]
	for _, k := range []string{"REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"} {
		if env[k] != bundle {
			t.Errorf("%s = %q; want the bundle %q", k, env[k], bundle)
		}
	}
	if env["NODE_USE_ENV_PROXY"] != "1" || env["KEEP_ME"] != "yes" {
		t.Errorf("NODE_USE_ENV_PROXY = %q, KEEP_ME = %q; want 1 and the inherited yes", env["NODE_USE_ENV_PROXY"], env["KEEP_ME"])
	}
	if a := env["DETOUR_ADMIN_URL"]; !strings.HasPrefix(a, "http://127.0.0.1:") || a == proxyURL {
		t.Errorf("DETOUR_ADMIN_URL = %q; want a loopback URL of its own", a)
	}
	if !strings.Contains(stderr.String(), "proxy "+proxyURL) {
		t.Errorf("start line does not name the proxy:\n%s", stderr.String())
	}

	node, _ := os.ReadFile(filepath.Join(out, "node.pem"))
	bundled, _ := os.ReadFile(filepath.Join(out, "bundle.pem"))
	if n := strings.Count(string(node), "BEGIN CERTIFICATE"); n != 1 {
		t.Errorf("NODE_EXTRA_CA_CERTS holds %d certificates; want detour's CA alone", n)
	}
	if !strings.Contains(string(bundled), strings.TrimSpace(string(node))) || strings.Count(string(bundled), "BEGIN CERTIFICATE") < 2 {
		t.Error("SSL_CERT_FILE is not system roots plus detour's CA")
	}
	for _, f := range []string{bundle, env["NODE_EXTRA_CA_CERTS"]} {
		if _, err := os.Stat(f); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s still exists after the run (%v)", f, err)
		}
	}
}

// A NODE_EXTRA_CA_CERTS the user had keeps its certificates: Node reads
// only one such file, and a company CA in it must still be trusted.
func TestNodeExtraCACertsKeepsTheUsersOwn(t *testing.T) {
	t.Parallel()
	pol, primary, _ := vendors(t, fakevendor.Fault{})
	own, err := os.ReadFile(primary.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	res, _, stderr := run(t, Options{
		Command: []string{"sh", "-c", `cp "$NODE_EXTRA_CA_CERTS" "$OUT/node.pem"`}, PolicyPath: pol,
		Env: baseEnv("OUT="+out, "NODE_EXTRA_CA_CERTS="+primary.CAFile),
	})
	if res.ExitCode != 0 {
		t.Fatalf("exit %d\n%s", res.ExitCode, stderr.String())
	}
	node, _ := os.ReadFile(filepath.Join(out, "node.pem"))
	if n := strings.Count(string(node), "BEGIN CERTIFICATE"); n != 2 || !strings.HasPrefix(string(node), string(own)) {
		t.Errorf("NODE_EXTRA_CA_CERTS holds %d certificates; want the user's own, then detour's CA", n)
	}
}

// Without --log, the log goes to a file of its own that outlives the run,
// and the start line names it.
func TestDefaultLogFileOutlivesRun(t *testing.T) {
	// Not parallel: t.Setenv changes the process's TMPDIR.
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	pol := quietPolicy(t)
	var stderr detourtest.SyncBuffer
	res, err := Run(context.Background(), Options{
		Command: []string{"true"}, PolicyPath: pol, Env: baseEnv(), Stderr: &stderr, Signals: make(chan os.Signal),
	})
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Dir(res.LogFile) != tmp {
		t.Fatalf("log file %q; want one in TMPDIR %s", res.LogFile, tmp)
	}
	data, err := os.ReadFile(res.LogFile)
	if err != nil || !strings.Contains(string(data), "detour is listening") {
		t.Errorf("log file: %v %q; want detour's log", err, data)
	}
	if !strings.Contains(stderr.String(), "log "+res.LogFile) {
		t.Errorf("start line does not name the log file:\n%s", stderr.String())
	}
	if strings.Contains(stderr.String(), "detour is listening") {
		t.Error("detour's log went to stderr too")
	}
}

func TestCommandNotFound(t *testing.T) {
	t.Parallel()
	_, err := Run(context.Background(), Options{Command: []string{"detour-no-such-command"}, Signals: make(chan os.Signal)})
	var se *StartError
	if !errors.As(err, &se) || se.Code != 127 || !strings.Contains(err.Error(), "detour-no-such-command: command not found") {
		t.Fatalf("err = %v; want a StartError with code 127 naming the command", err)
	}
	dir := t.TempDir()
	script := filepath.Join(dir, "not-executable")
	if err := os.WriteFile(script, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Run(context.Background(), Options{Command: []string{script}, Signals: make(chan os.Signal)})
	if !errors.As(err, &se) || se.Code != 126 {
		t.Fatalf("err = %v; want a StartError with code 126", err)
	}
}

// waitFor waits until the child has printed want (woken by its writes).
func waitFor(t *testing.T, out *detourtest.SyncBuffer, want string) {
	t.Helper()
	if !out.Wait(15*time.Second, func(s string) bool { return strings.Contains(s, want) }) {
		t.Fatalf("the child did not print %q; output so far %q", want, out.String())
	}
}

// An invalid policy stops the run before the command starts, with the
// policy's own error (file:line:col).
func TestInvalidPolicyRunsNothing(t *testing.T) {
	t.Parallel()
	pol := filepath.Join(t.TempDir(), "policy.json")
	if err := os.WriteFile(pol, []byte(`{"upstreams": {}, "routes": [], "frob": 1}`), 0o644); err != nil {
		t.Fatal(err)
	}
	opts, stdout, _ := withDefaults(t, Options{Command: []string{"sh", "-c", "echo started"}, PolicyPath: pol})
	_, err := Run(context.Background(), opts)
	if err == nil || !strings.Contains(err.Error(), pol+":1:") {
		t.Errorf("err = %v; want the policy error naming %s:1:…", err, pol)
	}
	if stdout.String() != "" {
		t.Errorf("the command ran: %q", stdout.String())
	}
}

// An app whose calls all go through detour, one by the SDK base URL
// (openai-go reads OPENAI_BASE_URL) and one by HTTPS_PROXY (curl), is told
// which way each came, and is warned about nothing: neither its own
// connections to detour nor detour's to the upstreams are past detour.
func TestWaysInAndNoWarningThroughDetour(t *testing.T) {
	requireTool(t, "curl")
	t.Parallel()
	bin := appCommand(t)
	policyPath, primary, _ := vendors(t, fakevendor.Fault{})
	res, stdout, stderr := run(t, Options{
		Command: []string{"sh", "-c", `"$APP" && curl -q -sS --max-time 30 -H "Authorization: Bearer sk-test" -H "Content-Type: application/json" ` +
			`-d '{"model":"gpt-4o","messages":[{"role":"user","content":"Say hello."}]}' https://api.openai.com/v1/chat/completions`},
		PolicyPath: policyPath,
		Env:        baseEnv("OPENAI_API_KEY=sk-test", "APP="+bin),
	})
	if res.ExitCode != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", res.ExitCode, stdout.String(), stderr.String())
	}
	if primary.Calls() != 2 {
		t.Errorf("primary called %d times; want 2", primary.Calls())
	}
	if w := res.Summary.WaysIn; w["base URL"] != 1 || w["HTTPS_PROXY"] != 1 || len(w) != 2 {
		t.Errorf("ways in = %v; want base URL 1, HTTPS_PROXY 1", w)
	}
	if !strings.Contains(stderr.String(), "; ways in: HTTPS_PROXY 1, base URL 1") {
		t.Errorf("summary does not say the ways in:\n%s", stderr.String())
	}
	if !strings.Contains(stderr.String(), "base URL in OPENAI_BASE_URL") {
		t.Errorf("start line does not say which base-URL variable detour set:\n%s", stderr.String())
	}
	if len(res.Summary.Unseen) != 0 || strings.Contains(stderr.String(), "never saw") {
		t.Errorf("a warning about connections past detour, for an app that went through it:\n%s", stderr.String())
	}
}
