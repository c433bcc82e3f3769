package proxy_test

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"

	"github.com/detour-proxy/detour/proxy/detourtest"
	"github.com/detour-proxy/detour/rewrite"
)

const benchBody = `{"model":"gpt-4o","messages":[{"role":"user","content":"Say hello."}]}`

func post(c *http.Client, u string) error {
	req, _ := http.NewRequest(http.MethodPost, u, strings.NewReader(benchBody))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer sk-bench")
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != 200 {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return nil
}

// BenchmarkAddedLatency measures what detour adds to one non-streaming call
// (c=1, warm connections, cached leaf), against two baselines in the same
// run: a direct call to the fake vendor, and a bare httputil.ReverseProxy
// with TLS on both sides. Each b.N is one round in which every variant makes
// one call, in rotating order. Run:
//
//	go test -run='^$' -bench=AddedLatency -benchtime=3000x ./proxy/
func BenchmarkAddedLatency(b *testing.B) {
	vendor := detourtest.NewVendor(b, rewrite.OpenAI, "bench")
	vendorPool := x509.NewCertPool()
	vendorPool.AddCert(vendor.Server.Certificate())

	// Direct: the app talks to the vendor itself.
	direct := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: vendorPool}}}

	// Bare reverse proxy with TLS on both sides.
	vu, _ := url.Parse(vendor.Server.URL)
	rp := httputil.NewSingleHostReverseProxy(vu)
	rp.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: vendorPool}, ForceAttemptHTTP2: true}
	rpSrv := httptest.NewTLSServer(rp)
	b.Cleanup(rpSrv.Close)
	rpPool := x509.NewCertPool()
	rpPool.AddCert(rpSrv.Certificate())
	viaRP := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: rpPool}}}

	// detour as HTTPS_PROXY, intercepting api.openai.com.
	h := detourtest.Start(b, fmt.Sprintf(`{
  "upstreams": {"v": {"shape": "openai", "base_url": %q, "ca_file": %q, "auth": {"from": "client"}}},
  "routes": [{"name": "r", "match": {"host": "api.openai.com", "path": "/v1/chat/completions"}, "chain": ["v"]}],
  "log": {"level": "warn"}
}`, vendor.BaseURL(), vendor.CAFile))
	viaDetour := h.Client()

	fns := map[string]func() error{
		"direct": func() error { return post(direct, vendor.Server.URL+"/v1/chat/completions") },
		"revprx": func() error { return post(viaRP, rpSrv.URL+"/v1/chat/completions") },
		"detour": func() error { return post(viaDetour, "https://api.openai.com/v1/chat/completions") },
	}
	// Warm every connection and the leaf cache.
	if _, err := detourtest.Interleave(50, fns); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	lat, err := detourtest.Interleave(b.N, fns)
	if err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	report := func(name string, p float64) float64 {
		return float64((lat[name].Percentile(p) - lat["direct"].Percentile(p)).Microseconds())
	}
	dp50, dp99 := report("detour", 50), report("detour", 99)
	rp50, rp99 := report("revprx", 50), report("revprx", 99)
	b.ReportMetric(float64(lat["direct"].Percentile(50).Microseconds()), "direct-p50-µs")
	b.ReportMetric(dp50, "detour-added-p50-µs")
	b.ReportMetric(dp99, "detour-added-p99-µs")
	b.ReportMetric(rp50, "revprx-added-p50-µs")
	b.ReportMetric(rp99, "revprx-added-p99-µs")
	if rp50 > 0 {
		b.ReportMetric(dp50/rp50, "detour/revprx-p50")
	}
	b.Logf("direct %s", lat["direct"].Summary())
	b.Logf("revprx %s", lat["revprx"].Summary())
	b.Logf("detour %s", lat["detour"].Summary())
}

// BenchmarkFirstRequestToNewHost measures the cost of the first request to a
// host detour has not signed a leaf for yet (CONNECT, leaf signing, TLS
// handshake, request) against a new connection to a host whose leaf is
// cached (the same minus signing). Run:
//
//	go test -run='^$' -bench=NewHost -benchtime=200x ./proxy/
func BenchmarkFirstRequestToNewHost(b *testing.B) {
	vendor := detourtest.NewVendor(b, rewrite.OpenAI, "bench")
	const hosts = 1000
	var routes []string
	for i := 0; i < hosts; i++ {
		routes = append(routes, fmt.Sprintf(`{"name": "r%d", "match": {"host": "h%d.example.test"}, "shape": "openai", "chain": ["v"]}`, i, i))
	}
	h := detourtest.Start(b, fmt.Sprintf(`{
  "upstreams": {"v": {"shape": "openai", "base_url": %q, "ca_file": %q, "auth": {"from": "client"}}},
  "routes": [%s],
  "log": {"level": "warn"}
}`, vendor.BaseURL(), vendor.CAFile, strings.Join(routes, ",")))
	if b.N > hosts-1 {
		b.Fatalf("at most %d iterations (one new host each)", hosts-1)
	}
	newConn := func(host string) error {
		c := &http.Client{Transport: h.Transport()}
		defer c.CloseIdleConnections()
		return post(c, "https://"+host+"/v1/chat/completions")
	}
	if err := newConn("h0.example.test"); err != nil {
		b.Fatal(err)
	}
	var fresh, cached detourtest.Latencies
	b.ResetTimer()
	for i := 1; i <= b.N; i++ {
		for _, step := range []struct {
			host string
			into *detourtest.Latencies
		}{{fmt.Sprintf("h%d.example.test", i), &fresh}, {"h0.example.test", &cached}} {
			l, err := detourtest.Interleave(1, map[string]func() error{"x": func() error { return newConn(step.host) }})
			if err != nil {
				b.Fatal(err)
			}
			*step.into = append(*step.into, l["x"]...)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(fresh.Percentile(50).Microseconds()), "new-host-p50-µs")
	b.ReportMetric(float64(cached.Percentile(50).Microseconds()), "cached-leaf-p50-µs")
	b.ReportMetric(float64((fresh.Percentile(50) - cached.Percentile(50)).Microseconds()), "signing-added-p50-µs")
}
