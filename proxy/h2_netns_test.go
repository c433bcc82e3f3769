//go:build linux

package proxy_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/detour-proxy/detour/internal/detourtest"
	fv "github.com/detour-proxy/detour/internal/fakevendor"
	"github.com/detour-proxy/detour/internal/redirect"
	"github.com/detour-proxy/detour/proxy"
	"github.com/detour-proxy/detour/rewrite"
)

// dialInNamespace dials from inside network namespace ns: the socket is
// made on a thread moved into ns, so its connection is the namespace's and
// its redirect rules apply to it, while the test (and its fake vendors and
// gates) stays in this process.
func dialInNamespace(ns string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		type dialed struct {
			c   net.Conn
			err error
		}
		done := make(chan dialed, 1)
		go func() {
			runtime.LockOSThread()
			// The thread is given back only once it is back in this
			// process's namespace; otherwise it ends with the goroutine.
			home, err := os.Open("/proc/thread-self/ns/net")
			if err != nil {
				done <- dialed{err: err}
				return
			}
			defer home.Close()
			target, err := os.Open("/run/netns/" + ns)
			if err != nil {
				runtime.UnlockOSThread()
				done <- dialed{err: err}
				return
			}
			defer target.Close()
			if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
				runtime.UnlockOSThread()
				done <- dialed{err: fmt.Errorf("setns %s: %w", ns, err)}
				return
			}
			var d net.Dialer
			c, err := d.DialContext(ctx, network, addr)
			if unix.Setns(int(home.Fd()), unix.CLONE_NEWNET) == nil {
				runtime.UnlockOSThread()
			}
			done <- dialed{c, err}
		}()
		r := <-done
		return r.c, r.err
	}
}

// streamGate answers stream requests with gatedStream, waiting on the
// gate in force, and everything else with v.
func streamGate(v http.Handler, gate *atomic.Pointer[chan struct{}]) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if bytes.Contains(body, []byte(`"stream":true`)) {
			gatedStream(*gate.Load()).ServeHTTP(w, r)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		v.ServeHTTP(w, r)
	})
}

