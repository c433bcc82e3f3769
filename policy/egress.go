package policy

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
)

// This file compiles the egress section and listen_public: where an app may
// ask detour to connect, and whether detour may listen where other machines
// reach it. Egress judges only what an app asks the proxy for (CONNECT to a
// host no route names, absolute-URI requests); the policy's own upstreams
// are the policy author's choice and are not judged by it.

// EgressFile is the egress section of policy.json.
type EgressFile struct {
	// Tunnel is what happens to a CONNECT or absolute-URI request for a host
	// no route names: "allow" tunnels (or forwards) it untouched, as a
	// sidecar sharing the app's network namespace would let the app connect
	// anyway; "deny" answers 403, so that only hosts a route names pass.
	// Default DefaultEgressTunnel ("allow").
	Tunnel string `json:"tunnel,omitempty"`
	// DenyCIDRs are address ranges an app may not reach through detour,
	// judged on the address actually dialled (after DNS resolution, so a
	// name that resolves into a range is refused too). Absent:
	// DefaultDenyCIDRs (loopback). A list given here replaces that default;
	// [] allows loopback. Link-local and cloud metadata addresses, the
	// unspecified address and detour's own listeners are refused whatever
	// this says.
	DenyCIDRs []string `json:"deny_cidrs,omitempty"`
}

// The values of egress.tunnel.
const (
	// EgressAllow tunnels and forwards requests for any host not refused by
	// an address range.
	EgressAllow = "allow"
	// EgressDeny refuses every request for a host no route names.
	EgressDeny = "deny"
	// DefaultEgressTunnel is egress.tunnel's default.
	DefaultEgressTunnel = EgressAllow
)

// DefaultDenyCIDRs is egress.deny_cidrs' default: loopback. A sidecar shares
// its pod's network namespace, so loopback there is the app's own services
// and detour's: the app reaches them directly and has no reason to ask the
// proxy for them, while a request that does (127.0.0.1:22, a database bound
// to localhost) is the classic way to turn a proxy against its host.
var DefaultDenyCIDRs = []string{"127.0.0.0/8", "::1/128"}

// alwaysDenied are ranges no policy can open to apps: addresses that reach
// this host under another name, and the link-local and cloud metadata
// addresses, where instance credentials are served to anything that asks.
var alwaysDenied = []struct {
	prefix netip.Prefix
	reason string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), "the unspecified address, which reaches this host"},
	{netip.MustParsePrefix("::/128"), "the unspecified address, which reaches this host"},
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local, where cloud metadata services answer"},
	{netip.MustParsePrefix("fe80::/10"), "link-local"},
	// AWS's IPv6 instance metadata address and Alibaba Cloud's metadata
	// address are outside the link-local ranges.
	{netip.MustParsePrefix("fd00:ec2::254/128"), "a cloud metadata address"},
	{netip.MustParsePrefix("100.100.100.200/32"), "a cloud metadata address"},
}

// EgressPolicy is the compiled egress section.
type EgressPolicy struct {
	// Tunnel is EgressAllow or EgressDeny.
	Tunnel string
	// DenyCIDRs are the ranges of egress.deny_cidrs (DefaultDenyCIDRs when
	// the field is absent); the always-refused ranges are not in it.
	DenyCIDRs []netip.Prefix
}

// Refusal says why an app may not have detour connect to ip, or "" when it
// may. It knows the address ranges only; detour's own listeners are the
// proxy's to check.
func (e *EgressPolicy) Refusal(ip netip.Addr) string {
	// An IPv4-mapped IPv6 address reaches the IPv4 host: judge that one.
	ip = ip.Unmap().WithZone("")
	for _, d := range alwaysDenied {
		if d.prefix.Contains(ip) {
			return fmt.Sprintf("%s is %s (always refused)", ip, d.reason)
		}
	}
	for _, p := range e.DenyCIDRs {
		if p.Contains(ip) {
			return fmt.Sprintf("%s is in egress.deny_cidrs (%s)", ip, p)
		}
	}
	return ""
}

// HostRefusal says why an app may not have detour connect to host (a name
// or an IP literal, no port) at all, before any name is resolved, or ""
// when it may: with egress.tunnel "deny", only hosts a route names pass.
func (c *Compiled) HostRefusal(host string) string {
	if c.Egress.Tunnel == EgressDeny && !c.Intercepts(host) {
		return fmt.Sprintf("egress.tunnel is %q and no route names %s", EgressDeny, host)
	}
	return ""
}

