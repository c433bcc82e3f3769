package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/detour-proxy/detour/internal/cli"
	"github.com/detour-proxy/detour/internal/testsupport"
)

func TestServeRefusesInvalidPolicyNamingFileLineAndField(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad.json")
	os.WriteFile(path, []byte(`{
  "upstreams": {"o": {"shape": "openai", "base_url": "https://api.openai.com/v1", "auth": {"from": "client"}}},
  "routes": [{"name": "r", "match": {"host": "api.openai.com"}, "chain": ["o", "missing"]}],
  "deadline": "soon"
}`), 0o644)
	var out, errb bytes.Buffer
	err := run(context.Background(), []string{"serve", "--policy", path}, &out, &errb)
	if err == nil {
		t.Fatal("serve accepted an invalid policy")
	}
	for _, want := range []string{
		path + `:3:80: routes[0].chain[1]: no upstream named "missing"`,
		path + `:4:3: deadline: invalid duration "soon"`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

func TestServeMissingPolicyFileSaysWhatToDo(t *testing.T) {
	err := run(context.Background(), []string{"serve", "--policy", "/nonexistent/policy.json"}, &bytes.Buffer{}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/policy.json does not exist") || !strings.Contains(err.Error(), "omit --policy") {
		t.Errorf("err = %v", err)
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{{"frobnicate"}, {"serve", "--no-such-flag"}, {"serve", "extra"}} {
		var errb bytes.Buffer
		err := run(context.Background(), args, &bytes.Buffer{}, &errb)
		if !errors.Is(err, cli.ErrUsage) {
			t.Errorf("run %v = %v; want a usage error (exit 2)", args, err)
		}
		if errb.Len() == 0 {
			t.Errorf("run %v printed nothing to stderr", args)
		}
	}
	var out bytes.Buffer
	if err := run(context.Background(), []string{"help"}, &out, &bytes.Buffer{}); err != nil || !strings.Contains(out.String(), "HTTPS_PROXY") {
		t.Errorf("help: %v %q", err, out.String())
	}
}

// writeTestPolicy writes the built-in policy to dir/policy.json with the
// proxy on a free loopback port, the admin listener on adminListen, and the
// CA in dir. It fails the test if the built-in policy no longer has the
// lines it replaces: a silent no-op would leave the fixed ports in.
func writeTestPolicy(t *testing.T, dir, adminListen string) string {
	t.Helper()
	pol := string(defaultPolicy)
	for _, r := range [][2]string{
		{`"listen": "127.0.0.1:8787"`, `"listen": "127.0.0.1:0", "ca": {"cert_file": "ca.pem", "key_file": "ca-key.pem"}`},
		{`"admin_listen": "127.0.0.1:8788"`, fmt.Sprintf(`"admin_listen": %q`, adminListen)},
	} {
		if !strings.Contains(pol, r[0]) {
			t.Fatalf("the built-in policy has no %s to replace", r[0])
		}
		pol = strings.Replace(pol, r[0], r[1], 1)
	}
	path := filepath.Join(dir, "policy.json")
	if err := os.WriteFile(path, []byte(pol), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestServeStartsAndStopsCleanly(t *testing.T) {
	dir := t.TempDir()
	// Both listeners on free ports: the admin listener too, never the
	// default 127.0.0.1:8788, which a running detour (or another test) holds.
	path := writeTestPolicy(t, dir, "127.0.0.1:0")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errb := &testsupport.SyncBuffer{}
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"--policy", path}, &bytes.Buffer{}, errb) }()
	deadline := time.After(10 * time.Second)
	for changed := errb.Changed(); !strings.Contains(errb.String(), "detour is listening"); changed = errb.Changed() {
		select {
		case err := <-done:
			// serve gave up (a port taken, a bad policy): say why, rather
			// than wait out the deadline and report only the log.
			t.Fatalf("serve returned %v before listening:\n%s", err, errb.String())
		case <-deadline:
			t.Fatalf("not listening after 10s:\n%s", errb.String())
		case <-changed:
		}
	}
	// The CA was created next to the policy, key readable by its owner only.
	st, err := os.Stat(filepath.Join(dir, "ca-key.pem"))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("CA key: %v, mode %v; want 0600", err, st.Mode().Perm())
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("serve returned %v after a clean stop", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not stop")
	}
}

func TestSIGHUPReloadsThePolicy(t *testing.T) {
	path := writeTestPolicy(t, t.TempDir(), "off")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errb := &testsupport.SyncBuffer{}
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"serve", "--policy", path}, &bytes.Buffer{}, errb) }()
	waitLog := func(what string) {
		t.Helper()
		errb.WaitFor(t, 10*time.Second, what)
	}
	waitLog("detour is listening")
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitLog(`"trigger":"SIGHUP"`)

	// A broken file is refused and logged once, whether the watcher or a
	// SIGHUP finds it first; a SIGHUP that finds it again says it is still
	// the refused file, as a warning, not as a new refusal.
	// Written whole by rename: the watcher must not catch it half written.
	os.WriteFile(path+".tmp", []byte(`{"upstreams": 1}`), 0o644)
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitLog("policy reload refused")
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitLog("policy file unchanged since it was refused")
	if n := strings.Count(errb.String(), "policy reload refused"); n != 1 {
		t.Errorf("the refusal was logged %d times; want once:\n%s", n, errb.String())
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