// TestH2AndHTTP1InTransparentMode: apps that honour no proxy variable,
// redirected by the kernel to detour's transparent listener, are
// intercepted over HTTP/2 as over HTTP/1.1: an answer, a stream delivered
// event by event, and a failover, each with Go's HTTP/1.1 client, Go's
// HTTP/2-only client and curl both ways, all dialling from inside a network
// namespace the test creates. Root only, as the other namespace tests.
func TestH2AndHTTP1InTransparentMode(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipped: needs root to create a network namespace and program nftables in it (CI runs as root)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("skipped: ip is not installed (.ci/run installs iproute2)")
	}
	hostIP, ns := vethPair(t)
	nsFile, err := os.Open("/run/netns/" + ns)
	if err != nil {
		t.Fatal(err)
	}
	defer nsFile.Close()
	if _, err := redirect.Show(int(nsFile.Fd())); err != nil {
		t.Skipf("skipped: nf_tables over netlink is not available here: %v", err)
	}

	dir := t.TempDir()
	vendorCert, vendorCA := testCertificate(t, dir, "vendor", []net.IP{net.ParseIP(hostIP)}, nil)
	primary := fv.New(rewrite.OpenAI, fv.Options{Name: "primary"})
	backup := fv.New(rewrite.OpenAI, fv.Options{Name: "backup"})
	var gate atomic.Pointer[chan struct{}]
	primaryURL := serveTLS(t, hostIP, streamGate(primary, &gate), vendorCert)
	backupURL := serveTLS(t, hostIP, backup, vendorCert)

	const mark = 0x1e8
	policyPath := filepath.Join(dir, "policy.json")
	pol := fmt.Sprintf(`{
  "admin_listen": "off",
  "ca": {"cert_file": "ca.pem", "key_file": "ca-key.pem"},
  "transparent": {"listen": "127.0.0.1:15001", "mark": %d},
  "upstreams": {
    "primary": {"shape": "openai", "base_url": %q, "auth": {"from": "client"}, "ca_file": %q},
    "backup": {"shape": "openai", "base_url": %q, "auth": {"from": "client"}, "ca_file": %q}
  },
  "routes": [{"name": "chat", "match": {"host": "api.openai.com", "path": "/v1/chat/completions"}, "chain": ["primary", "backup"]}]
}`, mark, primaryURL+"/v1", vendorCA, backupURL+"/v1", vendorCA)
	if err := os.WriteFile(policyPath, []byte(pol), 0o644); err != nil {
		t.Fatal(err)
	}
	var log detourtest.SyncBuffer
	toPort, _ := startDetourInNamespace(t, ns, policyPath, &log)
	detourCA := filepath.Join(dir, "ca.pem")
	vendorPort := primaryURL[strings.LastIndex(primaryURL, ":")+1:]
	// Only the primary's port is redirected: the app dials it, as it would
	// dial the vendor's 443; detour's own calls carry the mark.
	redirectCmd(t, ns, "install", "--to-port", toPort, "--ports", vendorPort, "--exclude-mark", strconv.Itoa(mark))

	caPEM, err := os.ReadFile(detourCA)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	vendorAddr := net.JoinHostPort(hostIP, vendorPort)
	chatURL := "https://api.openai.com:" + vendorPort + "/v1/chat/completions"
	way := h2Way{
		url: chatURL,
		transport: func() *http.Transport {
			// The app resolves api.openai.com to the vendor's address
			// and dials it; the kernel sends it to detour.
			dial := dialInNamespace(ns)
			return &http.Transport{
				TLSClientConfig: &tls.Config{RootCAs: pool},
				DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
					return dial(ctx, network, vendorAddr)
				},
			}
		},
		curl: func(flag string) []string {
			return []string{"ip", "netns", "exec", ns, "curl", flag, "--cacert", detourCA,
				"--resolve", "api.openai.com:" + vendorPort + ":" + hostIP, chatURL}
		},
		log: log.String,
	}

	calls := 0
	for _, c := range h2Clients {
		t.Run(c.name, func(t *testing.T) {
			c.skipUnavailable(t)
			calls += 3
			status, proto, body := c.post(t, way, smallChat, nil)
			if status != http.StatusOK || proto != c.proto {
				t.Fatalf("answer: %d over %s; want 200 over %s\n%s", status, proto, c.proto, body)
			}
			if got := messageText(t, body); got != "Hello from primary." {
				t.Errorf("answer %q; want the primary's", got)
			}

			got := make(chan struct{})
			gate.Store(&got)
			released := false
			status, proto, body = c.post(t, way, streamChat, func(l string) {
				if data, ok := strings.CutPrefix(l, "data: "); ok && data != "[DONE]" && !released && chunkContent(t, data) == "one" {
					released = true
					close(got)
				}
			})
			text, done := streamText(t, body)
			if status != http.StatusOK || proto != c.proto || !done || text != "one two" {
				t.Errorf("stream: %d over %s, text %q, [DONE] %v; want 200 over %s, \"one two\" (TOO-LATE means an event was held back), [DONE]\n%s",
					status, proto, text, done, c.proto, body)
			}

			// Rate limited, not out of quota: the primary is not cooled
			// down, and the next client's calls reach it again.
			primary.Script(fv.Fault{Kind: fv.Status, Status: 429, Class: fv.ClassRateLimit})
			status, proto, body = c.post(t, way, smallChat, nil)
			if status != http.StatusOK || proto != c.proto {
				t.Fatalf("failover: %d over %s; want 200 over %s\n%s", status, proto, c.proto, body)
			}
			if got := messageText(t, body); got != "Hello from backup." {
				t.Errorf("failover: answer %q; want the backup's", got)
			}
		})
	}
	lines := waitLogLines(t, &log, calls)
	if len(lines) != calls {
		t.Errorf("%d request log lines; want %d, one per call:\n%s", len(lines), calls, log.String())
	}
	for _, l := range lines {
		if l["mode"] != proxy.ModeTransparent || l["host"] != "api.openai.com" {
			t.Errorf("log line not of a transparent interception of api.openai.com: %v", l)
		}
	}
}