// ListenWarnings are the warnings about listeners other machines can reach,
// which `detour serve` logs and `detour policy check` prints. A
// non-loopback listen that is not allowed never gets here: it is an error.
func (c *Compiled) ListenWarnings() []string {
	var out []string
	if !loopbackListen(c.Listen) {
		why := "listen_public is true"
		if c.Egress.Tunnel == EgressDeny {
			why = `egress.tunnel is "deny", so only hosts a route names pass`
		}
		out = append(out, fmt.Sprintf("listen %q is not a loopback address: anything that can reach it can use detour as its proxy (allowed because %s)", c.Listen, why))
	}
	if c.AdminListen != "" && !loopbackListen(c.AdminListen) {
		out = append(out, fmt.Sprintf("admin_listen %q is not a loopback address: the admin endpoints (status, metrics, policy history and rollback) answer anything that can reach it; restrict who can (e.g. a NetworkPolicy) or keep it on 127.0.0.1", c.AdminListen))
	}
	return out
}

// egress compiles the egress section and checks listen against it. It runs
// after top has set c.Listen.
func (k *compiler) egress(f *File) {
	c := k.c
	c.ListenPublic = f.ListenPublic
	c.Egress = EgressPolicy{Tunnel: DefaultEgressTunnel}
	ef := f.Egress
	if ef == nil {
		ef = &EgressFile{}
	}
	switch ef.Tunnel {
	case "":
	case EgressAllow, EgressDeny:
		c.Egress.Tunnel = ef.Tunnel
	default:
		k.errorf("egress.tunnel", "must be %q (tunnel hosts no route names) or %q (refuse them); got %q", EgressAllow, EgressDeny, ef.Tunnel)
	}
	cidrs := DefaultDenyCIDRs
	if k.present("egress.deny_cidrs") {
		cidrs = ef.DenyCIDRs
	}
	c.Egress.DenyCIDRs = []netip.Prefix{}
	for i, s := range cidrs {
		if p, ok := k.cidr(fmt.Sprintf("egress.deny_cidrs[%d]", i), s); ok {
			c.Egress.DenyCIDRs = append(c.Egress.DenyCIDRs, p)
		}
	}

	if !loopbackListen(c.Listen) && c.Egress.Tunnel != EgressDeny && !c.ListenPublic {
		k.errorf("listen", `%q is not a loopback address: every machine and pod that can reach it could use detour as an open proxy. `+
			`Listen on 127.0.0.1 (the app shares the pod's or the host's network), or set "egress": {"tunnel": "deny"} so that only hosts a route names pass, `+
			`or set "listen_public": true if an open proxy is meant`, c.Listen)
	}
}

// cidr parses one range: a CIDR whose address is the range's first (a
// "10.0.0.1/8" would look like one address and mean sixteen million), or a
// single address.
func (k *compiler) cidr(path, s string) (netip.Prefix, bool) {
	if !strings.Contains(s, "/") {
		a, err := netip.ParseAddr(s)
		if err != nil {
			k.errorf(path, "want a CIDR such as \"10.0.0.0/8\" or a single address; got %q", s)
			return netip.Prefix{}, false
		}
		a = a.Unmap().WithZone("")
		return netip.PrefixFrom(a, a.BitLen()), true
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		k.errorf(path, "want a CIDR such as \"10.0.0.0/8\" or a single address; got %q", s)
		return netip.Prefix{}, false
	}
	if m := p.Masked(); m != p {
		k.errorf(path, "%q has bits set past its /%d: did you mean %q?", s, p.Bits(), m)
		return netip.Prefix{}, false
	}
	return p, true
}

// loopbackListen reports whether a host:port listen address accepts only
// connections from this host: "localhost" or a loopback IP. An empty host
// (":8787") listens on every interface; any other name could resolve
// anywhere.
func loopbackListen(hostport string) bool {
	h, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return false
	}
	if strings.EqualFold(h, "localhost") {
		return true
	}
	a, err := netip.ParseAddr(h)
	return err == nil && a.Unmap().IsLoopback()
}
