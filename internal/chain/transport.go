package chain

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"maps"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/detour-proxy/detour/internal/cloud"
	"github.com/detour-proxy/detour/policy"
)

// DialFunc dials an upstream. The proxy supplies one that refuses detour's
// own listen addresses, so that a policy pointing at detour itself cannot
// make it call itself forever.
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// Transports hands out one *http.Transport per upstream configuration and
// keeps it across policy reloads, so that a reload does not throw away warm
// connections. Safe for concurrent use.
type Transports struct {
	// Dial, if set, wraps every upstream dial (after the connect timeout
	// is applied).
	Dial DialFunc
	// Override, when set, carries every upstream request instead of the
	// per-upstream transports: the simulation and benchmarks reach fake
	// vendors in memory through it.
	Override http.RoundTripper

	// m is read without a lock by every attempt; mu orders the rare
	// writers, each of which stores a new map (copy on write).
	mu sync.Mutex
	m  atomic.Pointer[map[transportKey]*http.Transport]
	// cloud holds the cloud upstreams' credentials (internal/chain/cloud.go).
	cloud cloud.Registry
}

type transportKey struct {
	// caHash, not the path: a rotated ca_file gets a new transport.
	caHash  string
	connect time.Duration
}

// For returns the round tripper for an upstream.
func (t *Transports) For(u *policy.Upstream) http.RoundTripper {
	if t.Override != nil {
		return t.Override
	}
	k := transportKey{caHash: u.CAHash, connect: u.Timeouts.Connect}
	if m := t.m.Load(); m != nil {
		if tr, ok := (*m)[k]; ok {
			return tr
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	old := t.m.Load()
	if old != nil {
		if tr, ok := (*old)[k]; ok {
			return tr
		}
	}
	m := make(map[transportKey]*http.Transport, 1)
	if old != nil {
		maps.Copy(m, *old)
	}
	tr := NewTransport(u.Timeouts.Connect, u.RootCAs, t.Dial)
	m[k] = tr
	t.m.Store(&m)
	return tr
}

// CloseIdle closes idle connections of every transport.
func (t *Transports) CloseIdle() {
	if m := t.m.Load(); m != nil {
		for _, tr := range *m {
			tr.CloseIdleConnections()
		}
	}
}

// upstreamWriteBuffer is the size of the buffer an upstream connection
// writes its requests through (NewTransport).
const upstreamWriteBuffer = 2 << 10

// NewTransport returns the transport detour uses to reach upstreams and
// passed-through hosts. Unlike goproxy's default transport it verifies TLS
// (system roots plus roots, when given), and it never reads HTTPS_PROXY:
// detour is itself the HTTPS_PROXY of the app, and often of its own process
// too (detour run), so honouring it would send detour's traffic back to
// detour.
func NewTransport(connect time.Duration, roots *x509.CertPool, dial DialFunc) *http.Transport {
	d := &net.Dialer{Timeout: connect, KeepAlive: 30 * time.Second}
	dialCtx := d.DialContext
	if dial != nil {
		dialCtx = func(ctx context.Context, network, addr string) (net.Conn, error) {
			ctx, cancel := context.WithTimeout(ctx, connect)
			defer cancel()
			return dial(ctx, network, addr)
		}
	}
	// RootCAs nil means the system roots; an upstream's ca_file pool
	// already contains the system roots plus its own.
	tlsCfg := &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: roots}
	return &http.Transport{
		Proxy:               nil,
		DialContext:         dialCtx,
		TLSClientConfig:     tlsCfg,
		TLSHandshakeTimeout: connect,
		ForceAttemptHTTP2:   true,
		// The request is written once, at the start of the connection's
		// exchange, and the buffer then sits idle for as long as the
		// answer streams (and while the connection waits in the pool);
		// net/http's 4 KiB default made every open stream keep 4 KiB for
		// it. A head and body beyond 2 KiB go out as they did beyond 4
		// KiB: the buffer's worth, then the rest in one write.
		WriteBufferSize:       upstreamWriteBuffer,
		MaxIdleConns:          256,
		MaxIdleConnsPerHost:   64,
		IdleConnTimeout:       90 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
}
