package proxy_test

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/detour-proxy/detour/internal/detourtest"
	"github.com/detour-proxy/detour/rewrite"
)

// BenchmarkTracingLatency measures what tracing adds to one non-streaming
// call (c=1, warm connections): three detours in the same run, tracing off,
// on with every request sampled and the collector up, and on with the
// collector down (every export refused), against a direct call to the fake
// vendor. Each b.N is one round in which every variant makes one call, in
// rotating order. Run:
//
//	go test -run='^$' -bench=TracingLatency -benchtime=3000x ./proxy/
func BenchmarkTracingLatency(b *testing.B) {
	vendor := detourtest.NewVendor(b, rewrite.OpenAI, "bench")
	vendorPool := x509.NewCertPool()
	vendorPool.AddCert(vendor.Server.Certificate())
	direct := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: vendorPool}}}

	// A collector that takes every export and keeps nothing.
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	b.Cleanup(collector.Close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close()

	start := func(telemetry string) *http.Client {
		h := detourtest.Start(b, fmt.Sprintf(`{
  "upstreams": {"v": {"shape": "openai", "base_url": %q, "ca_file": %q, "auth": {"from": "client"}}},
  "routes": [{"name": "r", "match": {"host": "api.openai.com", "path": "/v1/chat/completions"}, "chain": ["v"]}],
  "log": {"level": "warn"}%s
}`, vendor.BaseURL(), vendor.CAFile, telemetry))
		return h.Client()
	}
	off := start("")
	up := start(fmt.Sprintf(`, "telemetry": {"otlp": {"endpoint": %q, "sample_ratio": 1}}`, collector.URL))
	down := start(fmt.Sprintf(`, "telemetry": {"otlp": {"endpoint": %q, "sample_ratio": 1}}`, dead))
	const u = "https://api.openai.com/v1/chat/completions"
	fns := map[string]func() error{
		"direct": func() error { return post(direct, vendor.Server.URL+"/v1/chat/completions") },
		"off":    func() error { return post(off, u) },
		"up":     func() error { return post(up, u) },
		"down":   func() error { return post(down, u) },
	}
	if _, err := detourtest.Interleave(50, fns); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	lat, err := detourtest.Interleave(b.N, fns)
	if err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	added := func(name string, p float64) float64 {
		return float64((lat[name].Percentile(p) - lat["direct"].Percentile(p)).Microseconds())
	}
	for _, n := range []string{"off", "up", "down"} {
		b.ReportMetric(added(n, 50), n+"-added-p50-µs")
		b.ReportMetric(added(n, 99), n+"-added-p99-µs")
	}
	for _, n := range []string{"up", "down"} {
		for _, p := range []float64{50, 99} {
			if o := added("off", p); o > 0 {
				b.ReportMetric(added(n, p)/o, fmt.Sprintf("%s/off-p%.0f", n, p))
			}
		}
	}
	for _, n := range []string{"direct", "off", "up", "down"} {
		b.Logf("%-6s %s", n, lat[n].Summary())
	}
}
