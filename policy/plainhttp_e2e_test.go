package policy_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"

	"github.com/detour-proxy/detour/internal/chain"
	"github.com/detour-proxy/detour/internal/fakevendor"
	"github.com/detour-proxy/detour/internal/health"
	"github.com/detour-proxy/detour/policy"
	"github.com/detour-proxy/detour/rewrite"
)

// TestPlainHTTPUpstreamOnANamedHost: with allow_plain_http a failing
// vendor falls over to a model server named by a cluster host name over
// plain HTTP. The name is not resolvable here, so the runner's dial hook
// (chain.Transports.Dial, where the proxy puts its own dialer) stands in
// for cluster DNS: it records the address asked for and connects to the
// plain-HTTP fake on loopback. Without allow_plain_http the same policy is
// refused.
func TestPlainHTTPUpstreamOnANamedHost(t *testing.T) {
	t.Parallel()
	primary := fakevendor.New(rewrite.OpenAI, fakevendor.Options{Name: "primary"})
	primarySrv := httptest.NewServer(primary)
	t.Cleanup(primarySrv.Close)
	vllm := fakevendor.New(rewrite.OpenAI, fakevendor.Options{Name: "vllm"})
	vllmSrv := httptest.NewServer(vllm) // plain HTTP, as vLLM serves it
	t.Cleanup(vllmSrv.Close)
	const clusterAddr = "vllm.models.svc:8000"

	policyJSON := func(allow string) string {
		return fmt.Sprintf(`{
  "upstreams": {
    "primary": {"shape": "openai", "base_url": "%s/v1", "auth": {"from": "client"}},
    "vllm":    {"shape": "openai", "base_url": "http://%s/v1", "auth": {"none": true}%s}
  },
  "routes": [{"name": "chat", "match": {"host": "api.openai.com", "path": "/v1/chat/completions"}, "chain": ["primary", "vllm"]}]
}`, primarySrv.URL, clusterAddr, allow)
	}
	opts := policy.Options{BaseDir: t.TempDir(), DefaultCADir: t.TempDir()}
	if _, err := policy.Compile("policy.json", []byte(policyJSON("")), opts); err == nil ||
		!strings.Contains(err.Error(), "upstreams.vllm.base_url: plain http is allowed only to loopback hosts") {
		t.Fatalf("without allow_plain_http: err = %v; want the loopback-only refusal", err)
	}
	pol, err := policy.Compile("policy.json", []byte(policyJSON(`, "allow_plain_http": true`)), opts)
	if err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	var dialed []string
	d := &net.Dialer{}
	runner := &chain.Runner{
		Policy: func() *policy.Compiled { return pol },
		Health: health.New(),
		Log:    zerolog.New(io.Discard),
		Transports: &chain.Transports{Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
			mu.Lock()
			dialed = append(dialed, addr)
			mu.Unlock()
			if addr == clusterAddr {
				addr = vllmSrv.Listener.Addr().String()
			}
			return d.DialContext(ctx, network, addr)
		}},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runner.Serve(w, r, chain.Target{Host: "api.openai.com", Mode: "base_url"})
	}))
	t.Cleanup(srv.Close)

	primary.Script(fakevendor.Fault{Kind: fakevendor.Status, Status: 503, Class: fakevendor.ClassOverloaded})
	req, _ := http.NewRequest("POST", srv.URL+"/v1/chat/completions",
		strings.NewReader(`{"model": "llama-3.1-8b", "messages": [{"role": "user", "content": "hi"}]}`))
	req.Header.Set("Authorization", "Bearer sk-app")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get(chain.HeaderAnsweredBy) != "vllm" || !strings.Contains(string(body), "Hello from vllm") {
		t.Fatalf("%d answered by %q: %s; want 200 from vllm", resp.StatusCode, resp.Header.Get(chain.HeaderAnsweredBy), body)
	}
	if vllm.Calls() != 1 {
		t.Errorf("the plain-HTTP fake got %d calls; want 1", vllm.Calls())
	}
	if got := vllm.Requests()[0].Header.Get("Authorization"); got != "" {
		t.Errorf("the app's key reached the auth-none upstream: %q", got)
	}
	mu.Lock()
	defer mu.Unlock()
	found := false
	for _, a := range dialed {
		found = found || a == clusterAddr
	}
	if !found {
		t.Errorf("dialled %q; want %s among them", dialed, clusterAddr)
	}
}
