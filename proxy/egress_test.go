package proxy_test

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/detour-proxy/detour/internal/detourtest"
	"github.com/detour-proxy/detour/rewrite"
)

// Policies for the egress tests: the two-upstream route for api.openai.com
// plus an egress section.
const (
	loopbackAllowed = `, "egress": {"deny_cidrs": []}`
	tunnelDeny      = `, "egress": {"tunnel": "deny", "deny_cidrs": []}`
)

func egressHarness(t *testing.T, extra string) (*detourtest.Harness, *detourtest.Vendor) {
	t.Helper()
	primary := detourtest.NewVendor(t, rewrite.OpenAI, "primary")
	backup := detourtest.NewVendor(t, rewrite.OpenAI, "backup")
	return detourtest.Start(t, detourtest.TwoUpstreams(t, rewrite.OpenAI, primary, backup, extra)), primary
}

// countingServer is a loopback test server that counts the connections it
// accepted: a refused destination must never be connected to.
type countingServer struct {
	*httptest.Server
	conns atomic.Int64
}

func newCountingServer(t *testing.T, tlsOn bool, h http.HandlerFunc) *countingServer {
	t.Helper()
	cs := &countingServer{Server: httptest.NewUnstartedServer(h)}
	// Tunnels the tests open and drop make the server log handshake EOFs.
	cs.Config.ErrorLog = log.New(io.Discard, "", 0)
	cs.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			cs.conns.Add(1)
		}
	}
	if tlsOn {
		detourtest.StartTLS(cs.Server)
	} else {
		cs.Start()
	}
	t.Cleanup(cs.Close)
	return cs
}

func (cs *countingServer) port() string {
	_, p, _ := net.SplitHostPort(cs.Listener.Addr().String())
	return p
}

// rawConnect sends CONNECT target to detour and returns its answer. On 200
// the returned reader and connection are the tunnel.
func rawConnect(t *testing.T, h *detourtest.Harness, target string) (*http.Response, string, net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", h.ProxyURL.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(15 * time.Second))
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		t.Fatalf("CONNECT %s: %v", target, err)
	}
	var body string
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		body = string(b)
	}
	return resp, body, c, br
}

