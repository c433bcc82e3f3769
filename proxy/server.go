// Package proxy is detour's front door: the listener that speaks both
// explicit-proxy HTTP (CONNECT, with TLS interception for the hosts the
// policy names) and base-URL mode, and the wiring of policy, CA, chain and
// log for `detour serve`.
//
// proxy is the only package that imports goproxy. It adapts goproxy's
// CONNECT handling to chain.Runner, which works on plain HTTP requests.
package proxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/elazarl/goproxy"
	"github.com/rs/zerolog"

	"github.com/detour-proxy/detour/internal/chain"
	"github.com/detour-proxy/detour/internal/mitm"
	"github.com/detour-proxy/detour/policy"
	"github.com/detour-proxy/detour/rewrite"
)

// Timeouts of detour's own listeners.
const (
	// ReadHeaderTimeout bounds how long an app may take to send a request's
	// headers (slowloris).
	ReadHeaderTimeout = 30 * time.Second
	// IdleConnTimeout closes keep-alive connections from apps that are idle.
	IdleConnTimeout = 5 * time.Minute
	// TunnelIdleTimeout closes a tunnel (a host detour does not intercept)
	// after this long with no byte in either direction. goproxy hijacks
	// tunnelled connections, which takes them out of http.Server's
	// timeouts, so detour sets deadlines on them itself.
	TunnelIdleTimeout = 10 * time.Minute
	// TunnelDialTimeout bounds the connect to a tunnelled host.
	TunnelDialTimeout = 10 * time.Second
)

// Server is the proxy listener.
type Server struct {
	store  *policy.Store
	signer *mitm.Signer
	runner *chain.Runner
	log    zerolog.Logger

	gp  *goproxy.ProxyHttpServer
	fwd *httputil.ReverseProxy
	// fwdTransport is fwd's; fwdPolicy the policy of the last forward,
	// so that a reload drops connections pooled under the old one.
	fwdTransport *http.Transport
	fwdPolicy    atomic.Pointer[policy.Compiled]
	front        *http.Server
	inner        *http.Server
	innerLn      *connQueue
	guard        *selfGuard
	own          ownConns

	// targets maps an intercepted *tls.Conn to the CONNECT target it was
	// opened for, until the inner server picks it up in ConnContext.
	targets sync.Map
}

// NewServer builds the listener's handlers. Serve starts it.
func NewServer(store *policy.Store, signer *mitm.Signer, runner *chain.Runner, logger zerolog.Logger) *Server {
	s := &Server{store: store, signer: signer, runner: runner, log: logger, guard: &selfGuard{}}
	s.innerLn = newConnQueue()
	gp := goproxy.NewProxyHttpServer()
	gp.Logger = goproxyLogger{logger}
	// goproxy's defaults read HTTPS_PROXY from the environment for both its
	// CONNECT dialer and its transport, and skip TLS verification. detour
	// is the HTTPS_PROXY; it must never dial through itself, and must verify.
	// Nothing of goproxy's dials at all: tunnels and absolute-URI requests
	// are detour's own (egress.go), judged by the egress policy, so goproxy's
	// dialers refuse, should a goproxy path ever reach them.
	gp.ConnectDial = nil
	gp.ConnectDialWithReq = func(_ *http.Request, _, addr string) (net.Conn, error) {
		return nil, &egressRefused{addr: addr, reason: "goproxy does not dial for detour"}
	}
	gp.Tr = chain.NewTransport(TunnelDialTimeout, nil, func(_ context.Context, _, addr string) (net.Conn, error) {
		return nil, &egressRefused{addr: addr, reason: "goproxy does not dial for detour"}
	})
	// serveFront sends base-URL requests to s.baseURL itself; goproxy's
	// NonproxyHandler is the same, should a request ever reach it.
	gp.NonproxyHandler = http.HandlerFunc(s.baseURL)
	gp.OnRequest().HandleConnectFunc(s.connect)
	s.gp = gp
	s.fwd = s.newForwarder()

	s.front = &http.Server{
		Handler:           refuseAmbiguousFraming(http.HandlerFunc(s.serveFront)),
		ReadHeaderTimeout: ReadHeaderTimeout,
		IdleTimeout:       IdleConnTimeout,
		ErrorLog:          log.New(serverErrorLog{logger}, "", 0),
		ConnContext:       withFraming,
	}
	s.inner = &http.Server{
		Handler:           refuseAmbiguousFraming(http.HandlerFunc(s.intercepted)),
		ReadHeaderTimeout: ReadHeaderTimeout,
		IdleTimeout:       IdleConnTimeout,
		ErrorLog:          log.New(serverErrorLog{logger}, "", 0),
		ConnContext:       s.connContext,
		// Intercepted connections speak HTTP/1.1 or HTTP/2, as the app
		// chose by ALPN (h2.go). TLSNextProto is left nil so that Serve
		// sets up net/http's HTTP/2 server with this configuration.
		Protocols: interceptedProtocols(),
		HTTP2:     interceptedHTTP2(),
	}
	return s
}

