package clientmatrix

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/detour-proxy/detour/internal/cli"
	"github.com/detour-proxy/detour/internal/mitm"
	"github.com/detour-proxy/detour/proxy"
)

// policyEnv names the policy file of the "serve" role.
const policyEnv = "DETOUR_CLIENTMATRIX_POLICY"

// namespaceRole is what the test binary does when run inside the
// transparent way's network namespace: "serve" is detour with a transparent
// listener (it prints "ready PORT" once it accepts connections, and stops on
// SIGTERM); "redirect" is `detour redirect ARGS` itself.
func namespaceRole(role string, args []string) int {
	switch role {
	case "redirect":
		if err := cli.Redirect(context.Background(), args, os.Stdout, os.Stderr); err != nil {
			fmt.Fprintln(os.Stderr, "detour:", err)
			return 1
		}
		return 0
	case "serve":
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
		defer stop()
		tlns, err := proxy.ListenTransparent("127.0.0.1:0")
		if err != nil {
			fmt.Fprintln(os.Stderr, "transparent listen:", err)
			return 1
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			fmt.Fprintln(os.Stderr, "listen:", err)
			return 1
		}
		_, port, _ := net.SplitHostPort(tlns[0].Addr().String())
		err = proxy.Serve(ctx, proxy.Options{
			PolicyPath: os.Getenv(policyEnv), Stderr: os.Stderr, Listener: ln, TransparentListeners: tlns,
			Ready: func(net.Addr, *mitm.CA) { fmt.Printf("ready %s\n", port) },
		})
		if err != nil {
			fmt.Fprintln(os.Stderr, "serve:", err)
			return 1
		}
		return 0
	}
	fmt.Fprintf(os.Stderr, "unknown %s %q\n", roleEnv, role)
	return 2
}
