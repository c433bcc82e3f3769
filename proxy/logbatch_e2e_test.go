package proxy_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/detour-proxy/detour/internal/fakevendor"
	"github.com/detour-proxy/detour/internal/mitm"
	"github.com/detour-proxy/detour/internal/testsupport"
	"github.com/detour-proxy/detour/proxy"
	"github.com/detour-proxy/detour/rewrite"
)

// TestBatchedLogReachesThePipe: with BatchLog and a pipe for Stderr (as
// detour serve runs), each request's line reaches the pipe by itself,
// after the lines logged before it, and the last ones when Serve returns.
func TestBatchedLogReachesThePipe(t *testing.T) {
	t.Parallel()
	vsrv := httptest.NewServer(fakevendor.New(rewrite.OpenAI, fakevendor.Options{Name: "batch"}))
	t.Cleanup(vsrv.Close)
	dir := t.TempDir()
	pol := fmt.Sprintf(`{
  "ca": {"cert_file": %q, "key_file": %q},
  "upstreams": {"v": {"shape": "openai", "base_url": "%s/v1", "auth": {"from": "client"}}},
  "routes": [{"name": "r", "match": {"host": "api.openai.com", "path": "/v1/chat/completions"}, "chain": ["v"]}]
}`, dir+"/ca.pem", dir+"/ca-key.pem", vsrv.URL)
	if err := os.WriteFile(dir+"/policy.json", []byte(pol), 0o600); err != nil {
		t.Fatal(err)
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	var log testsupport.SyncBuffer
	copied := make(chan struct{})
	go func() { _, _ = io.Copy(&log, pr); close(copied) }()

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	adminLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready, done := make(chan struct{}), make(chan error, 1)
	go func() {
		done <- proxy.Serve(ctx, proxy.Options{PolicyPath: dir + "/policy.json", Stderr: pw, BatchLog: true, Listener: ln, AdminListener: adminLn,
			Ready: func(net.Addr, *mitm.CA) { close(ready) }})
	}()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("detour did not start: %v", err)
	}
	post := func() {
		req, _ := http.NewRequest(http.MethodPost, "http://"+ln.Addr().String()+"/openai/v1/chat/completions",
			strings.NewReader(`{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("Authorization", "Bearer sk-test")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
	}
	post()
	// Nothing flushes it but the batch's own timer.
	log.WaitFor(t, 10*time.Second, `"message":"request"`)
	listening := strings.Index(log.String(), `"message":"detour is listening"`)
	if first := strings.Index(log.String(), `"message":"request"`); listening < 0 || listening > first {
		t.Fatalf("the listening line is not before the request's:\n%s", log.String())
	}
	for range 5 {
		post()
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	pw.Close()
	<-copied
	if n := strings.Count(log.String(), `"message":"request"`); n != 6 {
		t.Fatalf("%d request lines once Serve returned; want 6:\n%s", n, log.String())
	}
}
