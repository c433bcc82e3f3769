package proxy

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/detour-proxy/detour/internal/chain"
	"github.com/detour-proxy/detour/policy"
)

// This file is detour's egress: what happens to what an app asks the proxy
// for beyond the hosts a route intercepts — CONNECT tunnels and absolute-URI
// (plain-proxy) requests. Each is judged by the policy's egress section
// (egress.tunnel by name before anything is resolved; egress.deny_cidrs and
// the always-refused ranges on the address actually dialled), never reaches
// detour's own listeners, and leaves one log line. The policy's own
// upstreams are not judged here: they go through Server.Dial.

// Egress outcomes, as the log line's outcome says them.
const (
	EgressOK          = "ok"           // the tunnel or forward ran; it ended cleanly or was reset by a side
	EgressRefused     = "refused"      // the egress policy refused the destination; nothing was dialled
	EgressDialError   = "dial_error"   // the destination could not be reached
	EgressIdleTimeout = "idle_timeout" // a tunnel closed after TunnelIdleTimeout without a byte
	EgressUpstreamErr = "upstream_error"
	EgressClientGone  = "client_gone" // the app went away before the answer
)

// Modes of the egress log line, beside chain.Record's proxy and base_url.
const (
	ModeTunnel  = "tunnel"
	ModeForward = "forward"
)

// egressRefused is a destination the egress policy refuses.
type egressRefused struct {
	addr   string // host:port as the app asked for it
	reason string
}

func (e *egressRefused) Error() string {
	return fmt.Sprintf("egress to %s refused: %s", e.addr, e.reason)
}

// body is the one-line answer the app gets with the 403 (http.Error adds
// the newline).
func (e *egressRefused) body() string {
	return "detour: " + e.Error() + `; see README "Egress"`
}

// egressRecord is everything the log line of one tunnel or forward says.
// Bodies and headers are never in it.
type egressRecord struct {
	id, mode, host, port, method, path string
	status                             int
	outcome, err                       string
	up, down                           int64
	start                              time.Time

	// ip is the address dialled (or refused): written by the dialer's
	// Control, which can run on two goroutines at once (Happy Eyeballs) and,
	// for a forward, after the request that started the dial has ended.
	mu sync.Mutex
	ip netip.Addr
}

func newEgressRecord(mode, method, hostport string) *egressRecord {
	host, port := splitHostPort(hostport)
	return &egressRecord{id: newID(), mode: mode, method: method, host: host, port: port, start: time.Now()}
}

func (r *egressRecord) setIP(ip netip.Addr) {
	r.mu.Lock()
	r.ip = ip
	r.mu.Unlock()
}

// log writes the line: info when the tunnel or forward ran, warn when it
// was refused or failed. Field names are chain.Record's where they mean the
// same.
func (r *egressRecord) log(l zerolog.Logger) {
	ev := l.Info()
	if r.outcome != EgressOK {
		ev = l.Warn()
	}
	if ev == nil {
		return
	}
	r.mu.Lock()
	ip := ""
	if r.ip.IsValid() {
		ip = r.ip.String()
	}
	r.mu.Unlock()
	ev = ev.Str("id", r.id).
		Str("mode", r.mode).
		Str("host", r.host).
		Str("port", r.port).
		Str("ip", ip).
		Str("method", r.method)
	if r.mode == ModeForward {
		ev = ev.Str("path", r.path)
	}
	ev.Int("status", r.status).
		Str("outcome", r.outcome).
		Str("error", r.err).
		Int64("bytes_up", r.up).
		Int64("bytes_down", r.down).
		Float64("total_ms", float64(time.Since(r.start).Microseconds())/1000).
		Msg("request")
}

func newID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// dialEgress connects to addr for an app, as pol's egress section allows.
// The decision is taken in the dialer's Control, which runs after name
// resolution on each address about to be connected to: judging the name,
// or an address resolved beforehand, would let a DNS answer that changes
// between the check and the dial (rebinding) through. A refused address is
// never connected to; a name with several addresses goes on to the next.
func (s *Server) dialEgress(ctx context.Context, pol *policy.Compiled, rec *egressRecord, network, addr string) (net.Conn, error) {
	return s.dialOut(ctx, pol, rec, network, addr, pol.Egress.Refusal)
}

// dialOut dials addr for the app. judge, when not nil, is the egress
// policy's say on the address dialled; detour's own listeners are refused
// whatever it says, so that nothing the app sends can loop back into detour.
func (s *Server) dialOut(ctx context.Context, pol *policy.Compiled, rec *egressRecord, network, addr string, judge func(netip.Addr) string) (net.Conn, error) {
	d := &net.Dialer{KeepAlive: 30 * time.Second, Control: func(_, address string, rc syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return &egressRefused{addr: addr, reason: "unexpected dial address " + address}
		}
		ip := ap.Addr().Unmap().WithZone("")
		rec.setIP(ip)
		if s.guard.owns(ap) {
			return &egressRefused{addr: addr, reason: netip.AddrPortFrom(ip, ap.Port()).String() + " is detour's own listener (always refused)"}
		}
		if judge != nil {
			if reason := judge(ip); reason != "" {
				return &egressRefused{addr: addr, reason: reason}
			}
		}
		return markSocket(rc, pol.Transparent.Mark)
	}}
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	if ta, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		rec.setIP(ta.AddrPort().Addr().Unmap())
	}
	return s.trackOwn(c, nil)
}

