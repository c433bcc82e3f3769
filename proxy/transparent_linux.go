//go:build linux

package proxy

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"syscall"

	"golang.org/x/sys/unix"
)

// ip6tSOOriginalDst is IP6T_SO_ORIGINAL_DST (linux/netfilter_ipv6/
// ip6_tables.h), which x/sys/unix does not name; it has SO_ORIGINAL_DST's
// value, at the IPv6 level.
const ip6tSOOriginalDst = 80

// originalDst returns the address a redirected connection was dialled to,
// as conntrack recorded it before the redirect rewrote it: SO_ORIGINAL_DST
// for IPv4, IP6T_SO_ORIGINAL_DST for IPv6. A connection that was not
// redirected gets its own local address back (conntrack's tuple is
// unchanged), or an error when conntrack does not track it.
func originalDst(c net.Conn) (netip.AddrPort, error) {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return netip.AddrPort{}, fmt.Errorf("not a TCP connection (%T)", c)
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return netip.AddrPort{}, err
	}
	local, _ := tc.LocalAddr().(*net.TCPAddr)
	v4 := local != nil && local.IP.To4() != nil
	var ap netip.AddrPort
	var serr error
	err = rc.Control(func(fd uintptr) {
		if v4 {
			// sockaddr_in fits in the 20 bytes of an IPv6Mreq.
			m, err := unix.GetsockoptIPv6Mreq(int(fd), unix.SOL_IP, unix.SO_ORIGINAL_DST)
			if err != nil {
				serr = err
				return
			}
			b := m.Multiaddr
			ap = netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[4:8])), binary.BigEndian.Uint16(b[2:4]))
			return
		}
		// sockaddr_in6 is the first 28 bytes of an IPv6MTUInfo.
		m, err := unix.GetsockoptIPv6MTUInfo(int(fd), unix.SOL_IPV6, ip6tSOOriginalDst)
		if err != nil {
			serr = err
			return
		}
		// The port is in network order in memory.
		port := binary.BigEndian.Uint16(binary.NativeEndian.AppendUint16(nil, m.Addr.Port))
		ap = netip.AddrPortFrom(netip.AddrFrom16(m.Addr.Addr).Unmap(), port)
	})
	if err == nil {
		err = serr
	}
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("reading the original destination (SO_ORIGINAL_DST): %w", err)
	}
	return ap, nil
}

// markSocket sets SO_MARK on a socket detour is about to connect, so that
// redirect rules with --exclude-mark let it pass; mark 0 sets nothing.
func markSocket(rc syscall.RawConn, mark uint32) error {
	if mark == 0 {
		return nil
	}
	var serr error
	err := rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_MARK, int(mark))
	})
	if err == nil {
		err = serr
	}
	if err != nil {
		return fmt.Errorf("detour: setting transparent.mark %d (SO_MARK) on its connection: %w (needs CAP_NET_ADMIN)", mark, err)
	}
	return nil
}
