package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/detour-proxy/detour/internal/detourtest"
	"github.com/detour-proxy/detour/internal/fakevendor"
	"github.com/detour-proxy/detour/rewrite"
)

// runPolicy writes a policy whose chat route goes primary → backup, two
// fake OpenAIs on loopback TLS, and returns its path and the vendors.
func runPolicy(t *testing.T, primaryFault fakevendor.Fault) (string, *detourtest.Vendor, *detourtest.Vendor) {
	t.Helper()
	primary := detourtest.NewVendor(t, rewrite.OpenAI, "primary")
	backup := detourtest.NewVendor(t, rewrite.OpenAI, "backup")
	primary.SetDefault(primaryFault)
	dir := t.TempDir()
	up := func(v *detourtest.Vendor) map[string]any {
		return map[string]any{"shape": "openai", "base_url": v.BaseURL(), "ca_file": v.CAFile, "auth": map[string]any{"none": true}}
	}
	data, err := json.Marshal(map[string]any{
		"ca":        map[string]string{"cert_file": filepath.Join(dir, "ca.pem"), "key_file": filepath.Join(dir, "ca-key.pem")},
		"upstreams": map[string]any{"primary": up(primary), "backup": up(backup)},
		"routes": []any{map[string]any{"name": "openai-chat", "chain": []string{"primary", "backup"},
			"match": map[string]string{"host": "api.openai.com", "path": "/v1/chat/completions"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "policy.json")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path, primary, backup
}

// detourRun runs `detour run args…` as main would.
func detourRun(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var o, e bytes.Buffer
	err = Run(context.Background(), args, &o, &e)
	return o.String(), e.String(), err
}

// The proof with curl, unmodified: it calls api.openai.com with nothing but
// the environment `detour run` gives it, the primary is out of quota, and
// curl gets the backup's answer.
func TestRunCurlFailsOver(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("curl"); err != nil {
		if os.Getenv("CI") == "" {
			t.Skip("curl is not installed")
		}
		t.Fatal("curl is not installed; .ci/run must install it")
	}
	pol, primary, backup := runPolicy(t, fakevendor.Fault{Kind: fakevendor.Status, Status: 429, Class: fakevendor.ClassInsufficientQuota})
	logFile := filepath.Join(t.TempDir(), "detour.log")
	stdout, stderr, err := detourRun(t, "--policy", pol, "--log", logFile, "--",
		// -q first: no ~/.curlrc. -i: the response headers too.
		"curl", "-q", "-sS", "-i", "--max-time", "30",
		"-H", "Authorization: Bearer sk-test-not-a-real-key",
		"-H", "Content-Type: application/json",
		"-d", `{"model":"gpt-4o","messages":[{"role":"user","content":"Say hello."}]}`,
		"https://api.openai.com/v1/chat/completions")
	if err != nil {
		log, _ := os.ReadFile(logFile)
		t.Fatalf("detour run: %v\nstdout:\n%s\nstderr:\n%s\nlog:\n%s", err, stdout, stderr, log)
	}
	if !strings.Contains(stdout, "Hello from backup.") {
		t.Errorf("curl printed no answer from the backup:\n%s", stdout)
	}
	if !strings.Contains(strings.ToLower(stdout), "x-detour-answered-by: backup") {
		t.Errorf("curl saw no x-detour-answered-by: backup header:\n%s", stdout)
	}
	if primary.Calls() != 1 || backup.Calls() != 1 {
		t.Errorf("primary called %d times, backup %d; want 1 and 1", primary.Calls(), backup.Calls())
	}
	if !strings.Contains(stderr, "1 failed over (primary→backup 1)") || !strings.Contains(stderr, "answered by backup 1") {
		t.Errorf("stderr lacks the failover summary:\n%s", stderr)
	}
	if log, _ := os.ReadFile(logFile); !bytes.Contains(log, []byte(`"answered_by":"backup"`)) {
		t.Errorf("--log file lacks the request's log line:\n%s", log)
	}
}

func TestRunPassesExitCode(t *testing.T) {
	t.Parallel()
	pol, _, _ := runPolicy(t, fakevendor.Fault{})
	_, stderr, err := detourRun(t, "--policy", pol, "--log", filepath.Join(t.TempDir(), "log"), "--", "sh", "-c", "exit 7")
	var exit ExitError
	if !errors.As(err, &exit) || exit.Code != 7 {
		t.Fatalf("err = %v; want ExitError{7}\nstderr:\n%s", err, stderr)
	}
	_, _, err = detourRun(t, "--policy", pol, "--log", filepath.Join(t.TempDir(), "log"), "--", "true")
	if err != nil {
		t.Errorf("exit 0: err = %v; want nil", err)
	}
}

func TestRunCommandNotFoundExits127(t *testing.T) {
	t.Parallel()
	pol, _, _ := runPolicy(t, fakevendor.Fault{})
	_, stderr, err := detourRun(t, "--policy", pol, "--", "detour-no-such-command", "arg")
	var exit ExitError
	if !errors.As(err, &exit) || exit.Code != 127 {
		t.Fatalf("err = %v; want ExitError{127}", err)
	}
	if !strings.Contains(stderr, "detour-no-such-command: command not found") {
		t.Errorf("stderr does not name the command:\n%s", stderr)
	}
}

func TestRunUsageErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "detour run: put -- before the command: detour run -- python app.py"},
		{[]string{"python", "app.py"}, "detour run: put -- before the command: detour run -- python app.py"},
		{[]string{"--policy", "p.json", "node", "server.js"}, "detour run: put -- before the command: detour run -- node server.js"},
		{[]string{"--"}, "detour run: put -- before the command: detour run -- python app.py"},
		{[]string{"--policy", "p.json", "--"}, "detour run: put -- before the command"},
		{[]string{"--frob", "--", "true"}, "flag provided but not defined: -frob"},
		{[]string{"--log", "x.log", "--verbose", "--", "true"}, "choose one"},
	} {
		_, stderr, err := detourRun(t, tc.args...)
		if !errors.Is(err, ErrUsage) {
			t.Errorf("detour run %q: err = %v; want ErrUsage", tc.args, err)
		}
		if !strings.Contains(stderr, tc.want) || !strings.Contains(stderr, "usage: "+runSynopsis) {
			t.Errorf("detour run %q: stderr\n%s\nwant %q and the usage", tc.args, stderr, tc.want)
		}
	}
	// A command's own flags after -- are its, not detour's.
	pol, _, _ := runPolicy(t, fakevendor.Fault{})
	var exit ExitError
	if _, _, err := detourRun(t, "--policy", pol, "--", "detour-no-such-command", "--frob"); !errors.As(err, &exit) || exit.Code != 127 {
		t.Errorf("a flag after --: err = %v; want the command run (and not found), not a usage error", err)
	}
	if out, stderr, err := detourRun(t, "-h"); err != nil || !strings.Contains(out, "usage: "+runSynopsis) || stderr != "" {
		t.Errorf("-h: err %v, stdout %q, stderr %q; want nil and the usage on stdout", err, out, stderr)
	}
}

// Without --policy and without ./policy.json, plain Run has no built-in
// policy to fall back on and says what to do.
func TestRunWithoutPolicy(t *testing.T) {
	t.Chdir(t.TempDir())
	_, _, err := detourRun(t, "--", "true")
	if err == nil || !strings.Contains(err.Error(), "pass --policy FILE or create ./policy.json") {
		t.Errorf("err = %v; want a hint to pass --policy", err)
	}
}
