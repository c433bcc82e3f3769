package proxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"syscall"
	"time"

	"github.com/detour-proxy/detour/internal/chain"
	"github.com/detour-proxy/detour/internal/sniff"
	"github.com/detour-proxy/detour/policy"
)

// This file is transparent mode: the listener for connections the kernel
// redirected to detour (`detour redirect install`), from apps that honour
// no proxy variable. Each connection is judged as a CONNECT would be, with
// the original destination standing for the CONNECT target and the TLS
// server name for its host: a host a route names is intercepted through
// the same path as explicit mode (Server.intercept). A plain HTTP
// connection is judged by its first request's Host header the same way
// (transparent_http.go). Anything else is spliced byte for byte to the
// address the app dialled, and never decrypted.

// ModeTransparent is the log lines' mode for connections that reached
// detour through the transparent listener: intercepted requests (chain's
// log line) and spliced connections (the egress log line) alike.
const ModeTransparent = "transparent"

// TransparentHelloTimeout bounds how long a redirected connection may take
// to send its first bytes (the TLS ClientHello) before detour decides
// without them: the connection is then spliced with what it sent.
const TransparentHelloTimeout = 5 * time.Second

// ServeTransparent accepts redirected connections on lns until ctx ends,
// when it closes them. It returns at once; each listener is also guarded,
// as detour's other listeners are, from dials back into detour.
func (s *Server) ServeTransparent(ctx context.Context, lns ...net.Listener) {
	for _, ln := range lns {
		s.guard.add(ln.Addr())
	}
	s.own.on.Store(true)
	for _, ln := range lns {
		go func() {
			<-ctx.Done()
			_ = ln.Close()
		}()
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					if errors.Is(err, net.ErrClosed) {
						return
					}
					// EMFILE and the like: say so, wait, go on, as
					// net/http's server does.
					s.log.Warn().Str("component", "transparent").Err(err).Msg("accept failed")
					select {
					case <-ctx.Done():
						return
					case <-time.After(50 * time.Millisecond):
					}
					continue
				}
				go s.serveTransparent(ctx, c)
			}
		}()
	}
}

// serveTransparent decides one redirected connection.
func (s *Server) serveTransparent(ctx context.Context, c net.Conn) {
	pol := s.store.Load()
	dst, err := originalDstOf(c)
	if err != nil {
		rec := newEgressRecord(ModeTransparent, "", c.LocalAddr().String())
		rec.status, rec.outcome, rec.err = 0, EgressRefused, err.Error()
		rec.log(s.log)
		_ = c.Close()
		return
	}
	dst = netip.AddrPortFrom(dst.Addr().Unmap(), dst.Port())
	port := strconv.Itoa(int(dst.Port()))
	if s.guard.owns(dst) {
		// An app dialled detour's own address (this listener, directly):
		// splicing would connect detour to itself.
		rec := newEgressRecord(ModeTransparent, "", dst.String())
		rec.setIP(dst.Addr())
		rec.outcome = EgressRefused
		rec.err = (&egressRefused{addr: dst.String(), reason: dst.String() + " is detour's own listener (always refused)"}).Error()
		rec.log(s.log)
		_ = c.Close()
		return
	}

	_ = c.SetReadDeadline(time.Now().Add(TransparentHelloTimeout))
	p, err := sniff.Read(c)
	_ = c.SetReadDeadline(time.Time{})
	if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) && !errors.Is(err, sniff.ErrMalformed) && !errors.Is(err, sniff.ErrTooLarge) {
		// The app went away before saying anything useful.
		_ = c.Close()
		return
	}
	// Checked once the app has sent its first bytes: detour's own dial
	// has returned, and noted its address, before detour writes on it.
	if s.fromDetour(c) {
		rec := newEgressRecord(ModeTransparent, p.Method, dst.String())
		rec.setIP(dst.Addr())
		rec.outcome, rec.err = EgressRefused, errLooped.Error()
		rec.log(s.log)
		_ = c.Close()
		return
	}
	if p.TLS && p.ServerName != "" && err == nil && pol.Intercepts(p.ServerName) {
		s.intercept(&replayConn{Conn: c, prefix: p.Raw}, chain.Target{Host: p.ServerName, Port: port, Mode: ModeTransparent})
		return
	}
	if !p.TLS && p.Host != "" && err == nil && pol.Intercepts(p.Host) {
		s.serveTransparentHTTP(&replayConn{Conn: c, prefix: p.Raw}, chain.Target{Host: p.Host, Port: port, Mode: ModeTransparent, Plain: true})
		return
	}
	host := p.ServerName
	if !p.TLS {
		host = p.Host
	}
	if host == "" {
		host = dst.Addr().String()
	}
	s.splice(ctx, c, pol, p, host, dst)
}

