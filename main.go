// Command detour is an egress sidecar for LLM API calls: it intercepts an
// unmodified app's calls to OpenAI, Anthropic and Gemini and, when a vendor
// fails, replays the call to the next upstream of a chain.
package main

import (
	"context"
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/detour-proxy/detour/proxy"
	"github.com/detour-proxy/detour/proxy/demo"
)

// defaultPolicy is the policy used when no --policy is given and there is
// no ./policy.json.
//
//go:embed policy.json
var defaultPolicy []byte

// errUsage marks command-line mistakes: exit status 2, like flag's.
var errUsage = errors.New("usage")

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	switch {
	case err == nil:
	case errors.Is(err, errUsage):
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "detour:", err)
		os.Exit(1)
	}
}

const usage = `detour — transparent failover for LLM API calls.

Usage:
  detour [serve] [--policy FILE]   run the sidecar (default policy: ./policy.json, else the built-in one)
  detour demo [--requests N]       watch failover happen: fake vendors with faults, detour, and the
                                   official openai-go client, all in this process (no keys, no network)
  detour help                      show this help

Point an app at detour with HTTPS_PROXY=http://127.0.0.1:8787 (and trust detour's CA),
or with a base URL such as OPENAI_BASE_URL=http://127.0.0.1:8787/openai/v1.
`

// run is the whole program, minus process concerns, so tests can call it.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cmd := "serve"
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "serve":
		return serve(ctx, args, stderr)
	case "demo":
		return runDemo(ctx, args, stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	default:
		fmt.Fprintf(stderr, "detour: unknown command %q\n\n%s", cmd, usage)
		return errUsage
	}
}

func serve(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	policyPath := fs.String("policy", "", "policy file (default ./policy.json if it exists, else the built-in policy)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "detour serve: unexpected argument %q\n\n%s", fs.Arg(0), usage)
		return errUsage
	}
	path := *policyPath
	if path == "" {
		if _, err := os.Stat("policy.json"); err == nil {
			path = "policy.json"
		}
	}
	return proxy.Serve(ctx, proxy.Options{PolicyPath: path, BuiltinPolicy: defaultPolicy, Stderr: stderr})
}

func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	n := fs.Int("requests", 60, "how many chat completions to send")
	seed := fs.Int64("seed", 1, "seed of the injected faults")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return errUsage
	}
	return demo.Run(ctx, demo.Options{Requests: *n, Seed: *seed, Out: stdout})
}