// proxyGet sends an absolute-URI GET for u through detour.
func proxyGet(t *testing.T, h *detourtest.Harness, u string) (*http.Response, string) {
	t.Helper()
	tr := &http.Transport{Proxy: http.ProxyURL(h.ProxyURL)}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Get(u)
	if err != nil {
		t.Fatalf("GET %s through detour: %v", u, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// logLine waits for the request line of mode for host:port.
func logLine(t *testing.T, h *detourtest.Harness, mode, host, port string) map[string]any {
	t.Helper()
	return h.WaitLogLine(t, "request", func(m map[string]any) bool {
		return m["mode"] == mode && m["host"] == host && m["port"] == port
	})
}

// assertRefused checks a 403 refusal: status, a one-line body naming the
// destination and the reason, and the refused log line.
func assertRefused(t *testing.T, h *detourtest.Harness, mode string, status int, body, target, reason string) {
	t.Helper()
	if status != http.StatusForbidden {
		t.Errorf("%s %s: status %d; want 403 (body %q)", mode, target, status, body)
	}
	want := "detour: egress to " + target + " refused: "
	if !strings.HasPrefix(body, want) || !strings.Contains(body, reason) || !strings.HasSuffix(body, `; see README "Egress"`+"\n") || strings.Count(body, "\n") != 1 {
		t.Errorf("%s %s: body %q; want one line %q…%q…", mode, target, body, want, reason)
	}
	host, port, _ := net.SplitHostPort(target)
	host = strings.ToLower(host)
	l := logLine(t, h, mode, host, port)
	if l["outcome"] != "refused" || l["status"] != float64(403) || l["level"] != "warn" || !strings.Contains(fmt.Sprint(l["error"]), reason) {
		t.Errorf("%s %s: log line %v; want outcome refused, status 403, level warn, error with %q", mode, target, l, reason)
	}
}

// TestEgressRefusesDetoursOwnListeners: even with loopback allowed, an app
// cannot reach detour's proxy or admin listener through the proxy — not by
// 127.0.0.1, and not by 0.0.0.0, which reaches this host.
func TestEgressRefusesDetoursOwnListeners(t *testing.T) {
	t.Parallel()
	h, _ := egressHarness(t, loopbackAllowed)
	_, proxyPort, _ := net.SplitHostPort(h.ProxyURL.Host)
	_, adminPort, _ := net.SplitHostPort(h.AdminURL.Host)
	for _, target := range []string{
		"127.0.0.1:" + adminPort,
		"127.0.0.1:" + proxyPort,
		"0.0.0.0:" + proxyPort,
		"0.0.0.0:" + adminPort,
	} {
		resp, body, _, _ := rawConnect(t, h, target)
		ip, port, _ := net.SplitHostPort(target)
		reason := ip + ":" + port + " is detour's own listener (always refused)"
		if ip == "0.0.0.0" {
			// Refused either as the own listener or as the unspecified
			// address; the own-listener check comes first.
			reason = " is detour's own listener"
		}
		assertRefused(t, h, "tunnel", resp.StatusCode, body, target, reason)
	}
	resp, body := proxyGet(t, h, "http://127.0.0.1:"+adminPort+"/status")
	assertRefused(t, h, "forward", resp.StatusCode, body, "127.0.0.1:"+adminPort, "is detour's own listener")
}

// TestEgressRefusesLinkLocalAndMetadata: the cloud metadata service and the
// rest of link-local are refused whatever deny_cidrs says, before any
// connection is attempted (the dialer's Control refuses before connect).
func TestEgressRefusesLinkLocalAndMetadata(t *testing.T) {
	t.Parallel()
	h, _ := egressHarness(t, loopbackAllowed)
	targets := []struct{ target, reason string }{
		{"169.254.169.254:80", "169.254.169.254 is link-local, where cloud metadata services answer (always refused)"},
		{"169.254.170.2:80", "169.254.170.2 is link-local"},
		{"100.100.100.200:80", "100.100.100.200 is a cloud metadata address"},
		{"0.0.0.0:22", "0.0.0.0 is the unspecified address"},
	}
	if ln, err := net.Listen("tcp6", "[::1]:0"); err == nil {
		ln.Close()
		targets = append(targets,
			struct{ target, reason string }{"[fe80::1]:80", "fe80::1 is link-local"},
			struct{ target, reason string }{"[fd00:ec2::254]:80", "fd00:ec2::254 is a cloud metadata address"},
			struct{ target, reason string }{"[::ffff:169.254.169.254]:80", "169.254.169.254 is link-local"},
		)
	}
	for _, tc := range targets {
		start := time.Now()
		resp, body, _, _ := rawConnect(t, h, tc.target)
		assertRefused(t, h, "tunnel", resp.StatusCode, body, tc.target, tc.reason)
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("CONNECT %s took %s: it waited on a dial", tc.target, d)
		}
	}
	resp, body := proxyGet(t, h, "http://169.254.169.254/latest/meta-data/iam/security-credentials/")
	assertRefused(t, h, "forward", resp.StatusCode, body, "169.254.169.254:80", "169.254.169.254 is link-local")
	if l := logLine(t, h, "forward", "169.254.169.254", "80"); l["ip"] != "169.254.169.254" || l["path"] != "/latest/meta-data/iam/security-credentials/" {
		t.Errorf("forward log line %v; want ip and path", l)
	}
}

// TestEgressDecidesOnTheDialedAddress: a name is judged by the address it
// resolves to, at the moment of dialling (a DNS answer that changes after a
// check cannot slip through): "localhost" is refused as loopback by the
// default deny_cidrs, and allowed when deny_cidrs allows loopback.
func TestEgressDecidesOnTheDialedAddress(t *testing.T) {
	t.Parallel()
	srv := newCountingServer(t, true, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "local service") })
	h, _ := egressHarness(t, "")
	for _, host := range []string{"localhost", "LocalHost", "127.0.0.1"} {
		target := host + ":" + srv.port()
		resp, body, _, _ := rawConnect(t, h, target)
		assertRefused(t, h, "tunnel", resp.StatusCode, body, target, "is in egress.deny_cidrs")
		if !strings.Contains(body, "127.0.0.1 is in egress.deny_cidrs (127.0.0.0/8)") && !strings.Contains(body, "::1 is in egress.deny_cidrs (::1/128)") {
			t.Errorf("CONNECT %s: body %q does not name the dialled address", target, body)
		}
	}
	if l := logLine(t, h, "tunnel", "localhost", srv.port()); l["ip"] != "127.0.0.1" && l["ip"] != "::1" {
		t.Errorf("log line ip %v; want the address localhost resolved to", l["ip"])
	}
	if n := srv.conns.Load(); n != 0 {
		t.Errorf("the loopback server got %d connections; a refused address must not be dialled", n)
	}

	open, _ := egressHarness(t, loopbackAllowed)
	resp, _, _, _ := rawConnect(t, open, "localhost:"+srv.port())
	if resp.StatusCode != http.StatusOK {
		t.Errorf("with deny_cidrs [], CONNECT localhost: %s; want 200", resp.Status)
	}
}

