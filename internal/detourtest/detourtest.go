// Package detourtest runs a real detour in-process for tests, benchmarks and
// demos: the proxy listener on a loopback port, a CA in a temporary
// directory, a policy file that can be rewritten to exercise hot reload, and
// fake vendors on loopback TLS that the policy's upstreams point at.
//
// It is the reusable harness of detour's end-to-end tests and latency
// benchmarks; it is not used by detour itself.
package detourtest

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/detour-proxy/detour/internal/chain"
	"github.com/detour-proxy/detour/internal/fakevendor"
	"github.com/detour-proxy/detour/internal/mitm"
	"github.com/detour-proxy/detour/internal/testsupport"
	"github.com/detour-proxy/detour/proxy"
	"github.com/detour-proxy/detour/rewrite"
)

// Harness is a running detour.
type Harness struct {
	// ProxyURL is detour's address as an HTTPS_PROXY value.
	ProxyURL *url.URL
	// CA is detour's CA; CAPool holds only it.
	CA     *mitm.CA
	CAPool *x509.CertPool
	// Dir is the temporary directory of the policy and CA files.
	Dir string
	// PolicyPath is the watched policy file.
	PolicyPath string
	// AdminURL is the admin listener's base URL (http://127.0.0.1:port): a
	// loopback port of its own, never the policy's admin_listen.
	AdminURL *url.URL

	log     *SyncBuffer
	mu      sync.Mutex
	records []*chain.Record
	ids     []string // request ids of the answers Client() received
	notify  chan struct{}
}

// Start writes policyJSON to a policy file in a temporary directory (with
// "ca" pointing into it, at a CA shared by the test binary's harnesses,
// unless the policy sets one) and runs detour on it
// until the test ends. Each of with may change the options detour is
// started with (a listener handed over, as `detour run` does).
func Start(tb testing.TB, policyJSON string, with ...func(*proxy.Options)) *Harness {
	tb.Helper()
	return StartWith(tb, policyJSON, Options{With: with})
}

// StartWith is Start with the runner's clock and random source set.
func StartWith(tb testing.TB, policyJSON string, opts Options) *Harness {
	tb.Helper()
	dir := tb.TempDir()
	h := &Harness{Dir: dir, PolicyPath: filepath.Join(dir, "policy.json"), log: &SyncBuffer{}, notify: make(chan struct{}, 1)}
	h.WritePolicy(tb, policyJSON)
	seedCA(tb, dir, policyJSON)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	adminLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	ready := make(chan *mitm.CA, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	po := proxy.Options{
		PolicyPath:    h.PolicyPath,
		Stderr:        h.log,
		Listener:      ln,
		AdminListener: adminLn,
		Ready:         func(_ net.Addr, ca *mitm.CA) { ready <- ca },
		OnRecord:      h.record,
		Now:           opts.Now,
		Rand:          opts.Rand,
	}
	for _, w := range opts.With {
		w(&po)
	}
	go func() { done <- proxy.Serve(ctx, po) }()
	select {
	case ca := <-ready:
		h.CA = ca
	case err := <-done:
		tb.Fatalf("detour did not start: %v\nlog:\n%s", err, h.log.String())
	case <-time.After(10 * time.Second):
		tb.Fatal("detour did not start within 10s")
	}
	tb.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				tb.Errorf("detour exited with %v", err)
			}
		case <-time.After(proxy.DrainTimeout + 5*time.Second):
			tb.Error("detour did not stop")
		}
	})
	h.CAPool = x509.NewCertPool()
	h.CAPool.AddCert(h.CA.Cert)
	h.ProxyURL = &url.URL{Scheme: "http", Host: ln.Addr().String()}
	h.AdminURL = &url.URL{Scheme: "http", Host: adminLn.Addr().String()}
	return h
}

// WritePolicy replaces the policy file atomically (write + rename), the way
// editors and the kubelet do. A policy without "ca" gets one in Dir.
func (h *Harness) WritePolicy(tb testing.TB, policyJSON string) {
	tb.Helper()
	data := []byte(policyJSON)
	var probe map[string]json.RawMessage
	if json.Unmarshal(data, &probe) == nil {
		if _, ok := probe["ca"]; !ok {
			ca, _ := json.Marshal(map[string]string{"cert_file": filepath.Join(h.Dir, "ca.pem"), "key_file": filepath.Join(h.Dir, "ca-key.pem")})
			probe["ca"] = ca
			data, _ = json.MarshalIndent(probe, "", "  ")
		}
	}
	tmp := h.PolicyPath + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		tb.Fatal(err)
	}
	if err := os.Rename(tmp, h.PolicyPath); err != nil {
		tb.Fatal(err)
	}
}

func (h *Harness) record(r *chain.Record) {
	h.mu.Lock()
	h.records = append(h.records, r)
	h.mu.Unlock()
	select {
	case h.notify <- struct{}{}:
	default:
	}
}

// Records returns the finished requests' records so far.
func (h *Harness) Records() []*chain.Record {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]*chain.Record(nil), h.records...)
}

// WaitRecords waits until at least n requests have finished (a stream's
// record is written after its last event) and returns them.
func (h *Harness) WaitRecords(tb testing.TB, n int) []*chain.Record {
	tb.Helper()
	deadline := time.After(10 * time.Second)
	for {
		if rs := h.Records(); len(rs) >= n {
			return rs
		}
		select {
		case <-h.notify:
		case <-time.After(20 * time.Millisecond):
		case <-deadline:
			tb.Fatalf("only %d of %d request records after 10s\nlog:\n%s", len(h.Records()), n, h.log.String())
		}
	}
}