type connectKey struct{}

// connectDecision is what serveFront decided for one CONNECT.
type connectDecision struct {
	pol       *policy.Compiled
	intercept bool
}

// serveFront decides interception once per CONNECT, before goproxy sees
// it, and records the decision and the policy it was taken with in the
// request's context so that a policy reload between here and goproxy's
// CONNECT handler cannot split it. It also wraps the connection so that
// bytes the app sent in the same write as the CONNECT (a pipelined TLS
// ClientHello), which the server has already buffered, are not lost:
// goproxy does not replay them for hijacked connections, and detour hijacks
// every CONNECT. Absolute-URI requests are forwarded by detour itself.
func (s *Server) serveFront(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodConnect:
		s.serveConnect(w, r)
	case r.URL.IsAbs():
		s.forward(w, r, s.store.Load())
	default:
		// Base-URL mode. goproxy would only hand the request to its
		// NonproxyHandler (s.baseURL), after building a per-request
		// context and formatting its URL for a log line it does not
		// write: called directly, a request costs fewer allocations and a
		// shallower stack, which every open stream holds.
		s.baseURL(w, r)
	}
}

// serveConnect hands a CONNECT to goproxy with the decision serveFront
// documents. (A function of its own, so that base-URL streams do not hold
// its frame.)
func (s *Server) serveConnect(w http.ResponseWriter, r *http.Request) {
	pol := s.store.Load()
	host, _ := splitHostPort(r.URL.Host)
	r = r.WithContext(context.WithValue(r.Context(), connectKey{}, connectDecision{pol: pol, intercept: pol.Intercepts(host)}))
	if hj, ok := w.(http.Hijacker); ok {
		w = replayHijacker{ResponseWriter: w, hj: hj}
	}
	s.gp.ServeHTTP(w, r)
}

type replayHijacker struct {
	http.ResponseWriter
	hj http.Hijacker
}

func (h replayHijacker) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, rw, err := h.hj.Hijack()
	if err != nil {
		return nil, nil, err
	}
	if rw.Reader.Buffered() > 0 {
		c = &bufferedConn{Conn: c, r: rw.Reader}
	}
	return c, rw, nil
}

// bufferedConn reads first what a bufio.Reader already holds.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// GuardListener makes dials refuse addr as they refuse the proxy listener:
// detour's other listeners (the admin one) must not be reachable through
// the proxy either.
func (s *Server) GuardListener(addr net.Addr) { s.guard.add(addr) }

// Serve accepts connections on ln until Shutdown.
func (s *Server) Serve(ln net.Listener) error {
	s.guard.add(ln.Addr())
	go func() { _ = s.inner.Serve(s.innerLn) }()
	err := s.front.Serve(framingListener{ln})
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	_ = s.inner.Close()
	return err
}

// Shutdown stops accepting, then waits for in-flight requests and streams
// (intercepted ones included) to finish or ctx to end.
func (s *Server) Shutdown(ctx context.Context) error {
	// Both at once: intercepted streams drain on the inner server while
	// base-URL streams drain on the front one, within the same budget.
	errc := make(chan error, 1)
	go func() { errc <- s.inner.Shutdown(ctx) }()
	err1 := s.front.Shutdown(ctx)
	return errors.Join(err1, <-errc)
}

