// Package cidr parses the destination ranges that `detour redirect install`
// and the injector let pass unredirected. It is its own package so that the
// webhook's binary can check them without linking the nftables code of
// internal/redirect.
package cidr

import (
	"fmt"
	"net/netip"
	"strings"
)

// Parse reads a CIDR such as 10.0.0.0/8, or a bare address as its own /32
// or /128. A prefix with host bits set (10.0.0.1/8) is refused rather than
// masked: whoever wrote it meant something, and the message says what it
// would become.
func Parse(s string) (netip.Prefix, error) {
	if !strings.Contains(s, "/") {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("%q is not a CIDR such as 10.0.0.0/8 or an address", s)
		}
		a = a.Unmap()
		return netip.PrefixFrom(a, a.BitLen()), nil
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%q is not a CIDR such as 10.0.0.0/8 or an address", s)
	}
	if p.Masked() != p {
		return netip.Prefix{}, fmt.Errorf("%q has bits set past its /%d: did you mean %s?", s, p.Bits(), p.Masked())
	}
	return p, nil
}
