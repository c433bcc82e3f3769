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
// starts with the command's synopsis. The usage goes to the flag set's
// output, so that parse can send a requested --help to stdout.
func newFlags(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: %s\n", synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// parse parses args. A flag mistake has been printed to stderr with the
// usage, and comes back as ErrUsage (exit 2). A requested -h or --help is
// not a mistake: the usage goes to stdout, where `detour X --help | less`
// finds it, and parse reports help with a nil error (exit 0).
func parse(fs *flag.FlagSet, args []string, stdout io.Writer) (help bool, err error) {
	usage := fs.Usage
	// flag prints the usage itself on -h and on errors, always to the
	// flag set's output; hold it back and print it below, where it belongs.
	fs.Usage = func() {}
	err = fs.Parse(args)
	fs.Usage = usage
	switch {
	case errors.Is(err, flag.ErrHelp):
		printUsage(fs, stdout)
		return true, nil
	case err != nil:
		fs.Usage()
		return false, ErrUsage
	}
	return false, nil
}

// printUsage prints fs's usage to w instead of its output.
func printUsage(fs *flag.FlagSet, w io.Writer) {
	out := fs.Output()
	fs.SetOutput(w)
	fs.Usage()
	fs.SetOutput(out)
}

// isHelp reports whether arg asks for help the way the flag package
// understands it, for commands that look at their first argument (a
// subcommand) before any flag set sees it.
func isHelp(arg string) bool {
	switch arg {
	case "-h", "-help", "--help", "help":
		return true
	}
	return false
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