// Dial connects to a policy upstream (or, for an intercepted host's
// unrouted request, to that host), refusing detour's own listeners: a
// policy or a DNS answer that points back at detour would otherwise make it
// proxy to itself until it runs out of sockets. Destinations an app asks
// for (tunnels, forwards) are dialled by dialEgress instead, which also
// applies the egress policy.
func (s *Server) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	d := &net.Dialer{KeepAlive: 30 * time.Second, Control: s.dialControl}
	return s.trackOwn(d.DialContext(ctx, network, addr))
}

// connect decides, per CONNECT, between interception and a plain tunnel.
// Only hosts a route names are intercepted; everything else (telemetry,
// package registries, other APIs) is tunnelled byte for byte and never
// decrypted, as far as the egress policy allows.
func (s *Server) connect(hostport string, ctx *goproxy.ProxyCtx) (*goproxy.ConnectAction, string) {
	host, port := splitHostPort(hostport)
	d, _ := ctx.Req.Context().Value(connectKey{}).(connectDecision)
	if d.pol == nil {
		d.pol = s.store.Load()
	}
	if d.intercept {
		return &goproxy.ConnectAction{Action: goproxy.ConnectHijack, Hijack: func(req *http.Request, client net.Conn, _ *goproxy.ProxyCtx) {
			s.hijack(client, host, port)
		}}, hostport
	}
	// Not goproxy.OkConnect (that preset carries goproxy's public CA), nor
	// ConnectAccept: detour dials and copies tunnels itself (egress.go).
	return &goproxy.ConnectAction{Action: goproxy.ConnectHijack, Hijack: func(req *http.Request, client net.Conn, _ *goproxy.ProxyCtx) {
		s.tunnel(client, req, hostport, d.pol)
	}}, hostport
}

// hijack terminates TLS for an intercepted host with a leaf signed by
// detour's CA and hands the connection to the inner HTTP server. Serving
// intercepted connections with net/http (rather than goproxy's MITM loop)
// gives them keep-alive, read timeouts, and a request context that is
// cancelled when the app disconnects — which is how an abandoned request
// cancels its upstream call.
func (s *Server) hijack(client net.Conn, host, port string) {
	if _, err := client.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n")); err != nil {
		_ = client.Close()
		return
	}
	s.intercept(client, chain.Target{Host: host, Port: port, Mode: "proxy"})
}

// intercept serves TLS for t.Host on client, an explicit-mode tunnel or a
// transparent-mode connection, with requests going to the chain as t.
func (s *Server) intercept(client net.Conn, t chain.Target) {
	host, port := t.Host, t.Port
	cfg := s.signer.TLSConfig(host)
	sign := cfg.GetCertificate
	cfg.GetCertificate = func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
		cert, err := sign(hello)
		if errors.Is(err, mitm.ErrSNIMismatch) {
			// A client asking for a leaf for another name than the host it
			// tunnelled to: refused, and said at warn, since no request line
			// will follow.
			s.log.Warn().Str("component", "mitm").Str("host", host).Str("port", port).Str("sni", hello.ServerName).
				Str("outcome", EgressRefused).Msg("TLS handshake refused: the server name is not the CONNECT host")
		}
		return cert, err
	}
	s.serveIntercepted(tls.Server(client, cfg), client, t)
}

type targetKey struct{}

func (s *Server) connContext(ctx context.Context, c net.Conn) context.Context {
	ctx = withFraming(ctx, c)
	if t, ok := s.targets.LoadAndDelete(c); ok {
		return context.WithValue(ctx, targetKey{}, t.(chain.Target))
	}
	return ctx
}

// intercepted serves one request from an intercepted TLS connection.
func (s *Server) intercepted(w http.ResponseWriter, r *http.Request) {
	t, ok := r.Context().Value(targetKey{}).(chain.Target)
	if !ok {
		http.Error(w, "detour: connection without a CONNECT target", http.StatusInternalServerError)
		return
	}
	// The Host inside the tunnel must be the host the tunnel was opened
	// for: otherwise a client could CONNECT to an intercepted host and then
	// address another one through it (smokescreen #279).
	// t.Host is a host a route names, which has no trailing dot; the
	// absolute form of the same name (a Host header with one) is the same
	// host.
	if h, _ := splitHostPort(r.Host); h != "" && !strings.EqualFold(strings.TrimSuffix(h, "."), t.Host) {
		s.misdirected(w, t, h)
		return
	}
	s.runner.Serve(w, r, t)
}

