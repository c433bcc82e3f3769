package devrun

// TransparentOptions turn on `detour run --transparent`: besides the proxy
// variables, the kernel sends CMD's own TCP connections to detour's
// transparent listener, so that an app that ignores HTTPS_PROXY (Node 20's
// fetch, Java) is reached too, and nothing else on the machine is. Linux
// only, with CAP_NET_ADMIN: CMD runs in a cgroup of its own, and an
// nftables table of the run's own redirects the connections of that
// cgroup's sockets (internal/redirect's InstallCgroup).
type TransparentOptions struct {
	// Enabled turns it on; off by default.
	Enabled bool
	// Ports are the TCP destination ports of CMD's connections that are
	// redirected; empty means redirect.DefaultPorts (443 and 80).
	Ports []uint16
}
