package chain_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/detour-proxy/detour/internal/chain"
	"github.com/detour-proxy/detour/internal/detourtest"
	"github.com/detour-proxy/detour/rewrite"
)

// TestPlainPassthroughStaysPlainHTTP: a request no route takes on a plain
// HTTP connection (transparent mode, port 80) is passed on in plain HTTP
// to the port the app dialled, as the app sent it. Passed on as HTTPS it
// would meet a plain HTTP server with a TLS handshake and fail with 502.
func TestPlainPassthroughStaysPlainHTTP(t *testing.T) {
	t.Parallel()
	var seen struct {
		sync.Mutex
		host, path string
	}
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.Lock()
		seen.host, seen.path = r.Host, r.URL.Path
		seen.Unlock()
		_, _ = io.WriteString(w, "origin's own page")
	}))
	t.Cleanup(origin.Close)
	toOrigin := &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, origin.Listener.Addr().String())
	}}
	t.Cleanup(toOrigin.CloseIdleConnections)

	a := detourtest.NewVendor(t, rewrite.OpenAI, "a")
	pol := openaiPolicy([]string{upstreamJSON("a", a, "")}, `["a"]`, "")
	for _, tc := range []struct{ port, wantHost string }{
		{"80", "api.openai.com"},
		{"8080", "api.openai.com:8080"},
	} {
		t.Run(tc.port, func(t *testing.T) {
			var cr *chain.Runner
			buildRunner(t, "api.openai.com", pol, func(c *chain.Runner) { c.Passthrough, cr = toOrigin, c })
			req := httptest.NewRequest(http.MethodGet, "http://api.openai.com/v1/models", nil)
			w := httptest.NewRecorder()
			cr.Serve(w, req, chain.Target{Host: "api.openai.com", Port: tc.port, Mode: "transparent", Plain: true})
			if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "origin's own page") {
				t.Fatalf("status %d body %q; want the origin's page over plain HTTP", w.Code, w.Body.String())
			}
			seen.Lock()
			defer seen.Unlock()
			if seen.host != tc.wantHost || seen.path != "/v1/models" {
				t.Errorf("origin saw host %q path %q; want %q /v1/models", seen.host, seen.path, tc.wantHost)
			}
			if a.Calls() != 0 {
				t.Errorf("upstream got %d calls; an unrouted GET is not the chain's", a.Calls())
			}
		})
	}
}