// Log returns everything detour logged so far.
func (h *Harness) Log() string { return h.log.String() }

// LogLines returns the JSON log lines whose "message" is msg.
func (h *Harness) LogLines(msg string) []map[string]any {
	var out []map[string]any
	for _, line := range bytes.Split([]byte(h.log.String()), []byte("\n")) {
		var m map[string]any
		if json.Unmarshal(line, &m) == nil && m["message"] == msg {
			out = append(out, m)
		}
	}
	return out
}

// WaitLogLine waits until a JSON log line whose "message" is msg satisfies
// match, and returns it. Tunnels, for one, are logged when they close.
func (h *Harness) WaitLogLine(tb testing.TB, msg string, match func(map[string]any) bool) map[string]any {
	tb.Helper()
	deadline := time.After(10 * time.Second)
	for {
		for _, l := range h.LogLines(msg) {
			if match(l) {
				return l
			}
		}
		select {
		case <-time.After(10 * time.Millisecond):
		case <-deadline:
			tb.Fatalf("no %q log line as wanted after 10s\nlog:\n%s", msg, h.log.String())
		}
	}
}

// Transport returns an app-side transport that uses detour as its
// HTTPS_PROXY and trusts detour's CA (and, when extra is given, those
// certificates too), like an unmodified app configured by `detour run`.
func (h *Harness) Transport(extra ...*x509.Certificate) *http.Transport {
	pool := h.CAPool.Clone()
	for _, c := range extra {
		pool.AddCert(c)
	}
	return &http.Transport{
		Proxy:               http.ProxyURL(h.ProxyURL),
		TLSClientConfig:     &tls.Config{RootCAs: pool, CurvePreferences: testCurves},
		ForceAttemptHTTP2:   false,
		MaxIdleConnsPerHost: 16,
	}
}

// Client returns an http.Client over Transport() that remembers the
// request id of every answer (RequestIDs, LastRequestID).
func (h *Harness) Client(extra ...*x509.Certificate) *http.Client {
	return &http.Client{Transport: idRecorder{base: h.Transport(extra...), h: h}}
}

// Vendor is a fake vendor served over TLS on loopback.
type Vendor struct {
	*fakevendor.Vendor
	Server *httptest.Server
	// CAFile is a PEM file of the server's certificate, for an upstream's
	// ca_file.
	CAFile string
}

// BaseURL is the URL an upstream of this vendor's shape uses as base_url.
func (v *Vendor) BaseURL() string {
	if v.Vendor.Shape().Vendor() == rewrite.OpenAI {
		return v.Server.URL + "/v1"
	}
	return v.Server.URL
}

// NewVendor starts a fake vendor of shape that answers "Hello from <name>.".
func NewVendor(tb testing.TB, shape rewrite.Shape, name string) *Vendor {
	tb.Helper()
	return NewVendorWith(tb, shape, fakevendor.Options{Name: name})
}

// NewVendorWith starts a fake vendor of shape with opts (a clock, Gemini
// ids, strict validation); opts.Name names it.
func NewVendorWith(tb testing.TB, shape rewrite.Shape, opts fakevendor.Options) *Vendor {
	tb.Helper()
	return NewVendorAround(tb, shape, opts, nil)
}

// NewVendorAround is NewVendorWith with the fake's handler wrapped by wrap
// (nil: none), e.g. to move a virtual clock on every request the fake
// serves, as an upstream's latency.
func NewVendorAround(tb testing.TB, shape rewrite.Shape, opts fakevendor.Options, wrap func(http.Handler) http.Handler) *Vendor {
	tb.Helper()
	fv := fakevendor.New(shape, opts)
	var h http.Handler = fv
	if wrap != nil {
		h = wrap(fv)
	}
	srv := httptest.NewUnstartedServer(h)
	srv.EnableHTTP2 = true
	StartTLS(srv)
	tb.Cleanup(srv.Close)
	return &Vendor{Vendor: fv, Server: srv, CAFile: vendorCAFile(tb)}
}

// vendorCAFiles holds, for each running test, the PEM file of
// LocalhostCert its vendors' CAFile names: every fake vendor serves that
// one certificate, so a test with several writes it once, and spares the
// temporary directory per vendor (under -race the file system calls are
// a noticeable part of starting a vendor).
var vendorCAFiles sync.Map // testing.TB → string

func vendorCAFile(tb testing.TB) string {
	tb.Helper()
	if f, ok := vendorCAFiles.Load(tb); ok {
		return f.(string)
	}
	caFile := filepath.Join(tb.TempDir(), "vendor-ca.pem")
	pemData := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: LocalhostCert().Leaf.Raw})
	if err := os.WriteFile(caFile, pemData, 0o644); err != nil {
		tb.Fatal(err)
	}
	if f, loaded := vendorCAFiles.LoadOrStore(tb, caFile); loaded {
		return f.(string) // a vendor started alongside wrote its file first
	}
	tb.Cleanup(func() { vendorCAFiles.Delete(tb) })
	return caFile
}

// SyncBuffer is a bytes.Buffer safe for concurrent writers and readers; it
// is testsupport.SyncBuffer, kept under this name for the tests that use it
// with the harness.
type SyncBuffer = testsupport.SyncBuffer
