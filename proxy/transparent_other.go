//go:build !linux

package proxy

import (
	"errors"
	"net"
	"net/netip"
	"syscall"
)

// originalDst is Linux's alone: elsewhere the transparent listener refuses
// every connection.
func originalDst(net.Conn) (netip.AddrPort, error) {
	return netip.AddrPort{}, errors.New("transparent mode needs Linux (SO_ORIGINAL_DST)")
}

// markSocket: socket marks are Linux's; a policy with transparent.mark
// makes every dial fail, which says so.
func markSocket(_ syscall.RawConn, mark uint32) error {
	if mark == 0 {
		return nil
	}
	return errors.New("detour: transparent.mark (SO_MARK) needs Linux")
}
