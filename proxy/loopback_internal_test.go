package proxy

import (
	"net"
	"testing"
)

// TestLoopbackHostAsParseIP holds loopbackHost, which tries netip first,
// to what it said with net.ParseIP alone.
func TestLoopbackHostAsParseIP(t *testing.T) {
	t.Parallel()
	parseIPOnly := func(hostport string) bool {
		h, _ := splitHostPort(hostport)
		if h == "localhost" {
			return true
		}
		ip := net.ParseIP(h)
		return ip != nil && (ip.IsLoopback() || isLocalIP(ip))
	}
	for _, h := range []string{
		"127.0.0.1:8787", "127.0.0.1", "127.1.2.3:80", "[::1]:8787", "::1", "[::1]", "localhost:8787", "LocalHost",
		"[::ffff:127.0.0.1]:80", "::ffff:127.0.0.1", "[fe80::1%25lo]:80", "fe80::1%lo", "[::1%lo]:1", "127.0.0.01",
		"0x7f.0.0.1", "2130706433", "10.0.0.1:80", "192.0.2.1", "[2001:db8::1]:443", "example.com:80", "", ":80",
		"localhost.", "127.0.0.1.", "[127.0.0.1]:80", "0.0.0.0", "[::]:80",
	} {
		if got, want := loopbackHost(h), parseIPOnly(h); got != want {
			t.Errorf("loopbackHost(%q) = %v, net.ParseIP says %v", h, got, want)
		}
	}
}