// baseAliases maps the first path segment of base-URL mode to a vendor host.
var baseAliases = map[string]string{
	"openai":    rewrite.OpenAI.DefaultHost(),
	"anthropic": rewrite.Anthropic.DefaultHost(),
	"gemini":    rewrite.Gemini.DefaultHost(),
}

// baseURL serves base-URL mode: http://127.0.0.1:8787/openai/v1/... is a
// request for https://api.openai.com/v1/..., and so on.
func (s *Server) baseURL(w http.ResponseWriter, r *http.Request) {
	// Base-URL mode is plain HTTP on loopback, which any web page the user
	// visits can POST to (text/plain needs no CORS preflight), and with DNS
	// rebinding even read. Detour's own keys are behind it, so only requests
	// addressed to a loopback name, and not sent by a browser page, pass.
	if !loopbackHost(r.Host) {
		refuseBaseURL(w, r, http.StatusMisdirectedRequest)
		return
	}
	if r.Header.Get("Origin") != "" || (r.Header.Get("Sec-Fetch-Site") != "" && r.Header.Get("Sec-Fetch-Site") != "none") {
		refuseBaseURL(w, r, http.StatusForbidden)
		return
	}
	rest := strings.TrimPrefix(r.URL.Path, "/")
	alias, tail, slash := strings.Cut(rest, "/")
	host, ok := baseAliases[alias]
	if !ok {
		refuseBaseURL(w, r, http.StatusNotFound)
		return
	}
	// A shallow copy with a URL of its own, in one allocation: the chain
	// only reads the request's headers (it builds each upstream request's
	// own), so the deep copy r.Clone makes of them is not needed.
	c := &baseURLRequest{req: *r, url: *r.URL}
	// "/" + tail without building it: tail and the slash before it.
	c.url.Path = "/"
	if slash {
		c.url.Path = r.URL.Path[len(r.URL.Path)-len(tail)-1:]
	}
	c.url.RawPath = ""
	c.req.URL = &c.url
	c.req.Host = host
	r2 := &c.req
	s.runner.Serve(w, r2, chain.Target{Host: host, Port: "443", Mode: "base_url"})
}

// refuseBaseURL answers a base-URL request baseURL refuses, with status:
// not addressed to loopback, sent by a web page, or for no known vendor.
// Its messages are built here rather than in baseURL, whose frame every
// open stream holds on its goroutine's stack.
func refuseBaseURL(w http.ResponseWriter, r *http.Request, status int) {
	switch status {
	case http.StatusMisdirectedRequest:
		http.Error(w, "detour: base-URL mode answers only requests addressed to 127.0.0.1, [::1] or localhost; got Host "+r.Host, status)
	case http.StatusForbidden:
		http.Error(w, "detour: requests from web pages are refused", status)
	default:
		http.Error(w, "detour: unknown path "+r.URL.Path+".\n"+
			"Use detour as HTTPS_PROXY, or as a base URL: http://"+r.Host+"/openai/v1, http://"+r.Host+"/anthropic, http://"+r.Host+"/gemini\n",
			status)
	}
}

// baseURLRequest is a base-URL request rewritten for its vendor host.
type baseURLRequest struct {
	req http.Request
	url url.URL
}

func splitHostPort(hp string) (host, port string) {
	h, p, err := net.SplitHostPort(hp)
	if err != nil {
		return strings.ToLower(strings.Trim(hp, "[]")), ""
	}
	return strings.ToLower(h), p
}

// loopbackHost reports whether a Host header names this machine by an IP
// address of its own or "localhost".
func loopbackHost(hostport string) bool {
	// What nearly every base-URL request is addressed to, told without
	// splitting and parsing it: 127.0.0.1 with a port (which splits
	// cleanly when the rest holds no colon or bracket).
	if port, ok := strings.CutPrefix(hostport, "127.0.0.1:"); ok && !strings.ContainsAny(port, ":[]") {
		return true
	}
	h, _ := splitHostPort(hostport)
	return loopbackName(h)
}

