package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"

	"github.com/detour-proxy/detour/proxy"
)

// serveTransparent is `detour serve --transparent ADDR`: the transparent
// listener on ADDR whatever the policy says, overriding (or supplying) its
// transparent.listen. The Kubernetes sidecar in transparent interception
// needs it: its policy is the user's ConfigMap, which may have no
// transparent section, while the port the init container's redirect rules
// send to is the injector's, not the policy's.
type serveTransparent struct {
	fs   *flag.FlagSet
	addr *string
}

// transparentFlag adds --transparent to serve's flags.
func transparentFlag(fs *flag.FlagSet) *serveTransparent {
	return &serveTransparent{fs: fs, addr: fs.String("transparent", "",
		"listen for redirected connections on this loopback address (e.g. 127.0.0.1:15001), overriding the policy's transparent.listen")}
}

// serve runs proxy.Serve with opts, listening transparently on the flag's
// address first when it is set. Only a loopback address is accepted: the
// kernel delivers a redirected local connection to loopback, and anything
// else that reaches the listener could have detour connect for it (the
// policy's transparent.listen takes another address only with
// listen_public or egress.tunnel deny, which this flag cannot see).
func (f *serveTransparent) serve(ctx context.Context, stderr io.Writer, opts proxy.Options) error {
	addr := *f.addr
	if addr == "" {
		return proxy.Serve(ctx, opts)
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return usageError(f.fs, stderr, "--transparent %q: want a loopback host:port such as 127.0.0.1:15001", addr)
	}
	if ip, err := netip.ParseAddr(host); host != "localhost" && (err != nil || !ip.IsLoopback()) {
		return usageError(f.fs, stderr, "--transparent %q is not a loopback address: redirected connections arrive on loopback (127.0.0.1:15001)", addr)
	}
	lns, err := proxy.ListenTransparent(addr)
	if err != nil {
		return fmt.Errorf("listen on %s (--transparent): %w", addr, err)
	}
	// Serve closes them when ctx ends; this covers a return before it
	// starts serving them (an invalid policy).
	defer func() {
		for _, ln := range lns {
			_ = ln.Close()
		}
	}()
	opts.TransparentListeners = lns
	return proxy.Serve(ctx, opts)
}
