// Package cli implements detour's subcommands. main.go dispatches to them;
// each is a function of (ctx, args, stdout, stderr) so that tests run them
// without a process.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
)

// ErrUsage marks a command-line mistake; the process exits with status 2,
// like the flag package's own.
var ErrUsage = errors.New("usage")

// Command is one subcommand.
type Command func(ctx context.Context, args []string, stdout, stderr io.Writer) error

// newFlags returns a flag set that reports to stderr and whose usage text
// starts with the command's synopsis.
func newFlags(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: %s\n", synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// parse parses args, turning flag errors into ErrUsage (flag has already
// printed them with the usage) and -h into a clean nil-error exit.
func parse(fs *flag.FlagSet, args []string) (help bool, err error) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return true, nil
		}
		return false, ErrUsage
	}
	return false, nil
}

// usageError prints msg and the command's usage, and returns ErrUsage.
func usageError(fs *flag.FlagSet, stderr io.Writer, format string, args ...any) error {
	fmt.Fprintf(stderr, "detour %s: %s\n", fs.Name(), fmt.Sprintf(format, args...))
	fs.Usage()
	return ErrUsage
}

// ExitError asks main to exit with Code and print nothing more (the command
// has said what it had to say): `detour run` passes on its child's status,
// `detour policy check` exits 1 after listing the problems.
type ExitError struct{ Code int }

func (e ExitError) Error() string { return fmt.Sprintf("exit status %d", e.Code) }
