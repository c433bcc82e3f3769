//go:build unix

package resp

import (
	"crypto/tls"
	"errors"
	"net"
	"syscall"
)

// alive says whether an idle connection is still open: one non-blocking
// read of its socket. Nothing to read (EAGAIN) is an open connection; end
// of stream is one the server closed; bytes on an idle connection are a
// protocol violation (or a TLS close_notify), so that is not alive either.
// It costs one system call per reuse, and saves the command that would
// otherwise fail on a connection the server dropped while it was idle.
func alive(nc net.Conn) bool {
	if tc, ok := nc.(*tls.Conn); ok {
		nc = tc.NetConn()
	}
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return true
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	ok = false
	var b [1]byte
	err = rc.Read(func(fd uintptr) bool {
		_, rerr := syscall.Read(int(fd), b[:])
		ok = errors.Is(rerr, syscall.EAGAIN) || errors.Is(rerr, syscall.EWOULDBLOCK) || errors.Is(rerr, syscall.EINTR)
		return true // never wait for readiness
	})
	return err == nil && ok
}