// tunnel serves a CONNECT for a host detour does not intercept: it dials
// as the egress policy allows, answers the app, and copies bytes both ways
// until both sides are done, then logs the tunnel. detour does this itself
// rather than with goproxy's ConnectAccept so that a refusal reaches the app
// as a 403 with its reason (goproxy answers every dial error with a 502),
// and so that the bytes and the end of the tunnel can be logged.
func (s *Server) tunnel(client net.Conn, req *http.Request, hostport string, pol *policy.Compiled) {
	if _, _, err := net.SplitHostPort(hostport); err != nil {
		hostport += ":80" // as goproxy does for a CONNECT without a port
	}
	rec := newEgressRecord(ModeTunnel, http.MethodConnect, hostport)
	defer rec.log(s.log)
	defer client.Close()
	if reason := pol.HostRefusal(rec.host); reason != "" {
		s.refuse(client, rec, &egressRefused{addr: hostport, reason: reason})
		return
	}
	ctx, cancel := context.WithTimeout(req.Context(), TunnelDialTimeout)
	target, err := s.dialEgress(ctx, pol, rec, "tcp", hostport)
	cancel()
	if err != nil {
		s.refuse(client, rec, err)
		return
	}
	defer target.Close()
	rec.status = http.StatusOK
	if _, err := io.WriteString(client, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		rec.outcome, rec.err = EgressClientGone, err.Error()
		return
	}
	rec.up, rec.down, err = splice(&idleConn{Conn: client, idle: TunnelIdleTimeout}, &idleConn{Conn: target, idle: TunnelIdleTimeout})
	rec.outcome = EgressOK
	if errors.Is(err, os.ErrDeadlineExceeded) {
		rec.outcome = EgressIdleTimeout
	}
	if err != nil {
		rec.err = err.Error()
	}
}

// refuse answers a CONNECT that will not be tunnelled: 403 with the reason
// for a refused destination, 502 when it could not be reached.
func (s *Server) refuse(client net.Conn, rec *egressRecord, err error) {
	var ref *egressRefused
	var body string
	if errors.As(err, &ref) {
		rec.status, rec.outcome, body = http.StatusForbidden, EgressRefused, ref.body()+"\n"
	} else {
		rec.status, rec.outcome = http.StatusBadGateway, EgressDialError
		body = fmt.Sprintf("detour: cannot connect to %s:%s: %v\n", rec.host, rec.port, err)
	}
	rec.err = err.Error()
	_, _ = fmt.Fprintf(client, "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		rec.status, http.StatusText(rec.status), len(body), body)
}

// splice copies client→target and target→client until both directions
// end. A side that finishes sending is half-closed towards the other (a
// client that shuts its write side still gets its answer); a side that
// fails ends both directions. It returns the bytes each way and the first
// error other than the ones splice caused by closing.
func splice(client, target net.Conn) (up, down int64, err error) {
	type result struct {
		n   int64
		err error
	}
	upc := make(chan result, 1)
	go func() {
		n, err := io.Copy(target, client)
		endDirection(target, client, err)
		upc <- result{n, err}
	}()
	down, derr := io.Copy(client, target)
	endDirection(client, target, derr)
	u := <-upc
	for _, e := range []error{derr, u.err} {
		if e != nil && !errors.Is(e, net.ErrClosed) {
			return u.n, down, e
		}
	}
	return u.n, down, nil
}

// endDirection ends one direction of a tunnel: after a clean end, dst's
// write side is shut, so that its peer sees the end of the stream; after a
// failure, or when dst cannot half-close, both connections are closed,
// which ends the other direction too.
func endDirection(dst, src net.Conn, err error) {
	if cw, ok := dst.(halfCloser); ok && err == nil && cw.CloseWrite() == nil {
		return
	}
	_ = dst.Close()
	_ = src.Close()
}

// forwarder forwards absolute-URI (plain-proxy) requests, http:// ones in
// practice: vendors are https-only, so there is nothing to intercept.
// It replaces goproxy's forwarding so that the dial is the egress policy's
// and a refusal is a 403 with its reason (goproxy answers 500).
func (s *Server) newForwarder() *httputil.ReverseProxy {
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		fc, ok := ctx.Value(forwardKey{}).(*forwardCtx)
		if !ok {
			// Every request reaches this transport through forward.
			return nil, &egressRefused{addr: addr, reason: "no egress decision for this request"}
		}
		return s.dialEgress(ctx, fc.pol, fc.rec, network, addr)
	}
	s.fwdTransport = chain.NewTransport(TunnelDialTimeout, nil, dial)
	return &httputil.ReverseProxy{
		// The request goes where its absolute URI says, as the app sent it
		// (hop-by-hop headers, Proxy-Authorization among them, are
		// removed by ReverseProxy; Rewrite also drops X-Forwarded-*).
		Rewrite:       func(*httputil.ProxyRequest) {},
		Transport:     s.fwdTransport,
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			rec := r.Context().Value(forwardKey{}).(*forwardCtx).rec
			rec.err = err.Error()
			var ref *egressRefused
			var op *net.OpError
			switch {
			case errors.As(err, &ref):
				rec.outcome = EgressRefused
				http.Error(w, ref.body(), http.StatusForbidden)
			case r.Context().Err() != nil:
				rec.outcome, rec.status = EgressClientGone, 499
			case errors.As(err, &op) && op.Op == "dial":
				rec.outcome = EgressDialError
				http.Error(w, fmt.Sprintf("detour: cannot connect to %s:%s: %v", rec.host, rec.port, err), http.StatusBadGateway)
			default:
				rec.outcome = EgressUpstreamErr
				http.Error(w, fmt.Sprintf("detour: forwarding to %s:%s failed: %v", rec.host, rec.port, err), http.StatusBadGateway)
			}
		},
	}
}

