package proxy

import (
	"net"
	"net/netip"
	"testing"
)

// TestSelfGuardMatchesWildcardListeners: a listener on 0.0.0.0 or [::] is
// reached through loopback and every address of this host, and a
// connection to the unspecified address reaches a listener on any address.
func TestSelfGuardMatchesWildcardListeners(t *testing.T) {
	t.Parallel()
	var local netip.Addr
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() {
				local, _ = netip.AddrFromSlice(n.IP)
				local = local.Unmap()
				break
			}
		}
	}
	guard := func(listen string) *selfGuard {
		g := &selfGuard{}
		g.add(net.TCPAddrFromAddrPort(netip.MustParseAddrPort(listen)))
		return g
	}
	for _, tc := range []struct {
		listen, dial string
		want         bool
	}{
		{"0.0.0.0:8787", "127.0.0.1:8787", true},
		{"0.0.0.0:8787", "127.0.0.9:8787", true},
		{"0.0.0.0:8787", "0.0.0.0:8787", true},
		{"0.0.0.0:8787", "[::ffff:127.0.0.1]:8787", true},
		{"0.0.0.0:8787", "127.0.0.1:8788", false},
		{"0.0.0.0:8787", "192.0.2.1:8787", false},
		{"[::]:8787", "127.0.0.1:8787", true},
		{"[::]:8787", "[::1]:8787", true},
		{"[::]:8787", "[::]:8787", true},
		{"127.0.0.1:8787", "127.0.0.1:8787", true},
		{"127.0.0.1:8787", "0.0.0.0:8787", true},
		{"127.0.0.1:8787", "[::]:8787", true},
		{"127.0.0.1:8787", "[::ffff:127.0.0.1]:8787", true},
		{"127.0.0.1:8787", "127.0.0.2:8787", false},
		{"[::1]:8787", "[::1]:8787", true},
	} {
		if got := guard(tc.listen).owns(netip.MustParseAddrPort(tc.dial)); got != tc.want {
			t.Errorf("listener %s, dial %s: owns = %v; want %v", tc.listen, tc.dial, got, tc.want)
		}
	}
	if local.IsValid() {
		dial := netip.AddrPortFrom(local, 8787)
		if !guard("0.0.0.0:8787").owns(dial) || !guard("[::]:8787").owns(dial) {
			t.Errorf("a wildcard listener is not matched by this host's address %s", dial)
		}
		if guard("127.0.0.1:8787").owns(dial) {
			t.Errorf("a loopback listener is matched by %s, which does not reach it", dial)
		}
	}
	if err := guard("0.0.0.0:8787").control("tcp4", "127.0.0.1:8787", nil); err == nil {
		t.Error("control let a dial to the wildcard listener through")
	}
}