// loopbackName is loopbackHost for the host part, split off.
func loopbackName(h string) bool {
	if h == "localhost" {
		return true
	}
	// A loopback address ([::1], 127.0.0.1 without a port): netip parses
	// it without the allocation net.ParseIP makes. (A zone is refused, as
	// ParseIP does.)
	if a, err := netip.ParseAddr(h); err == nil && a.Zone() == "" && a.Unmap().IsLoopback() {
		return true
	}
	// An IP literal of this machine is fine too (detour listening on a pod
	// address): DNS rebinding needs a name, and a name is refused.
	ip := net.ParseIP(h)
	return ip != nil && (ip.IsLoopback() || isLocalIP(ip))
}

// selfGuard refuses dials to detour's own listen addresses.
type selfGuard struct {
	mu    sync.Mutex
	addrs []netip.AddrPort
}

func (g *selfGuard) add(a net.Addr) {
	if ta, ok := a.(*net.TCPAddr); ok {
		ap := ta.AddrPort()
		g.mu.Lock()
		g.addrs = append(g.addrs, netip.AddrPortFrom(ap.Addr().Unmap().WithZone(""), ap.Port()))
		g.mu.Unlock()
	}
}

// control runs after name resolution, on the address actually dialled.
func (g *selfGuard) control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return nil
	}
	if g.owns(ap) {
		return fmt.Errorf("detour: refusing to connect to its own listener %s (check the policy's base_url and the environment's proxy settings)", address)
	}
	return nil
}

func isLocalIP(ip net.IP) bool {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return false
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.Equal(ip) {
			return true
		}
	}
	return false
}

// connQueue is a net.Listener fed by hijack: intercepted connections are
// pushed in and accepted by the inner HTTP server.
type connQueue struct {
	ch   chan net.Conn
	done chan struct{}
	once sync.Once
}

func newConnQueue() *connQueue {
	return &connQueue{ch: make(chan net.Conn), done: make(chan struct{})}
}

func (q *connQueue) push(c net.Conn) bool {
	select {
	case q.ch <- c:
		return true
	case <-q.done:
		return false
	}
}

func (q *connQueue) Accept() (net.Conn, error) {
	select {
	case c := <-q.ch:
		return c, nil
	case <-q.done:
		return nil, net.ErrClosed
	}
}

func (q *connQueue) Close() error {
	q.once.Do(func() { close(q.done) })
	return nil
}

func (q *connQueue) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }

// idleConn closes a hijacked tunnel after a period with no traffic.
type idleConn struct {
	net.Conn
	idle time.Duration
}

func (c *idleConn) Read(p []byte) (int, error) {
	_ = c.Conn.SetDeadline(time.Now().Add(c.idle))
	return c.Conn.Read(p)
}

func (c *idleConn) Write(p []byte) (int, error) {
	_ = c.Conn.SetDeadline(time.Now().Add(c.idle))
	return c.Conn.Write(p)
}

// goproxyLogger sends goproxy's printf logging to the debug level.
type goproxyLogger struct{ l zerolog.Logger }

func (g goproxyLogger) Printf(format string, v ...any) {
	g.l.Debug().Str("component", "goproxy").Msg(strings.TrimSpace(fmt.Sprintf(format, v...)))
}

// serverErrorLog turns net/http's server errors into log lines; a failed
// TLS handshake from an app usually means it does not trust detour's CA,
// which deserves a hint rather than a bare error.
type serverErrorLog struct{ l zerolog.Logger }

func (s serverErrorLog) Write(p []byte) (int, error) {
	msg := strings.TrimSpace(string(p))
	ev := s.l.Debug()
	if strings.Contains(msg, "TLS handshake error") && (strings.Contains(msg, "unknown certificate") || strings.Contains(msg, "bad certificate")) {
		ev = s.l.Warn().Str("hint", "the app does not trust detour's CA: point SSL_CERT_FILE / REQUESTS_CA_BUNDLE / NODE_EXTRA_CA_CERTS at a bundle that includes it")
	}
	ev.Str("component", "http").Msg(msg)
	return len(p), nil
}
