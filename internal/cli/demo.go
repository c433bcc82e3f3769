package cli

import (
	"context"
	"io"

	"github.com/detour-proxy/detour/internal/demo"
)

// Demo runs `detour demo`.
func Demo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("demo", "detour demo [--requests N] [--seed N]", stderr)
	n := fs.Int("requests", 60, "how many chat completions to send")
	seed := fs.Int64("seed", 1, "seed of the injected faults")
	if help, err := parse(fs, args, stdout); help || err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError(fs, stderr, "unexpected argument %q", fs.Arg(0))
	}
	return demo.Run(ctx, demo.Options{Requests: *n, Seed: *seed, Out: stdout})
}
