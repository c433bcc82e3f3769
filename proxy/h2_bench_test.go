package proxy_test

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"testing"

	"github.com/detour-proxy/detour/internal/detourtest"
	"github.com/detour-proxy/detour/rewrite"
)

// BenchmarkInterceptedH2VsHTTP1 measures the latency detour adds to one
// non-streaming call (c=1, warm connections, cached leaf) when the app
// speaks HTTP/2 to the intercepted host against when it speaks HTTP/1.1,
// in the same run: each against a direct call to the fake vendor over the
// same protocol. Each b.N is one round in which every variant makes one
// call, in rotating order. Reported: p50 and p99 of each variant and of
// each added latency, in µs, and the ratios h2/http1 of the added latency
// and of the whole call. Run:
//
//	go test -run='^$' -bench=InterceptedH2VsHTTP1 -benchtime=3000x ./proxy/
func BenchmarkInterceptedH2VsHTTP1(b *testing.B) {
	vendor := detourtest.NewVendor(b, rewrite.OpenAI, "bench")
	vendorPool := x509.NewCertPool()
	vendorPool.AddCert(vendor.Server.Certificate())
	direct1 := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: vendorPool}}}
	direct2 := &http.Client{Transport: h2Only(&http.Transport{TLSClientConfig: &tls.Config{RootCAs: vendorPool}})}

	h := detourtest.Start(b, fmt.Sprintf(`{
  "upstreams": {"v": {"shape": "openai", "base_url": %q, "ca_file": %q, "auth": {"from": "client"}}},
  "routes": [{"name": "r", "match": {"host": "api.openai.com", "path": "/v1/chat/completions"}, "chain": ["v"]}],
  "log": {"level": "warn"}
}`, vendor.BaseURL(), vendor.CAFile))
	detour1 := &http.Client{Transport: h.Transport()}
	detour2 := &http.Client{Transport: h2Only(h.Transport())}

	const intercepted = "https://api.openai.com/v1/chat/completions"
	vendorURL := vendor.Server.URL + "/v1/chat/completions"
	fns := map[string]func() error{
		"direct-http1": func() error { return post(direct1, vendorURL) },
		"direct-h2":    func() error { return post(direct2, vendorURL) },
		"detour-http1": func() error { return post(detour1, intercepted) },
		"detour-h2":    func() error { return post(detour2, intercepted) },
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
	us := func(name string, p float64) float64 { return float64(lat[name].Percentile(p).Nanoseconds()) / 1e3 }
	for _, p := range []float64{50, 99} {
		added1 := us("detour-http1", p) - us("direct-http1", p)
		added2 := us("detour-h2", p) - us("direct-h2", p)
		for _, name := range []string{"direct-http1", "direct-h2", "detour-http1", "detour-h2"} {
			b.ReportMetric(us(name, p), fmt.Sprintf("%s-p%.0f-µs", name, p))
		}
		b.ReportMetric(added1, fmt.Sprintf("added-http1-p%.0f-µs", p))
		b.ReportMetric(added2, fmt.Sprintf("added-h2-p%.0f-µs", p))
		if added1 > 0 {
			b.ReportMetric(added2/added1, fmt.Sprintf("added-h2/http1-p%.0f", p))
		}
		b.ReportMetric(us("detour-h2", p)/us("detour-http1", p), fmt.Sprintf("detour-h2/http1-p%.0f", p))
	}
	for _, name := range []string{"direct-http1", "direct-h2", "detour-http1", "detour-h2"} {
		b.Logf("%s %s", name, lat[name].Summary())
	}
}
