package admin

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/detour-proxy/detour/internal/health"
	"github.com/detour-proxy/detour/internal/testsupport"
	"github.com/detour-proxy/detour/policy"
)

const testToken = "tok-0123456789-abcdefghij"

// guardedHandler is an admin handler whose policy has tokenFile as its
// admin.token_file ("" for none), with a settable clock and a log.
type guardedHandler struct {
	h     http.Handler
	store *policy.Store
	log   *testsupport.SyncBuffer
	mu    sync.Mutex
	now   time.Time
}

func newGuarded(t *testing.T, tokenFile string) *guardedHandler {
	t.Helper()
	c := &policy.Compiled{Version: "v1", Hash: "0123456789abcdef", Fingerprint: "fp1", Source: "/etc/detour/policy.json",
		Upstreams: map[string]*policy.Upstream{"primary": {Name: "primary"}},
		Admin:     policy.AdminPolicy{TokenFile: tokenFile}}
	g := &guardedHandler{store: policy.NewStore(c), log: &testsupport.SyncBuffer{}, now: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
	hr := health.New()
	g.h = NewHandler(Options{Store: g.store, Health: hr, Metrics: NewMetrics(g.store, hr),
		Log: zerolog.New(g.log).Level(zerolog.DebugLevel), Now: g.clock})
	return g
}

func (g *guardedHandler) clock() time.Time {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.now
}

func (g *guardedHandler) advance(d time.Duration) {
	g.mu.Lock()
	g.now = g.now.Add(d)
	g.mu.Unlock()
}

// call sends method path from peer (an ip:port) with an optional
// Authorization header, addressed to detour's pod IP as a client in the
// cluster would.
func (g *guardedHandler) call(t *testing.T, peer, method, path, authz string) (int, http.Header, string) {
	t.Helper()
	var body *strings.Reader
	if method == http.MethodPost {
		body = strings.NewReader(`{"hash": "01234567"}`)
	} else {
		body = strings.NewReader("")
	}
	req := httptest.NewRequest(method, "http://10.0.0.7:8788"+path, body)
	req.RemoteAddr = peer
	if authz != "" {
		req.Header.Set("Authorization", authz)
	}
	return do(t, g.h, req)
}

func writeToken(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "admin-token")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// guardedEndpoints are every endpoint that is not a probe or metrics.
var guardedEndpoints = []struct{ method, path string }{
	{"GET", "/status"}, {"GET", "/policy/history"}, {"POST", "/policy/rollback"},
}

func errorOf(t *testing.T, body string) string {
	t.Helper()
	var e errorJSON
	if err := json.Unmarshal([]byte(body), &e); err != nil || e.Error == "" {
		t.Fatalf("body %q is not a JSON error: %v", body, err)
	}
	return e.Error
}

// TestAdminRefusesRemotePeersWithoutToken: a peer on the pod network gets
// neither the status, the history nor a rollback when no admin token is
// configured, and is told what to do. Before the guard, all three answered
// 200 to anyone.
func TestAdminRefusesRemotePeersWithoutToken(t *testing.T) {
	t.Parallel()
	g := newGuarded(t, "")
	for _, peer := range []string{"10.1.2.3:50000", "[fd00::5]:50000", "192.0.2.9:1"} {
		for _, e := range guardedEndpoints {
			code, _, body := g.call(t, peer, e.method, e.path, "Bearer "+testToken)
			if code != http.StatusForbidden {
				t.Errorf("%s %s from %s: %d %s; want 403", e.method, e.path, peer, code, body)
				continue
			}
			if msg := errorOf(t, body); !strings.Contains(msg, "set admin.token_file in the policy and send Authorization: Bearer") {
				t.Errorf("%s %s: error %q does not say what to do", e.method, e.path, msg)
			}
		}
	}
	if ok, _ := g.store.Reloads(); ok != 0 {
		t.Errorf("%d rollbacks happened; want none", ok)
	}
}

// TestAdminTokenLetsRemotePeersIn: with admin.token_file, the right token
// opens every guarded endpoint to a remote peer; none, a wrong one, or
// another scheme gets 401 with a Bearer challenge.
func TestAdminTokenLetsRemotePeersIn(t *testing.T) {
	t.Parallel()
	g := newGuarded(t, writeToken(t, testToken+"\n"))
	const peer = "10.1.2.3:50000"
	for _, e := range guardedEndpoints {
		for _, tc := range []struct {
			name, authz string
			want        int
			challenge   string
		}{
			{"no token", "", 401, `Bearer realm="detour admin"`},
			{"wrong token", "Bearer " + testToken + "x", 401, `Bearer realm="detour admin", error="invalid_token"`},
			{"prefix of the token", "Bearer " + testToken[:8], 401, `Bearer realm="detour admin", error="invalid_token"`},
			{"empty token", "Bearer ", 401, `Bearer realm="detour admin", error="invalid_token"`},
			{"basic scheme", "Basic " + testToken, 401, `Bearer realm="detour admin", error="invalid_token"`},
			{"right token", "Bearer " + testToken, 200, ""},
			{"scheme in lower case", "bearer " + testToken, 200, ""},
		} {
			code, hdr, body := g.call(t, peer, e.method, e.path, tc.authz)
			if code != tc.want || hdr.Get("WWW-Authenticate") != tc.challenge {
				t.Errorf("%s %s, %s: %d WWW-Authenticate %q %s; want %d %q", e.method, e.path, tc.name, code, hdr.Get("WWW-Authenticate"), body, tc.want, tc.challenge)
				continue
			}
			if code == 401 && !strings.Contains(errorOf(t, body), "Authorization: Bearer <token>") {
				t.Errorf("%s: error %q does not say what to send", tc.name, body)
			}
		}
	}
	if ok, _ := g.store.Reloads(); ok != 2 {
		t.Errorf("%d rollbacks; want the 2 with the right token", ok)
	}
	// The token admits whatever Host the caller used (a Service name): a
	// DNS-rebinding page has no token.
	req := httptest.NewRequest("GET", "http://detour-admin.shop.svc:8788/status", nil)
	req.RemoteAddr, req.Header["Authorization"] = peer, []string{"Bearer " + testToken}
	if code, _, body := do(t, g.h, req); code != 200 {
		t.Errorf("token and a DNS Host: %d %s; want 200", code, body)
	}
}

// TestAdminProbesStayOpen: the kubelet and Prometheus reach /healthz,
// /readyz and /metrics from the pod network with no token, configured or
// not, and a stray Authorization header does not matter there.
func TestAdminProbesStayOpen(t *testing.T) {
	t.Parallel()
	for _, tokenFile := range []string{"", writeToken(t, testToken)} {
		g := newGuarded(t, tokenFile)
		for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
			for _, authz := range []string{"", "Bearer wrong"} {
				if code, _, body := g.call(t, "10.1.2.3:50000", "GET", path, authz); code != 200 {
					t.Errorf("token file %q: GET %s (Authorization %q): %d %s; want 200", tokenFile, path, authz, code, body)
				}
			}
		}
	}
}

