package policy

import (
	"math"
	"net"
)

// This file compiles the transparent section: a listener for connections
// the kernel redirected to detour (`detour redirect install`), for apps
// that honour no proxy variable. What arrives there is judged like a
// CONNECT: hosts a route names are intercepted, everything else is spliced
// to the address the app dialled.

// DefaultTransparentListen is transparent.listen's default when the section
// is present without it; `detour redirect install --to-port` takes its port.
const DefaultTransparentListen = "127.0.0.1:15001"

// TransparentFile is the transparent section of policy.json.
type TransparentFile struct {
	// Listen is the address of the transparent listener. The kernel's
	// redirect of a local connection delivers it to loopback (127.0.0.1
	// for IPv4, ::1 for IPv6), so a loopback address listens on both
	// loopbacks at the same port. Default DefaultTransparentListen. Like
	// listen, any other address is refused unless listen_public is true or
	// egress.tunnel is "deny". Takes effect at restart.
	Listen string `json:"listen,omitempty"`
	// Mark is the socket mark (SO_MARK) detour sets on every connection it
	// opens itself (upstreams, tunnels, spliced connections), so that
	// redirect rules made with --exclude-mark let them pass instead of
	// redirecting them back to detour. Setting a mark needs CAP_NET_ADMIN.
	// Default 0: no mark (exclude detour by uid instead).
	Mark int64 `json:"mark,omitempty"`
}

// TransparentPolicy is the compiled transparent section.
type TransparentPolicy struct {
	// Listen is "" when the transparent listener is off.
	Listen string
	// Mark is the SO_MARK of detour's own connections; 0: none.
	Mark uint32
}

// Enabled reports whether the transparent listener is on.
func (t TransparentPolicy) Enabled() bool { return t.Listen != "" }

func (k *compiler) transparent(t *TransparentFile) {
	if t == nil {
		return
	}
	c := k.c
	p := TransparentPolicy{Listen: t.Listen}
	if p.Listen == "" {
		p.Listen = DefaultTransparentListen
	}
	if _, _, err := net.SplitHostPort(p.Listen); err != nil {
		k.errorf("transparent.listen", "must be host:port, e.g. %q: %v", DefaultTransparentListen, err)
	} else if !loopbackListen(p.Listen) && c.Egress.Tunnel != EgressDeny && !c.ListenPublic {
		k.errorf("transparent.listen", `%q is not a loopback address: redirected connections arrive on loopback, and anything else that reaches this address could have detour connect for it. `+
			`Listen on %q, or set "listen_public": true (or "egress": {"tunnel": "deny"}) if it is meant`, p.Listen, DefaultTransparentListen)
	}
	switch {
	case t.Mark < 0 || t.Mark > math.MaxUint32:
		k.errorf("transparent.mark", "must be a socket mark from 1 to %d (0 or absent: no mark); got %d", uint32(math.MaxUint32), t.Mark)
	default:
		p.Mark = uint32(t.Mark)
	}
	if p.Listen == c.Listen || p.Listen == c.AdminListen {
		k.errorf("transparent.listen", "%q is already the address of another detour listener", p.Listen)
	}
	c.Transparent = p
}
