package cli

import (
	"context"
	"io"
	"os"

	"github.com/detour-proxy/detour/proxy"
)

// Serve runs `detour serve [--policy FILE] [--transparent ADDR]`. builtin is the embedded
// default policy.
func Serve(builtin []byte) Command {
	return func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
		fs := newFlags("serve", "detour serve [--policy FILE] [--transparent ADDR]", stderr)
		policyPath := fs.String("policy", "", "policy file (default ./policy.json if it exists, else the built-in policy)")
		transparent := transparentFlag(fs)
		if help, err := parse(fs, args, stdout); help || err != nil {
			return err
		}
		if fs.NArg() > 0 {
			return usageError(fs, stderr, "unexpected argument %q", fs.Arg(0))
		}
		path := *policyPath
		if path == "" {
			if _, err := os.Stat("policy.json"); err == nil {
				path = "policy.json"
			}
		}
		return transparent.serve(ctx, stderr, proxy.Options{PolicyPath: path, BuiltinPolicy: builtin, Stderr: stderr, BatchLog: true, HeapFloor: true})
	}
}
