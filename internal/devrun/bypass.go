package devrun

import (
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/detour-proxy/detour/policy"
)

// bypassInterval is how often the bypass watcher looks at CMD's sockets. A
// connection shorter than this can be missed; a scan costs a few reads of
// /proc per process of CMD's tree, so ten a second stays cheap.
const bypassInterval = 100 * time.Millisecond

// Bypass is a connection one of CMD's processes made to a vendor's port
// without going through detour: an LLM call detour never saw, so one it
// could neither fail over nor log.
type Bypass struct {
	// Runtime is the process's executable name (node, java, python3, …).
	Runtime string
	// PID is the process.
	PID int
	// Remote is the address it connected to, host:port.
	Remote string
}

// hint says, for the runtime that made a connection past detour, why it
// most likely did and what to do about it.
func hint(runtime string) string {
	switch r := strings.ToLower(runtime); {
	case strings.HasPrefix(r, "node"), r == "bun", r == "deno":
		return "Node before 22.21 ignores HTTPS_PROXY: the official OpenAI, Anthropic and Google SDKs reach detour through the base-URL variables detour set (OPENAI_BASE_URL, ANTHROPIC_BASE_URL, GOOGLE_GEMINI_BASE_URL) unless the app passes its own baseURL; any other client needs `detour run --transparent`"
	case strings.HasPrefix(r, "java"):
		return "Java reaches detour through the proxy properties detour put in JAVA_TOOL_OPTIONS: were they overridden (-Dhttps.proxyHost on the command line, a client built with its own proxy or ProxySelector)?"
	case strings.HasPrefix(r, "python"):
		return "Python's urllib, requests and httpx honour HTTPS_PROXY unless told not to (trust_env=False, an explicit proxy or transport)"
	case r == "curl":
		return "curl honours HTTPS_PROXY unless --noproxy, --proxy or a .curlrc says otherwise"
	}
	return "it does not seem to honour HTTPS_PROXY: point its base URL at detour's, or use `detour run --transparent`"
}

// bypassTargets says which remote addresses count as a vendor's.
type bypassTargets struct {
	// own are detour's listeners, never a bypass.
	own map[netip.AddrPort]bool
	// ports are vendor ports on any address but loopback: 443 and 80, and
	// the ports of upstreams named by host name.
	ports map[uint16]bool
	// addrs are upstreams at an IP address (or localhost), matched exactly:
	// an app calling its own local services is not a bypass, an app
	// calling an upstream of the policy on loopback (a local model server,
	// a test's fake vendor) is.
	addrs map[netip.AddrPort]bool
}

// newBypassTargets returns the targets for pol's upstreams, with own as
// detour's listeners.
func newBypassTargets(pol *policy.Compiled, own ...net.Addr) bypassTargets {
	t := bypassTargets{own: map[netip.AddrPort]bool{}, ports: map[uint16]bool{443: true, 80: true}, addrs: map[netip.AddrPort]bool{}}
	for _, a := range own {
		if ta, ok := a.(*net.TCPAddr); ok {
			t.own[unmapped(ta.AddrPort())] = true
		}
	}
	for _, u := range pol.Upstreams {
		if u.BaseURL == nil {
			continue
		}
		port := u.BaseURL.Port()
		if port == "" {
			port = "443"
			if u.BaseURL.Scheme == "http" {
				port = "80"
			}
		}
		p, err := strconv.ParseUint(port, 10, 16)
		if err != nil {
			continue
		}
		host := u.BaseURL.Hostname()
		if strings.EqualFold(host, "localhost") {
			t.addrs[netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(p))] = true
			t.addrs[netip.AddrPortFrom(netip.IPv6Loopback(), uint16(p))] = true
			continue
		}
		if ip, err := netip.ParseAddr(host); err == nil {
			t.addrs[netip.AddrPortFrom(ip.Unmap(), uint16(p))] = true
			continue
		}
		t.ports[uint16(p)] = true
	}
	return t
}

// matches reports whether a connection to remote is one detour should have
// seen.
func (t bypassTargets) matches(remote netip.AddrPort) bool {
	remote = unmapped(remote)
	switch {
	case t.own[remote]:
		return false
	case t.addrs[remote]:
		return true
	case remote.Addr().IsLoopback() || remote.Addr().IsUnspecified():
		return false
	}
	return t.ports[remote.Port()]
}

func unmapped(a netip.AddrPort) netip.AddrPort {
	return netip.AddrPortFrom(a.Addr().Unmap(), a.Port())
}

// bypassLog keeps the first sighting of each (process, address).
type bypassLog struct {
	mu    sync.Mutex
	seen  map[bypassKey]bool
	found []Bypass
}

type bypassKey struct {
	pid    int
	remote netip.AddrPort
}

// first records a sighting and reports whether it is the first of its key.
func (l *bypassLog) first(b Bypass, remote netip.AddrPort) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := bypassKey{b.PID, unmapped(remote)}
	if l.seen[k] {
		return false
	}
	if l.seen == nil {
		l.seen = map[bypassKey]bool{}
	}
	l.seen[k] = true
	l.found = append(l.found, b)
	return true
}

func (l *bypassLog) all() []Bypass {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Bypass(nil), l.found...)
}
