// Command detour is an egress sidecar for LLM API calls: it intercepts an
// unmodified app's calls to OpenAI, Anthropic and Gemini and, when a vendor
// fails, replays the call to the next upstream of a chain.
package main

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"syscall"

	"github.com/detour-proxy/detour/internal/cli"
)

// defaultPolicy is the policy used when no --policy is given and there is
// no ./policy.json.
//
//go:embed policy.json
var defaultPolicy []byte

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	switch {
	case err == nil:
	case errors.Is(err, cli.ErrUsage):
		os.Exit(2)
	default:
		var exit cli.ExitError
		if errors.As(err, &exit) {
			os.Exit(exit.Code)
		}
		fmt.Fprintln(os.Stderr, "detour:", err)
		os.Exit(1)
	}
}

const usage = `detour — transparent failover for LLM API calls.

Usage:
  detour [serve] [--policy FILE] [--transparent ADDR]
                                   run the sidecar (default policy: ./policy.json, else the built-in one);
                                   --transparent also takes kernel-redirected connections on ADDR (loopback)
  detour run [--policy FILE] [--transparent [--ports 443,80]] -- CMD [ARGS...]
                                   run CMD with its LLM calls going through detour (proxy variables, SDK
                                   base URLs, CA bundle, Java trust store); --transparent also redirects
                                   CMD's own connections (Linux, CAP_NET_ADMIN); exits with CMD's status
  detour demo [--requests N] [--seed N]
                                   watch failover happen: fake vendors with faults, detour, and an
                                   OpenAI client, all in this process (no keys, no network)
  detour simulate [--seed N] [--requests N] [--only a,b,c,d,e,f]
                                   reproducible failover experiments through the real chain runner,
                                   printed as markdown tables (docs/simulation.md)
  detour ca init|print|bundle      create detour's CA, print it, or write a system+detour trust bundle
  detour policy check FILE         validate a policy: every problem with line:column and field
  detour policy explain FILE --request REQ.json
                                   show the route, chain, models and fast path a request would take
  detour fake-vendor --shape S --faults SPEC
                                   a chaos vendor (openai|anthropic|gemini) for testing your own app
  detour inject --tls-cert F --tls-key F [--listen :8443] [--config F]
                                   Kubernetes: the mutating webhook that adds detour to opted-in pods
                                   (the Helm chart in charts/detour runs it)
  detour redirect install --to-port 15001 [--ports 443,80] [--exclude-uid UID] [--exclude-mark MARK]
                                   transparent mode: nftables rules sending this network namespace's
                                   connections to transparent.listen; redirect remove | show
  detour help [COMMAND]            show this help, or a command's (same as detour COMMAND --help)

Point an app at detour with HTTPS_PROXY=http://127.0.0.1:8787 (and trust detour's CA),
or with a base URL such as OPENAI_BASE_URL=http://127.0.0.1:8787/openai/v1, or transparently
(transparent.listen with detour redirect install).
`

// commands maps subcommand names to their implementations.
func commands() map[string]cli.Command {
	return map[string]cli.Command{
		"serve":       cli.Serve(defaultPolicy),
		"demo":        cli.Demo,
		"simulate":    cli.Simulate,
		"run":         cli.RunWith(defaultPolicy),
		"ca":          cli.CA(defaultPolicy),
		"policy":      cli.Policy,
		"fake-vendor": cli.FakeVendor,
		"inject":      cli.Inject,
		"redirect":    cli.Redirect,
	}
}

// run is the whole program, minus process concerns, so tests can call it.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		switch args[0] {
		case "-h", "-help", "--help":
			// Not serve's --help: detour with no command runs serve, but
			// someone asking `detour --help` wants to know every command.
			fmt.Fprint(stdout, usage)
			return nil
		}
	}
	name := "serve"
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		name, args = args[0], args[1:]
	}
	if name == "help" {
		if len(args) == 0 {
			fmt.Fprint(stdout, usage)
			return nil
		}
		// `detour help policy check` is `detour policy check --help`.
		return run(ctx, append(slices.Clone(args), "--help"), stdout, stderr)
	}
	cmd, ok := commands()[name]
	if !ok {
		fmt.Fprintf(stderr, "detour: unknown command %q\n\n%s", name, usage)
		return cli.ErrUsage
	}
	return cmd(ctx, args, stdout, stderr)
}
