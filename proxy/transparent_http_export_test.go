package proxy

import (
	"net"
	"net/netip"
	"sync"
	"testing"
)

// fakeDsts maps a transparent listener's address to the original
// destination its connections are given (FakeOriginalDst).
var fakeDsts sync.Map

func init() {
	real := originalDstOf
	originalDstOf = func(c net.Conn) (netip.AddrPort, error) {
		if d, ok := fakeDsts.Load(c.LocalAddr().String()); ok {
			return d.(netip.AddrPort), nil
		}
		return real(c)
	}
}

// FakeOriginalDst makes every connection accepted on the transparent
// listener at listen look, until the test ends, as if the kernel had
// redirected it from dst: tests without root cannot install a redirect,
// and a connection made straight to the listener has no other original
// destination. Each harness listens on a port of its own, so parallel
// tests do not see each other's.
func FakeOriginalDst(tb testing.TB, listen string, dst netip.AddrPort) {
	tb.Helper()
	fakeDsts.Store(listen, dst)
	tb.Cleanup(func() { fakeDsts.Delete(listen) })
}