// splice connects an app's redirected connection to the address it
// dialled, replays what was read of it, and copies both ways, as a tunnel
// does; one log line says how it went.
func (s *Server) splice(ctx context.Context, c net.Conn, pol *policy.Compiled, p sniff.Start, host string, dst netip.AddrPort) {
	rec := newEgressRecord(ModeTransparent, p.Method, net.JoinHostPort(host, strconv.Itoa(int(dst.Port()))))
	defer rec.log(s.log)
	defer c.Close()
	dctx, cancel := context.WithTimeout(ctx, TunnelDialTimeout)
	// The address, not the name: the app chose it, and a name in a server
	// name or a Host header is the app's word, which DNS may answer with
	// another address. The egress policy does not judge it: egress is about
	// what an app asks a proxy for, and this app asked for nothing; it
	// dialled an address it could reach without detour, and refusing it
	// would only break the app's other traffic (with egress.tunnel "deny",
	// every HTTPS call to a host no route names). The redirect rules already
	// leave loopback and link-local addresses, the metadata service among
	// them, out. Only detour's own listeners stay refused.
	target, err := s.dialOut(dctx, pol, rec, "tcp", dst.String(), nil)
	cancel()
	if err != nil {
		s.refuseSplice(c, rec, p, err)
		return
	}
	defer target.Close()
	if _, err := target.Write(p.Raw); err != nil {
		rec.outcome, rec.err = EgressUpstreamErr, err.Error()
		return
	}
	up, down, err := splice(&idleConn{Conn: c, idle: TunnelIdleTimeout}, &idleConn{Conn: target, idle: TunnelIdleTimeout})
	rec.up, rec.down = up+int64(len(p.Raw)), down
	rec.outcome = EgressOK
	if errors.Is(err, os.ErrDeadlineExceeded) {
		rec.outcome = EgressIdleTimeout
	}
	if err != nil {
		rec.err = err.Error()
	}
}

// refuseSplice ends a redirected connection detour will not splice. A plain
// HTTP request gets a 403 or 502 saying why, as a refused CONNECT does; a
// TLS client cannot be answered without a certificate for its host, so its
// connection is closed.
func (s *Server) refuseSplice(c net.Conn, rec *egressRecord, p sniff.Start, err error) {
	if p.Method != "" {
		s.refuse(c, rec, err)
		return
	}
	var ref *egressRefused
	rec.outcome = EgressDialError
	if errors.As(err, &ref) {
		rec.outcome = EgressRefused
	}
	rec.err = err.Error()
	if tc, ok := c.(*net.TCPConn); ok {
		// A reset, not a clean end: the app must not take it for an
		// empty answer.
		_ = tc.SetLinger(0)
	}
}

// replayConn reads first the bytes detour already read from the
// connection (the ClientHello, or the start of a plain HTTP request), then
// the connection.
type replayConn struct {
	net.Conn
	prefix []byte
}

func (c *replayConn) Read(p []byte) (int, error) {
	if len(c.prefix) > 0 {
		n := copy(p, c.prefix)
		c.prefix = c.prefix[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

// ListenTransparent listens on the policy's transparent.listen. The kernel
// redirects a local IPv4 connection to 127.0.0.1 and an IPv6 one to ::1,
// so a loopback address listens on both loopbacks at the same port; a host
// without IPv6 (or without IPv4) gets the one it has.
func ListenTransparent(addr string) ([]net.Listener, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	ip, _ := netip.ParseAddr(host)
	if host != "localhost" && !ip.IsLoopback() {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return nil, err
		}
		return []net.Listener{ln}, nil
	}
	first, second := "127.0.0.1", "::1"
	if ip.Is6() && !ip.Is4In6() {
		first, second = second, first
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(first, port))
	if err != nil {
		return nil, err
	}
	// Port 0 (tests) is chosen by the first listen; the second takes it.
	_, port, _ = net.SplitHostPort(ln.Addr().String())
	ln2, err := net.Listen("tcp", net.JoinHostPort(second, port))
	if err != nil {
		if errors.Is(err, syscall.EADDRNOTAVAIL) || errors.Is(err, syscall.EAFNOSUPPORT) {
			return []net.Listener{ln}, nil
		}
		ln.Close()
		return nil, fmt.Errorf("listen on %s too: %w", net.JoinHostPort(second, port), err)
	}
	return []net.Listener{ln, ln2}, nil
}

// startTransparent starts the transparent listener when the policy has
// one: on lns when given (tests), else on transparent.listen.
func (s *Server) startTransparent(ctx context.Context, pol *policy.Compiled, lns []net.Listener) error {
	// Listeners handed over come with their redirect: `detour run
	// --transparent` installs its own cgroup rule, and telling its user to
	// run `detour redirect install` would be wrong.
	own := len(lns) == 0
	if own {
		if !pol.Transparent.Enabled() {
			return nil
		}
		var err error
		lns, err = ListenTransparent(pol.Transparent.Listen)
		if err != nil {
			return fmt.Errorf("listen on %s (policy field transparent.listen): %w", pol.Transparent.Listen, err)
		}
	}
	s.ServeTransparent(ctx, lns...)
	ev := s.log.Info().Str("component", "transparent")
	addrs := make([]string, len(lns))
	for i, ln := range lns {
		addrs[i] = ln.Addr().String()
	}
	_, port, _ := net.SplitHostPort(addrs[0])
	ev.Strs("listen", addrs).Uint32("mark", pol.Transparent.Mark)
	if own {
		ev.Str("redirect", "detour redirect install --to-port "+port+" --exclude-uid <detour's uid>")
	}
	ev.Msg("transparent listener is listening")
	return nil
}

// dialControl is Server.Dial's control: the self-guard, then the socket
// mark of the policy in force.
func (s *Server) dialControl(network, address string, rc syscall.RawConn) error {
	if err := s.guard.control(network, address, rc); err != nil {
		return err
	}
	return markSocket(rc, s.store.Load().Transparent.Mark)
}