// TestAdminLoopbackPeersNeedNoToken: a caller on loopback (`curl
// 127.0.0.1:8788`, kubectl port-forward, detour policy explain) needs no
// token, configured or not; a token it sends must be right; and it must
// name detour by IP or localhost (DNS rebinding).
func TestAdminLoopbackPeersNeedNoToken(t *testing.T) {
	t.Parallel()
	for _, tokenFile := range []string{"", writeToken(t, testToken)} {
		g := newGuarded(t, tokenFile)
		for _, peer := range []string{"127.0.0.1:40000", "127.8.9.10:40000", "[::1]:40000", "[::ffff:127.0.0.1]:40000"} {
			for _, e := range guardedEndpoints {
				for _, host := range []string{"127.0.0.1:8788", "localhost:8788", "[::1]:8788"} {
					req := httptest.NewRequest(e.method, "http://"+host+e.path, strings.NewReader(`{"hash": "01234567"}`))
					req.RemoteAddr = peer
					if code, _, body := do(t, g.h, req); code != 200 {
						t.Errorf("token file %q: %s %s from %s to %s: %d %s; want 200", tokenFile, e.method, e.path, peer, host, code, body)
					}
				}
				req := httptest.NewRequest(e.method, "http://evil.example.com:8788"+e.path, strings.NewReader(`{"hash": "01234567"}`))
				req.RemoteAddr = peer
				if code, _, body := do(t, g.h, req); code != 403 || !strings.Contains(body, "DNS rebinding") {
					t.Errorf("%s %s with Host evil.example.com: %d %s; want 403 (DNS rebinding)", e.method, e.path, code, body)
				}
			}
		}
		if tokenFile != "" {
			code, hdr, _ := g.call(t, "127.0.0.1:40000", "GET", "/status", "Bearer nope")
			if code != 401 || hdr.Get("WWW-Authenticate") == "" {
				t.Errorf("loopback with a wrong token: %d; want 401 with a challenge", code)
			}
		}
	}
}

// TestAdminGuardsUnknownPaths: the guard wraps the whole mux, so a path
// nobody registered is refused to a remote peer before the mux says 404 or
// 405: an endpoint added later cannot forget to be guarded.
func TestAdminGuardsUnknownPaths(t *testing.T) {
	t.Parallel()
	g := newGuarded(t, "")
	for _, c := range []struct{ method, path string }{
		{"GET", "/policy/reload"}, {"POST", "/status"}, {"GET", "/policy/rollback"}, {"DELETE", "/policy/history"},
		{"GET", "/healthz/../status"}, {"POST", "/healthz/x"}, {"GET", "/"},
	} {
		if code, _, body := g.call(t, "10.1.2.3:50000", c.method, c.path, ""); code != 403 {
			t.Errorf("%s %s from a remote peer: %d %s; want 403", c.method, c.path, code, body)
		}
	}
}

