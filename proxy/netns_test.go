//go:build linux

package proxy_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/detour-proxy/detour/internal/detourtest"
	"github.com/detour-proxy/detour/internal/mitm"
	"github.com/detour-proxy/detour/internal/testsupport"
	"github.com/detour-proxy/detour/proxy"
	"github.com/detour-proxy/detour/rewrite"
)

// TestAnotherPodCannotMisuseDetour is the script of docs/security.md: a
// second network namespace stands for another pod on the node, reaching
// detour on the pod's address over a veth pair. From there the admin's
// state changes need the token, and the proxy listener refuses the cloud
// metadata address and a CONNECT back into detour.
func TestAnotherPodCannotMisuseDetour(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipped: needs root to create a network namespace and a veth pair (CI runs as root)")
	}
	for _, tool := range []string{"ip", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("skipped: %s is not installed (.ci/run installs iproute2 and curl)", tool)
		}
	}
	podIP, otherNS := vethPair(t)

	vendor := detourtest.NewVendor(t, rewrite.OpenAI, "primary")
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "admin-token")
	const token = "s3cret-admin-token-for-the-test"
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	policyPath := filepath.Join(dir, "policy.json")
	pol := fmt.Sprintf(`{
  "listen": %q, "listen_public": true, "admin_listen": %q,
  "admin": {"token_file": %q},
  "ca": {"cert_file": "ca.pem", "key_file": "ca-key.pem"},
  "upstreams": {"primary": {"shape": "openai", "base_url": %q, "auth": {"from": "client"}, "ca_file": %q}},
  "routes": [{"name": "chat", "match": {"host": "api.openai.com", "path": "/v1/chat/completions"}, "chain": ["primary"]}]
}`, net.JoinHostPort(podIP, "0"), net.JoinHostPort(podIP, "0"), tokenFile, vendor.BaseURL(), vendor.CAFile)
	if err := os.WriteFile(policyPath, []byte(pol), 0o644); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(podIP, "0"))
	if err != nil {
		t.Fatal(err)
	}
	adminLn, err := net.Listen("tcp", net.JoinHostPort(podIP, "0"))
	if err != nil {
		t.Fatal(err)
	}
	var log detourtest.SyncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- proxy.Serve(ctx, proxy.Options{
			PolicyPath: policyPath, Stderr: &log, Listener: ln, AdminListener: adminLn,
			Ready: func(net.Addr, *mitm.CA) { close(ready) },
		})
	}()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("detour did not start: %v\n%s", err, log.String())
	case <-time.After(10 * time.Second):
		t.Fatal("detour did not start within 10s")
	}
	t.Cleanup(func() {
		cancel()
		<-done
	})
	proxyAddr, adminAddr := ln.Addr().String(), adminLn.Addr().String()

	// curl in the other namespace; -w prints the status code (and, for a
	// CONNECT, the proxy's answer to it).
	curl := func(args ...string) string {
		t.Helper()
		full := append([]string{"netns", "exec", otherNS, "curl", "-s", "-o", "/dev/null", "--max-time", "10"}, args...)
		out, err := exec.Command("ip", full...).Output()
		if err != nil {
			if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() == 0 {
				t.Fatalf("curl %v: %v", args, err)
			}
		}
		return strings.TrimSpace(string(out))
	}

	rollback := []string{"-w", "%{http_code}", "-X", "POST", "-H", "Content-Type: application/json",
		"--data", `{"hash": "0000000000000000"}`, "http://" + adminAddr + "/policy/rollback"}
	if got := curl(rollback...); got != "401" {
		t.Errorf("rollback from another pod without the token: status %s; want 401", got)
	}
	withToken := append([]string{"-H", "Authorization: Bearer " + token}, rollback...)
	// The token passes authentication; the unknown hash is then a 404
	// from the rollback itself, which proves the request got through.
	if got := curl(withToken...); got != "404" {
		t.Errorf("rollback from another pod with the token: status %s; want 404 (authenticated, unknown hash)", got)
	}
	if got := curl("-w", "%{http_code}", "http://"+adminAddr+"/status"); got != "401" {
		t.Errorf("/status from another pod without the token: status %s; want 401", got)
	}
	if got := curl("-w", "%{http_code}", "http://"+adminAddr+"/readyz"); got != "200" {
		t.Errorf("/readyz from another pod: status %s; want 200 (the kubelet probes it)", got)
	}

	// The metadata address, as an absolute-URI request and as a CONNECT.
	if got := curl("-w", "%{http_code}", "-x", "http://"+proxyAddr, "http://169.254.169.254/latest/meta-data/"); got != "403" {
		t.Errorf("forward to the metadata address: status %s; want 403", got)
	}
	if got := curl("-w", "%{http_connect}", "-p", "-x", "http://"+proxyAddr, "https://169.254.169.254/"); got != "403" {
		t.Errorf("CONNECT to the metadata address: proxy answered %s; want 403", got)
	}
	// CONNECT 0.0.0.0:PORT would be detour itself.
	_, port, _ := net.SplitHostPort(proxyAddr)
	if got := curl("-w", "%{http_connect}", "-p", "-x", "http://"+proxyAddr, "https://0.0.0.0:"+port+"/"); got != "403" {
		t.Errorf("CONNECT 0.0.0.0:%s (detour itself): proxy answered %s; want 403", port, got)
	}
	if !bytes.Contains([]byte(log.String()), []byte("169.254.169.254")) {
		t.Errorf("the refused egress left no log line:\n%s", log.String())
	}
}

// vethPair creates a network namespace joined to this one by a veth pair,
// and returns this side's address (the "pod address") and the namespace's
// name. Addresses come from 198.18.0.0/15, the range set aside for testing
// network devices, with a per-process /30 so that parallel runs differ.
func vethPair(t *testing.T) (podIP, ns string) {
	return namedVethPair(t, "detour-test", "dt", 18)
}

// namedVethPair is vethPair with its names and its /16 given: the
// namespace is name-PID, the links prefix+"h"/"p"+PID, the addresses
// 198.octet.x.y, so that tests and benchmarks never meet. It is
// testsupport.VethPair, which other packages' namespace tests share.
func namedVethPair(tb testing.TB, name, prefix string, octet int) (hostIP, ns string) {
	tb.Helper()
	return testsupport.VethPair(tb, name, prefix, octet)
}
