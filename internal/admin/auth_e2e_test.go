package admin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/detour-proxy/detour/internal/admin"
	"github.com/detour-proxy/detour/internal/detourtest"
	"github.com/detour-proxy/detour/internal/mitm"
	"github.com/detour-proxy/detour/internal/testsupport"
	"github.com/detour-proxy/detour/proxy"
)

// nonLoopbackIP returns an address of this host that is not on loopback,
// or skips: a connection to it from this host comes from it, so the admin
// listener sees a real non-loopback peer, as from another pod.
func nonLoopbackIP(t *testing.T) net.IP {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Skipf("no interface addresses: %v", err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && !n.IP.IsLinkLocalUnicast() && n.IP.To4() != nil {
			return n.IP
		}
	}
	t.Skip("this host has no non-loopback IPv4 address to test a remote peer with")
	return nil
}

// serveWithAdminOn runs detour on policyJSON with its admin listener on
// ip:0 and returns the admin base URL and the log.
func serveWithAdminOn(t *testing.T, ip net.IP, policyJSON string) (string, *detourtest.SyncBuffer) {
	t.Helper()
	dir := t.TempDir()
	pol := filepath.Join(dir, "policy.json")
	if err := os.WriteFile(pol, []byte(policyJSON), 0o644); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	adminLn, err := net.Listen("tcp", net.JoinHostPort(ip.String(), "0"))
	if err != nil {
		ln.Close()
		t.Skipf("cannot listen on %s: %v", ip, err)
	}
	log := &detourtest.SyncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	ready, done := make(chan struct{}), make(chan error, 1)
	go func() {
		done <- proxy.Serve(ctx, proxy.Options{PolicyPath: pol, Stderr: log, Listener: ln, AdminListener: adminLn,
			Ready: func(net.Addr, *mitm.CA) { close(ready) }})
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
		select {
		case <-done:
		case <-time.After(proxy.DrainTimeout + 5*time.Second):
			t.Error("detour did not stop")
		}
	})
	return "http://" + adminLn.Addr().String(), log
}

// TestAdminOverTheNetworkNeedsTheToken: detour with admin_listen on a
// non-loopback address, called over a real socket from that address (not
// loopback): probes answer; /status, /policy/history and a rollback need
// the token of admin.token_file; a wrong token gets 401; a rotated token
// file is picked up with no policy reload.
func TestAdminOverTheNetworkNeedsTheToken(t *testing.T) {
	t.Parallel()
	ip := nonLoopbackIP(t)
	s := newSetup(t)
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("first-admin-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	pol := strings.Replace(s.policy("v1", "primary", "backup"), `"version": "v1",`,
		fmt.Sprintf(`"version": "v1", "admin": {"token_file": %q}, "ca": {"cert_file": "ca.pem", "key_file": "ca-key.pem"},`, tokenFile), 1)
	base, log := serveWithAdminOn(t, ip, pol)

	// Dial from the non-loopback address, so that detour's peer is it.
	client := &http.Client{Transport: &http.Transport{Proxy: nil, DialContext: (&net.Dialer{
		LocalAddr: &net.TCPAddr{IP: ip}, Timeout: 5 * time.Second}).DialContext}}
	call := func(method, path, token string) (int, http.Header, string) {
		t.Helper()
		var body io.Reader
		if method == "POST" {
			body = strings.NewReader(`{"hash": "ffffffff"}`)
		}
		req, _ := http.NewRequest(method, base+path, body)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, string(b)
	}

	for _, p := range []string{"/healthz", "/readyz", "/metrics"} {
		if code, _, body := call("GET", p, ""); code != 200 {
			t.Errorf("GET %s without a token: %d %s; want 200", p, code, body)
		}
	}
	for _, e := range []struct {
		method, path string
		ok           int // with the right token
	}{{"GET", "/status", 200}, {"GET", "/policy/history", 200}, {"POST", "/policy/rollback", 404}} {
		if code, hdr, body := call(e.method, e.path, ""); code != 401 || !strings.HasPrefix(hdr.Get("WWW-Authenticate"), "Bearer") {
			t.Errorf("%s %s without a token: %d %q %s; want 401 with a Bearer challenge", e.method, e.path, code, hdr.Get("WWW-Authenticate"), body)
		}
		if code, _, body := call(e.method, e.path, "wrong-token"); code != 401 {
			t.Errorf("%s %s with a wrong token: %d %s; want 401", e.method, e.path, code, body)
		}
		// The rollback names an unknown hash: 404 shows the request got
		// past the guard to the handler.
		if code, _, body := call(e.method, e.path, "first-admin-token"); code != e.ok {
			t.Errorf("%s %s with the token: %d %s; want %d", e.method, e.path, code, body, e.ok)
		}
	}
	var st admin.StatusJSON
	_, _, body := call("GET", "/status", "first-admin-token")
	if err := json.Unmarshal([]byte(body), &st); err != nil || st.Policy.Version != "v1" {
		t.Errorf("/status with the token: %v %s", err, body)
	}
	if !strings.Contains(log.String(), `"method":"POST","path":"/policy/rollback","peer":"`+ip.String()+`:`) {
		t.Errorf("the refused rollback from %s is not logged:\n%s", ip, log.String())
	}

	// A rotated token: in effect within a second, without a reload.
	if err := os.WriteFile(tokenFile, []byte("second-admin-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var code int
	if !testsupport.Poll(5*time.Second, func() bool {
		code, _, _ = call("GET", "/status", "second-admin-token")
		return code == 200
	}) {
		t.Fatalf("the rotated token is still refused (%d) after 5s", code)
	}
	if code, _, _ := call("GET", "/status", "first-admin-token"); code != 401 {
		t.Errorf("the old token after rotation: %d; want 401", code)
	}
}