// TestEgressTunnelDenyPassesOnlyRoutedHosts: with egress.tunnel "deny" a
// CONNECT or absolute-URI request for a host no route names gets 403 and
// dials nothing, while the routed host works as ever.
func TestEgressTunnelDenyPassesOnlyRoutedHosts(t *testing.T) {
	t.Parallel()
	tlsSrv := newCountingServer(t, true, func(w http.ResponseWriter, r *http.Request) {})
	plain := newCountingServer(t, false, func(w http.ResponseWriter, r *http.Request) {})
	h, primary := egressHarness(t, tunnelDeny)

	target := "127.0.0.1:" + tlsSrv.port()
	resp, body, _, _ := rawConnect(t, h, target)
	assertRefused(t, h, "tunnel", resp.StatusCode, body, target, `egress.tunnel is "deny" and no route names 127.0.0.1`)
	resp2, body2 := proxyGet(t, h, plain.URL+"/x")
	assertRefused(t, h, "forward", resp2.StatusCode, body2, "127.0.0.1:"+plain.port(), `egress.tunnel is "deny" and no route names 127.0.0.1`)
	if n := tlsSrv.conns.Load() + plain.conns.Load(); n != 0 {
		t.Errorf("%d connections reached hosts no route names", n)
	}
	if l := logLine(t, h, "tunnel", "127.0.0.1", tlsSrv.port()); l["ip"] != "" {
		t.Errorf("ip %v: refused by name, nothing was resolved or dialled", l["ip"])
	}

	if err := post(h.Client(), "https://api.openai.com/v1/chat/completions"); err != nil {
		t.Errorf("the routed host: %v", err)
	}
	if primary.Calls() != 1 {
		t.Errorf("primary calls %d; want 1", primary.Calls())
	}
}

