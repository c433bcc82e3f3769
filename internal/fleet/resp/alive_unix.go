//go:build unix

package resp

import (
	"crypto/tls"
	"errors"
	"net"
	"syscall"
)

// liveness peeks at an idle connection's socket to tell whether it is
// still open. Made once per connection, so that a check allocates nothing.
type liveness struct {
	raw  syscall.RawConn
	ok   bool
	b    [1]byte
	peek func(fd uintptr) bool
}

func newLiveness(nc net.Conn) *liveness {
	if tc, ok := nc.(*tls.Conn); ok {
		nc = tc.NetConn()
	}
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return nil
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	l := &liveness{raw: raw}
	l.peek = func(fd uintptr) bool {
		_, err := syscall.Read(int(fd), l.b[:])
		l.ok = errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EWOULDBLOCK) || errors.Is(err, syscall.EINTR)
		return true // never wait for readiness
	}
	return l
}

// alive is one non-blocking read of the socket. Nothing to read (EAGAIN)
// is an open connection; end of stream is one the server closed; bytes on
// an idle connection are a protocol violation (or a TLS close_notify), so
// that is not alive either. It costs one system call per reuse, and saves
// the command that would otherwise fail on a connection the server dropped
// while it was idle (a restart, CLIENT KILL, the server's idle timeout).
func (l *liveness) alive() bool {
	if l == nil {
		return true
	}
	l.ok = false
	return l.raw.Read(l.peek) == nil && l.ok
}
