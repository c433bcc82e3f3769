//go:build linux

package proxy_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/detour-proxy/detour/internal/detourtest"
	fv "github.com/detour-proxy/detour/internal/fakevendor"
	"github.com/detour-proxy/detour/internal/testsupport"
	"github.com/detour-proxy/detour/rewrite"
)

// BenchmarkTransparentVsExplicitVsDirect measures the latency detour adds
// in transparent mode against explicit-proxy mode and a direct call, in the
// same run, at concurrency 1: a client inside a network namespace (this
// binary, as TestTransparentNetnsHelper) calls a fake vendor across a veth
// pair directly, through detour as HTTPS_PROXY, and through the kernel's
// redirect to detour's transparent listener, in interleaved rounds over
// kept-alive connections, and again with a new connection per call.
// Reported: p50 and p99 of each, in µs. Root only.
func BenchmarkTransparentVsExplicitVsDirect(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("skipped: needs root to create a network namespace and program nftables in it")
	}
	for _, tool := range []string{"ip"} {
		if _, err := exec.LookPath(tool); err != nil {
			b.Skipf("skipped: %s is not installed", tool)
		}
	}
	hostIP, ns := benchNamespace(b)
	pub := b.TempDir()
	vendorCert, vendorCA := testCertificate(b, pub, "vendor", []net.IP{net.ParseIP(hostIP)}, nil)
	vendorURL := serveTLS(b, hostIP, fv.New(rewrite.OpenAI, fv.Options{Name: "vendor"}), vendorCert)

	dir := b.TempDir()
	policyPath := filepath.Join(dir, "policy.json")
	pol := fmt.Sprintf(`{
  "admin_listen": "off",
  "ca": {"cert_file": "ca.pem", "key_file": "ca-key.pem"},
  "transparent": {"listen": "127.0.0.1:15001", "mark": 487},
  "upstreams": {"vendor": {"shape": "openai", "base_url": %q, "auth": {"from": "client"}, "ca_file": %q}},
  "routes": [{"name": "chat", "match": {"host": "api.openai.com", "path": "/v1/chat/completions"}, "chain": ["vendor"]}]
}`, vendorURL+"/v1", vendorCA)
	if err := os.WriteFile(policyPath, []byte(pol), 0o644); err != nil {
		b.Fatal(err)
	}
	var log detourtest.SyncBuffer
	toPort, explicitPort := startDetourInNamespace(b, ns, policyPath, &log)
	// Only 443 is redirected: the intercepted call's original destination
	// is never dialled, and the direct call's port is not redirected.
	redirectCmd(b, ns, "install", "--to-port", toPort, "--ports", "443", "--exclude-mark", "487")

	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	cmd := exec.Command("ip", "netns", "exec", ns, exe, "-test.run=^TestTransparentNetnsHelper$")
	cmd.Env = testsupport.ChildEnv(helperEnv+"=latency",
		"DETOUR_LAT_ROUNDS="+strconv.Itoa(max(b.N, 50)),
		"DETOUR_LAT_DIRECT="+vendorURL+"/v1/chat/completions", "DETOUR_LAT_VENDOR_CA="+vendorCA,
		"DETOUR_LAT_DETOUR_CA="+filepath.Join(dir, "ca.pem"), "DETOUR_LAT_PROXY=http://127.0.0.1:"+explicitPort,
		"DETOUR_LAT_VENDOR_IP="+hostIP)
	out, err := cmd.Output()
	b.StopTimer()
	if err != nil {
		b.Fatalf("latency client: %v\n%s\ndetour's log:\n%s", err, out, log.String())
	}
	var res map[string]map[string]float64
	if err := json.Unmarshal(out[strings.LastIndex(string(out), "{\"direct"):], &res); err != nil {
		b.Fatalf("latency client said %q: %v", out, err)
	}
	for _, mode := range []string{"direct", "explicit", "transparent", "direct-new-conn", "explicit-new-conn", "transparent-new-conn"} {
		b.ReportMetric(res[mode]["p50"], mode+"-p50-µs")
		b.ReportMetric(res[mode]["p99"], mode+"-p99-µs")
	}
}