// TestTunnelAndForwardLogOneLineEach: every tunnel and every forward leaves
// one log line with mode, host, port, address, bytes each way, duration and
// outcome — and never a body or a query string.
func TestTunnelAndForwardLogOneLineEach(t *testing.T) {
	t.Parallel()
	tlsSrv := newCountingServer(t, true, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "tunnelled-BODY-SECRET") })
	plain := newCountingServer(t, false, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if r.Header.Get("Proxy-Authorization") != "" {
			w.WriteHeader(http.StatusTeapot)
		}
		fmt.Fprintf(w, "forwarded-BODY-SECRET %d", len(b))
	})
	h, _ := egressHarness(t, loopbackAllowed)

	// A tunnel, closed by the app.
	pool := x509.NewCertPool()
	pool.AddCert(tlsSrv.Certificate())
	tr := &http.Transport{Proxy: http.ProxyURL(h.ProxyURL), TLSClientConfig: &tls.Config{RootCAs: pool}}
	resp, err := (&http.Client{Transport: tr}).Get(tlsSrv.URL + "/?token=QUERY-SECRET")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	tr.CloseIdleConnections()
	if string(got) != "tunnelled-BODY-SECRET" {
		t.Fatalf("tunnelled body %q", got)
	}
	l := logLine(t, h, "tunnel", "127.0.0.1", tlsSrv.port())
	if l["outcome"] != "ok" || l["level"] != "info" || l["method"] != "CONNECT" || l["status"] != float64(200) || l["ip"] != "127.0.0.1" || l["error"] != "" {
		t.Errorf("tunnel line %v", l)
	}
	// The TLS handshake alone is hundreds of bytes each way.
	if up, down := l["bytes_up"].(float64), l["bytes_down"].(float64); up < 200 || down < 500 {
		t.Errorf("tunnel bytes up %v down %v", up, down)
	}
	if ms, ok := l["total_ms"].(float64); !ok || ms <= 0 {
		t.Errorf("tunnel total_ms %v", l["total_ms"])
	}

	// A forward with a request body.
	proxyURL := *h.ProxyURL
	proxyURL.User = url.UserPassword("app", "PROXY-SECRET")
	ftr := &http.Transport{Proxy: http.ProxyURL(&proxyURL)}
	defer ftr.CloseIdleConnections()
	resp, err = (&http.Client{Transport: ftr}).Post(plain.URL+"/upload?token=QUERY-SECRET", "text/plain", strings.NewReader("UPLOAD-SECRET"))
	if err != nil {
		t.Fatal(err)
	}
	got, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(got) != "forwarded-BODY-SECRET 13" {
		t.Fatalf("forward: %d %q (a 418 means Proxy-Authorization was forwarded)", resp.StatusCode, got)
	}
	l = logLine(t, h, "forward", "127.0.0.1", plain.port())
	want := map[string]any{"outcome": "ok", "level": "info", "method": "POST", "path": "/upload", "status": float64(200),
		"ip": "127.0.0.1", "bytes_up": float64(13), "bytes_down": float64(len(got)), "error": ""}
	for k, v := range want {
		if l[k] != v {
			t.Errorf("forward line %s = %v; want %v", k, l[k], v)
		}
	}

	// A destination that does not answer.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	r3, body, _, _ := rawConnect(t, h, closed)
	_, closedPort, _ := net.SplitHostPort(closed)
	if r3.StatusCode != http.StatusBadGateway || !strings.HasPrefix(body, "detour: cannot connect to "+closed) {
		t.Errorf("CONNECT to a closed port: %d %q; want 502", r3.StatusCode, body)
	}
	if l := logLine(t, h, "tunnel", "127.0.0.1", closedPort); l["outcome"] != "dial_error" || l["status"] != float64(502) || l["level"] != "warn" {
		t.Errorf("dial error line %v", l)
	}

	for _, secret := range []string{"BODY-SECRET", "UPLOAD-SECRET", "QUERY-SECRET", "PROXY-SECRET"} {
		if strings.Contains(h.Log(), secret) {
			t.Errorf("the log contains %s", secret)
		}
	}
	if n := len(h.Records()); n != 0 {
		t.Errorf("%d chain records; tunnels and forwards are not chain requests", n)
	}
}

// TestTunnelKeepsBytesSentWithTheConnect: a client that sends its first
// bytes in the same write as the CONNECT loses none of them in a tunnel.
func TestTunnelKeepsBytesSentWithTheConnect(t *testing.T) {
	t.Parallel()
	srv := newCountingServer(t, true, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "tunnelled") })
	h, _ := egressHarness(t, loopbackAllowed)
	raw, err := net.Dial("tcp", h.ProxyURL.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	raw.SetDeadline(time.Now().Add(10 * time.Second))
	target := srv.Listener.Addr().String()
	pc := &pipelinedConn{Conn: raw, connect: []byte("CONNECT " + target + " HTTP/1.1\r\nHost: " + target + "\r\n\r\n"), br: bufio.NewReader(raw)}
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	tc := tls.Client(pc, &tls.Config{ServerName: "127.0.0.1", RootCAs: pool})
	if err := tc.Handshake(); err != nil {
		t.Fatalf("TLS handshake with a pipelined ClientHello through a tunnel: %v", err)
	}
	io.WriteString(tc, "GET / HTTP/1.1\r\nHost: "+target+"\r\nConnection: close\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(tc), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if string(body) != "tunnelled" {
		t.Errorf("body %q", body)
	}
}