// TestAdminTokenRotation: the token file is read again at most once per
// tokenRecheck, so a rotated Secret is in effect within a second without a
// policy reload; an unreadable file shuts remote callers out (503, logged)
// while loopback keeps working.
func TestAdminTokenRotation(t *testing.T) {
	t.Parallel()
	file := writeToken(t, "first-token")
	g := newGuarded(t, file)
	const peer = "10.1.2.3:50000"
	status := func(tok string) int {
		code, _, _ := g.call(t, peer, "GET", "/status", "Bearer "+tok)
		return code
	}
	if c := status("first-token"); c != 200 {
		t.Fatalf("first token: %d", c)
	}
	if err := os.WriteFile(file, []byte("second-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	g.advance(tokenRecheck / 2)
	if c1, c2 := status("first-token"), status("second-token"); c1 != 200 || c2 != 401 {
		t.Errorf("within %v of the last read: first %d, second %d; want the cached first token", tokenRecheck, c1, c2)
	}
	g.advance(tokenRecheck / 2)
	if c1, c2 := status("first-token"), status("second-token"); c1 != 401 || c2 != 200 {
		t.Errorf("after %v: first %d, second %d; want the rotated token only", tokenRecheck, c1, c2)
	}
	os.Remove(file)
	g.advance(tokenRecheck)
	code, _, body := g.call(t, peer, "GET", "/status", "Bearer second-token")
	if code != 503 || strings.Contains(body, file) {
		t.Errorf("token file gone: %d %s; want 503 that does not name the file", code, body)
	}
	if !strings.Contains(g.log.String(), `"message":"admin token file unreadable: only loopback callers without a token are let in"`) ||
		!strings.Contains(g.log.String(), `"token_file":"`+file+`"`) {
		t.Errorf("the unreadable token file is not logged:\n%s", g.log.String())
	}
	if code, _, _ := g.call(t, "127.0.0.1:1", "GET", "/status", ""); code != 200 {
		t.Errorf("loopback with the token file gone: %d; want 200", code)
	}
}

// TestAdminLogsRefusedStateChanges: a refused rollback is one warn line
// saying who and why, never the token sent; a refused read only at debug.
func TestAdminLogsRefusedStateChanges(t *testing.T) {
	t.Parallel()
	g := newGuarded(t, writeToken(t, testToken))
	g.call(t, "10.1.2.3:50000", "POST", "/policy/rollback", "Bearer guessed-token-XYZ")
	g.call(t, "10.1.2.3:50001", "GET", "/status", "")
	var lines []map[string]any
	for _, l := range bytes.Split(bytes.TrimSpace([]byte(g.log.String())), []byte("\n")) {
		var m map[string]any
		if err := json.Unmarshal(l, &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		lines = append(lines, m)
	}
	if len(lines) != 2 {
		t.Fatalf("%d log lines; want 2:\n%s", len(lines), g.log.String())
	}
	want := map[string]any{"level": "warn", "component": "admin", "method": "POST", "path": "/policy/rollback",
		"peer": "10.1.2.3:50000", "reason": "wrong_token", "status": float64(401), "message": "admin request refused"}
	for k, v := range want {
		if lines[0][k] != v {
			t.Errorf("refused rollback log %s = %v; want %v", k, lines[0][k], v)
		}
	}
	if lines[1]["level"] != "debug" || lines[1]["reason"] != "no_token" {
		t.Errorf("refused read logged as %v", lines[1])
	}
	if strings.Contains(g.log.String(), "guessed-token-XYZ") || strings.Contains(g.log.String(), testToken) {
		t.Errorf("a token reached the log:\n%s", g.log.String())
	}

	// An accepted rollback says how it was let in.
	g.log.Reset()
	if code, _, body := g.call(t, "10.1.2.3:50000", "POST", "/policy/rollback", "Bearer "+testToken); code != 200 {
		t.Fatalf("rollback with the token: %d %s", code, body)
	}
	if l := g.log.String(); !strings.Contains(l, `"peer":"10.1.2.3:50000"`) || !strings.Contains(l, `"admitted":"token"`) {
		t.Errorf("rollback log lacks peer and admission:\n%s", l)
	}
}

func TestLoopbackPeer(t *testing.T) {
	t.Parallel()
	for addr, want := range map[string]bool{
		"127.0.0.1:1": true, "127.255.0.1:1": true, "[::1]:1": true, "[::ffff:127.0.0.2]:1": true,
		"10.0.0.1:1": false, "[::ffff:10.0.0.1]:1": false, "[fe80::1%eth0]:1": false, "0.0.0.0:1": false,
		"127.0.0.1": false, "": false, "@": false, "localhost:1": false,
	} {
		if got := loopbackPeer(addr); got != want {
			t.Errorf("loopbackPeer(%q) = %v; want %v", addr, got, want)
		}
	}
}
