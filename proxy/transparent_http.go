package proxy

import (
	"fmt"
	"net"
	"net/http"

	"github.com/detour-proxy/detour/internal/chain"
	"github.com/detour-proxy/detour/rewrite"
)

// This file is plain HTTP in transparent mode. A redirected connection
// that is not TLS, and whose first request's Host header names a host a
// route names (typically an app calling http://… on port 80), is served by
// detour exactly as an intercepted TLS connection is, minus the TLS: the
// inner server reads its requests (HTTP/1.1 only; net/http serves no h2c
// there), each one passes the framing check and goes to the chain as the
// connection's target, with the same log line. A later request on the
// same connection for another host is answered 421 by the inner handler,
// as one inside an intercepted tunnel is: the connection was decided for
// one host, and neither the chain nor a splice may take it elsewhere.
// Every other plain connection (no Host in the first bytes, a host no route
// names, not HTTP at all) is spliced as before.

// originalDstOf is how serveTransparent reads a connection's original
// destination: originalDst, which the tests stand in for, since without
// root they cannot have the kernel redirect a connection.
var originalDstOf = originalDst

// serveTransparentHTTP hands a redirected plain HTTP connection, c (which
// replays the bytes already read of it), to the inner server, with its
// requests going to the chain as t.
func (s *Server) serveTransparentHTTP(c net.Conn, t chain.Target) {
	fc := newFramingConn(c)
	s.targets.Store(fc, t)
	if !s.innerLn.push(fc) {
		s.targets.Delete(fc)
		_ = fc.Close()
	}
}

// misdirected answers a request for host on a connection intercepted for
// t.Host (a TLS tunnel or a plain HTTP connection, decided for one host):
// 421 Misdirected Request, in the error envelope of t.Host's vendor, since
// the app's SDK believes it is talking to that vendor and parses only its
// errors (Gemini's envelope has no 421: it gets Google's 400
// INVALID_ARGUMENT, as rewrite.ErrorBody gives it).
func (s *Server) misdirected(w http.ResponseWriter, t chain.Target, host string) {
	status, body := rewrite.ErrorBody(chain.HostShape(s.store.Load(), t.Host), rewrite.AppError{
		Status:  http.StatusMisdirectedRequest,
		Class:   "invalid_request",
		Message: fmt.Sprintf("detour: request for %q on a connection intercepted for %q; open a connection of its own for it", host, t.Host),
	})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