// TestLeafIsOnlyForTheConnectHost: inside a CONNECT to an intercepted host,
// a ClientHello naming another server fails the handshake (and is logged);
// one naming none gets the CONNECT host's leaf.
func TestLeafIsOnlyForTheConnectHost(t *testing.T) {
	t.Parallel()
	h, _ := egressHarness(t, "")
	resp, _, c, _ := rawConnect(t, h, "api.openai.com:443")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("CONNECT: %s", resp.Status)
	}
	// The trusting client would accept a leaf for attacker.example signed
	// by detour's CA: only detour's refusal stops the handshake.
	tc := tls.Client(c, &tls.Config{ServerName: "attacker.example", RootCAs: h.CAPool})
	if err := tc.Handshake(); err == nil {
		t.Fatalf("handshake for attacker.example inside a tunnel to api.openai.com succeeded; leaf %v", tc.ConnectionState().PeerCertificates[0].DNSNames)
	}
	l := h.WaitLogLine(t, "TLS handshake refused: the server name is not the CONNECT host", func(m map[string]any) bool { return m["sni"] == "attacker.example" })
	if l["host"] != "api.openai.com" || l["level"] != "warn" || l["outcome"] != "refused" {
		t.Errorf("log line %v", l)
	}

	resp, _, c, _ = rawConnect(t, h, "api.openai.com:443")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("CONNECT: %s", resp.Status)
	}
	// ServerName "" sends no SNI; the test checks the leaf itself.
	tc = tls.Client(c, &tls.Config{InsecureSkipVerify: true})
	if err := tc.Handshake(); err != nil {
		t.Fatalf("handshake without SNI: %v", err)
	}
	if got := tc.ConnectionState().PeerCertificates[0].DNSNames; len(got) != 1 || got[0] != "api.openai.com" {
		t.Errorf("leaf without SNI for %v; want api.openai.com", got)
	}
}

// TestServeWarnsAboutNonLoopbackListeners: detour serve logs a warning for
// an admin_listen, or an allowed listen, that other machines can reach.
// (The harness serves on its own loopback listeners, so nothing binds the
// addresses named here.)
func TestServeWarnsAboutNonLoopbackListeners(t *testing.T) {
	t.Parallel()
	h, _ := egressHarness(t, `, "listen": "0.0.0.0:8787", "admin_listen": "0.0.0.0:8788", "egress": {"tunnel": "deny"}`)
	var warnings []string
	for _, l := range h.LogLines(`listen "0.0.0.0:8787" is not a loopback address: anything that can reach it can use detour as its proxy (allowed because egress.tunnel is "deny", so only hosts a route names pass)`) {
		warnings = append(warnings, fmt.Sprint(l["level"], " ", l["component"]))
	}
	for _, l := range h.LogLines(`admin_listen "0.0.0.0:8788" is not a loopback address: the admin endpoints (status, metrics, policy history and rollback) answer anything that can reach it; restrict who can (e.g. a NetworkPolicy) or keep it on 127.0.0.1`) {
		warnings = append(warnings, fmt.Sprint(l["level"], " ", l["component"]))
	}
	if strings.Join(warnings, ",") != "warn listen,warn listen" {
		t.Errorf("warnings %q; want one warn line for listen and one for admin_listen\nlog:\n%s", warnings, h.Log())
	}
}

// TestForwardIsJudgedAgainAfterAReload: a connection pooled for forwards
// under one policy does not carry a destination past a reload that refuses
// it.
func TestForwardIsJudgedAgainAfterAReload(t *testing.T) {
	t.Parallel()
	plain := newCountingServer(t, false, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	primary := detourtest.NewVendor(t, rewrite.OpenAI, "primary")
	backup := detourtest.NewVendor(t, rewrite.OpenAI, "backup")
	h := detourtest.Start(t, detourtest.TwoUpstreams(t, rewrite.OpenAI, primary, backup, loopbackAllowed))
	tr := &http.Transport{Proxy: http.ProxyURL(h.ProxyURL)}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	get := func() int {
		resp, err := c.Get(plain.URL)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	if s := get(); s != 200 {
		t.Fatalf("with loopback allowed: %d", s)
	}
	h.WritePolicy(t, detourtest.TwoUpstreams(t, rewrite.OpenAI, primary, backup, ""))
	h.WaitLogLine(t, "policy reloaded", func(map[string]any) bool { return true })
	if s := get(); s != http.StatusForbidden {
		t.Errorf("after the reload refusing loopback: %d; want 403", s)
	}
	if n := plain.conns.Load(); n != 1 {
		t.Errorf("the server saw %d connections; want the first one only", n)
	}
}