type forwardKey struct{}

// forwardCtx carries one forward's policy and record to the dialer.
type forwardCtx struct {
	pol *policy.Compiled
	rec *egressRecord
}

// forward serves an absolute-URI request.
func (s *Server) forward(w http.ResponseWriter, r *http.Request, pol *policy.Compiled) {
	if old := s.fwdPolicy.Swap(pol); old != nil && old != pol {
		// A pooled connection was judged by the policy it was dialled
		// under: after a reload, new requests get new connections.
		s.fwdTransport.CloseIdleConnections()
	}
	hostport := r.URL.Host
	if _, _, err := net.SplitHostPort(hostport); err != nil {
		port := "80"
		if r.URL.Scheme == "https" {
			port = "443"
		}
		hostport = net.JoinHostPort(r.URL.Hostname(), port)
	}
	rec := newEgressRecord(ModeForward, r.Method, hostport)
	rec.path = r.URL.Path
	defer rec.log(s.log)
	if reason := pol.HostRefusal(rec.host); reason != "" {
		ref := &egressRefused{addr: hostport, reason: reason}
		rec.status, rec.outcome, rec.err = http.StatusForbidden, EgressRefused, ref.Error()
		http.Error(w, ref.body(), http.StatusForbidden)
		return
	}
	var body *countingReader
	if r.Body != nil && r.Body != http.NoBody {
		body = &countingReader{ReadCloser: r.Body}
		r.Body = body
	}
	cw := &countingWriter{ResponseWriter: w}
	r = r.WithContext(context.WithValue(r.Context(), forwardKey{}, &forwardCtx{pol: pol, rec: rec}))
	s.fwd.ServeHTTP(cw, r)
	if rec.status == 0 {
		rec.status = cw.status
	}
	if rec.outcome == "" {
		rec.outcome = EgressOK
		rec.down = cw.n
	}
	if body != nil {
		rec.up = body.n
	}
}

// countingReader counts the request body bytes read from the app.
type countingReader struct {
	io.ReadCloser
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	c.n += int64(n)
	return n, err
}

// countingWriter counts the response body bytes written to the app.
type countingWriter struct {
	http.ResponseWriter
	status int
	n      int64
}

func (c *countingWriter) WriteHeader(code int) {
	if c.status == 0 && code >= 200 {
		c.status = code
	}
	c.ResponseWriter.WriteHeader(code)
}

func (c *countingWriter) Write(p []byte) (int, error) {
	if c.status == 0 {
		c.status = http.StatusOK
	}
	n, err := c.ResponseWriter.Write(p)
	c.n += int64(n)
	return n, err
}

// Unwrap lets ReverseProxy flush and hijack (an upgraded connection's
// bytes after the handshake are not counted).
func (c *countingWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }

// owns reports whether connecting to ap would reach one of detour's own
// listeners. A listener on the unspecified address (0.0.0.0, [::]) is
// reached through every address of this host, loopback included; and a
// connection to the unspecified address reaches this host, so it reaches a
// listener on any of its addresses.
func (g *selfGuard) owns(ap netip.AddrPort) bool {
	ip := ap.Addr().Unmap().WithZone("")
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, own := range g.addrs {
		if own.Port() != ap.Port() {
			continue
		}
		switch oip := own.Addr(); {
		case oip == ip, ip.IsUnspecified():
			return true
		case oip.IsUnspecified() && (ip.IsLoopback() || isLocalIP(net.IP(ip.AsSlice()))):
			return true
		}
	}
	return false
}

// halfCloser is a connection whose write side can be shut alone.
type halfCloser interface{ CloseWrite() error }

// CloseWrite half-closes the tunnel's connection underneath, for splice.
func (c *idleConn) CloseWrite() error {
	if hc, ok := c.Conn.(halfCloser); ok {
		return hc.CloseWrite()
	}
	return errors.ErrUnsupported
}

// CloseWrite half-closes the hijacked connection underneath, for splice.
func (c *bufferedConn) CloseWrite() error {
	if hc, ok := c.Conn.(halfCloser); ok {
		return hc.CloseWrite()
	}
	return errors.ErrUnsupported
}
