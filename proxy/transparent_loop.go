package proxy

import (
	"errors"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
)

// This file keeps a redirect that does not exclude detour from turning it
// against itself. Without --exclude-uid or --exclude-mark, every
// connection detour opens is redirected back to its transparent listener;
// a spliced one would be spliced again, and again, until the process runs
// out of file descriptors. While a transparent listener runs, detour notes
// the local address of each connection it opens, and refuses a redirected
// connection that comes from one of them, saying what to fix.

// ownConns is the set of local addresses of detour's open connections.
type ownConns struct {
	on    atomic.Bool
	addrs sync.Map // netip.AddrPort → struct{}
}

// errLooped is why a redirected connection from detour itself is refused.
var errLooped = errors.New("a connection detour itself opened was redirected back to it: " +
	"install the redirect with --exclude-uid <detour's uid>, or set transparent.mark and install with --exclude-mark <mark>")

func addrPortOf(a net.Addr) (netip.AddrPort, bool) {
	ta, ok := a.(*net.TCPAddr)
	if !ok {
		return netip.AddrPort{}, false
	}
	ap := ta.AddrPort()
	return netip.AddrPortFrom(ap.Addr().Unmap().WithZone(""), ap.Port()), true
}

// trackOwn notes a connection detour opened, while transparent mode is on.
func (s *Server) trackOwn(c net.Conn, err error) (net.Conn, error) {
	if err != nil || !s.own.on.Load() {
		return c, err
	}
	key, ok := addrPortOf(c.LocalAddr())
	if !ok {
		return c, nil
	}
	s.own.addrs.Store(key, struct{}{})
	return &ownConn{Conn: c, own: &s.own, key: key}, nil
}

// fromDetour reports whether a redirected connection was opened by detour.
func (s *Server) fromDetour(c net.Conn) bool {
	key, ok := addrPortOf(c.RemoteAddr())
	if !ok {
		return false
	}
	_, own := s.own.addrs.Load(key)
	return own
}

// ownConn forgets its address when it is closed.
type ownConn struct {
	net.Conn
	own  *ownConns
	key  netip.AddrPort
	once sync.Once
}

func (c *ownConn) Close() error {
	c.once.Do(func() { c.own.addrs.Delete(c.key) })
	return c.Conn.Close()
}

// CloseWrite half-closes the connection underneath, for splice.
func (c *ownConn) CloseWrite() error {
	if hc, ok := c.Conn.(halfCloser); ok {
		return hc.CloseWrite()
	}
	return errors.ErrUnsupported
}