// measureLatency is the benchmark's client, run inside the namespace.
func measureLatency() {
	rounds, _ := strconv.Atoi(os.Getenv("DETOUR_LAT_ROUNDS"))
	pool := func(file string) *x509.CertPool {
		p := x509.NewCertPool()
		b, err := os.ReadFile(file)
		if err != nil || !p.AppendCertsFromPEM(b) {
			fmt.Fprintln(os.Stderr, "CA", file, err)
			os.Exit(1)
		}
		return p
	}
	vendorCA, detourCA := pool(os.Getenv("DETOUR_LAT_VENDOR_CA")), pool(os.Getenv("DETOUR_LAT_DETOUR_CA"))
	proxyURL, _ := url.Parse(os.Getenv("DETOUR_LAT_PROXY"))
	vendorIP := os.Getenv("DETOUR_LAT_VENDOR_IP")
	direct := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: vendorCA}}
	explicit := &http.Transport{Proxy: http.ProxyURL(proxyURL), TLSClientConfig: &tls.Config{RootCAs: detourCA}}
	// The app dials the vendor's address on 443, as a resolver would
	// have it; the kernel sends it to detour.
	transparent := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: detourCA},
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, net.JoinHostPort(vendorIP, "443"))
		}}
	// The same, with a new connection per call: the per-connection work
	// (CONNECT, or the original destination and the ClientHello peek, and
	// a TLS handshake with detour's leaf) is then in every call.
	explicitNew := explicit.Clone()
	explicitNew.DisableKeepAlives = true
	transparentNew := transparent.Clone()
	transparentNew.DisableKeepAlives = true
	directNew := direct.Clone()
	directNew.DisableKeepAlives = true
	call := func(rt http.RoundTripper, u string) func() error {
		return func() error {
			req, _ := http.NewRequest(http.MethodPost, u, strings.NewReader(`{"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}`))
			req.Header.Set("Authorization", "Bearer sk-bench")
			req.Header.Set("Content-Type", "application/json")
			resp, err := rt.RoundTrip(req)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			if _, err := io.Copy(io.Discard, resp.Body); err != nil {
				return err
			}
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("status %d", resp.StatusCode)
			}
			return nil
		}
	}
	fns := map[string]func() error{
		"direct":               call(direct, os.Getenv("DETOUR_LAT_DIRECT")),
		"explicit":             call(explicit, "https://api.openai.com/v1/chat/completions"),
		"transparent":          call(transparent, "https://api.openai.com/v1/chat/completions"),
		"direct-new-conn":      call(directNew, os.Getenv("DETOUR_LAT_DIRECT")),
		"explicit-new-conn":    call(explicitNew, "https://api.openai.com/v1/chat/completions"),
		"transparent-new-conn": call(transparentNew, "https://api.openai.com/v1/chat/completions"),
	}
	// Warm up: connections, leaf certificates, the vendor's first answer.
	if _, err := detourtest.Interleave(10, fns); err != nil {
		fmt.Fprintln(os.Stderr, "warm-up:", err)
		os.Exit(1)
	}
	lat, err := detourtest.Interleave(rounds, fns)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	res := map[string]map[string]float64{}
	for name, l := range lat {
		res[name] = map[string]float64{
			"p50": float64(l.Percentile(50).Nanoseconds()) / 1e3,
			"p99": float64(l.Percentile(99).Nanoseconds()) / 1e3,
		}
	}
	w := bufio.NewWriter(os.Stdout)
	_ = json.NewEncoder(w).Encode(res)
	_ = w.Flush()
}

// benchNamespace is vethPair for a benchmark, with its own names so that it
// never meets the tests' (addresses from 198.19.0.0/16, the upper half of
// the test range).
func benchNamespace(tb testing.TB) (hostIP, ns string) {
	return namedVethPair(tb, "detour-bench", "db", 19)
}
