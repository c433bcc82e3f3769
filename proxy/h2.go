package proxy

import (
	"crypto/tls"
	"net"
	"net/http"
	"time"

	"github.com/detour-proxy/detour/internal/chain"
)

// This file is HTTP/2 on intercepted connections. detour's leaf offers h2
// and http/1.1 by ALPN, as the vendors' own servers do, so that a client
// that speaks only h2 is intercepted too. Both are served by the inner
// http.Server with the same handler: after the handshake, an h2 connection
// is handed to it as the bare *tls.Conn, which makes net/http's own HTTP/2
// server take it (its TLSNextProto "h2", set up by Serve), while an
// HTTP/1.1 one is wrapped in a framingConn first, as before. goproxy's own
// HTTP/2 support is not used: it relays raw frames past the handlers.

// Bounds of the HTTP/2 server of intercepted connections. An HTTP/1.1
// connection holds one request at a time; an h2 one holds up to
// InterceptedMaxStreams, each buffering at most InterceptedStreamWindow of
// unread request body, and all of them together at most
// InterceptedConnWindow, so that what one connection can make detour hold
// stays bounded. The header list is bounded as for HTTP/1.1, by
// http.DefaultMaxHeaderBytes (the inner server's MaxHeaderBytes is unset).
const (
	// InterceptedMaxStreams is the number of concurrent streams an app may
	// open on one intercepted h2 connection (SETTINGS_MAX_CONCURRENT_STREAMS):
	// more than any SDK opens to one vendor, and the value most servers use.
	InterceptedMaxStreams = 100
	// InterceptedMaxFrameSize is the largest frame detour reads
	// (SETTINGS_MAX_FRAME_SIZE): the protocol's default and minimum, so the
	// read buffer of a connection stays at 16 KiB.
	InterceptedMaxFrameSize = 16 << 10
	// InterceptedStreamWindow is the flow-control window of one stream's
	// request body: what an app may send ahead of the chain reading it.
	InterceptedStreamWindow = 1 << 20
	// InterceptedConnWindow is the flow-control window of a whole
	// connection, shared by its streams.
	InterceptedConnWindow = 1 << 20
	// InterceptedHeaderTable is the HPACK dynamic table size, each way:
	// the protocol's default.
	InterceptedHeaderTable = 4 << 10
)

// interceptedProtocols are the protocols of the inner server: HTTP/1.1 and
// HTTP/2 over TLS (never h2c: intercepted connections are always TLS).
func interceptedProtocols() *http.Protocols {
	p := new(http.Protocols)
	p.SetHTTP1(true)
	p.SetHTTP2(true)
	return p
}

// interceptedHTTP2 is the inner server's HTTP/2 configuration. The idle
// timeout is the server's own IdleTimeout, which net/http's HTTP/2 server
// takes from it.
func interceptedHTTP2() *http.HTTP2Config {
	return &http.HTTP2Config{
		MaxConcurrentStreams:          InterceptedMaxStreams,
		MaxReadFrameSize:              InterceptedMaxFrameSize,
		MaxReceiveBufferPerStream:     InterceptedStreamWindow,
		MaxReceiveBufferPerConnection: InterceptedConnWindow,
		MaxDecoderHeaderTableSize:     InterceptedHeaderTable,
		MaxEncoderHeaderTableSize:     InterceptedHeaderTable,
	}
}

// serveIntercepted completes the TLS handshake of an intercepted
// connection and hands it to the inner server by the protocol the app
// chose, with requests going to the chain as t. The handshake is bounded
// as net/http bounds its own (by the header timeout), in both directions.
func (s *Server) serveIntercepted(tc *tls.Conn, client net.Conn, t chain.Target) {
	_ = tc.SetDeadline(time.Now().Add(ReadHeaderTimeout))
	if err := tc.Handshake(); err != nil {
		s.inner.ErrorLog.Printf("http: TLS handshake error from %s: %v", client.RemoteAddr(), err)
		_ = tc.Close()
		return
	}
	_ = tc.SetDeadline(time.Time{})
	var c net.Conn = tc
	if tc.ConnectionState().NegotiatedProtocol != http2Proto {
		// HTTP/1.1 framing is watched for ambiguous requests. HTTP/2
		// frames every request itself, and net/http's HTTP/2 server
		// refuses the connection-specific headers (Transfer-Encoding
		// among them) that make a request ambiguous in HTTP/1.1.
		c = newFramingConn(tc)
	}
	s.targets.Store(c, t)
	if !s.innerLn.push(c) {
		s.targets.Delete(c)
		_ = c.Close()
	}
}

// http2Proto is HTTP/2's ALPN protocol id.
const http2Proto = "h2"
