package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/detour-proxy/detour/internal/devrun"
)

const runSynopsis = "detour run [--policy FILE] [--log FILE | --verbose] -- CMD [ARGS...]"

// Run runs `detour run` with no built-in policy to fall back on: the policy
// is --policy or ./policy.json. The detour binary uses RunWith, which falls
// back to the embedded default policy.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return RunWith(nil)(ctx, args, stdout, stderr)
}

// RunWith returns `detour run [--policy FILE] -- CMD ARGS…`: detour on free
// loopback ports, CMD run with the variables that send its LLM calls
// through it (HTTPS_PROXY and a CA bundle, the SDK base URLs of the routed
// vendors, JAVA_TOOL_OPTIONS; see internal/devrun), signals passed on, CMD's
// exit status passed back (as an ExitError), and a summary on stderr (who
// answered, which way each request came in, and connections that went past
// detour). builtin is the policy used when there is neither --policy nor
// ./policy.json.
func RunWith(builtin []byte) Command {
	return func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
		fs := newFlags("run", runSynopsis, stderr)
		policyPath := fs.String("policy", "", "policy file (default ./policy.json if it exists, else the built-in policy)")
		logFile := fs.String("log", "", "append detour's log to `FILE` (default: a new file in the temporary directory, named at start)")
		verbose := fs.Bool("verbose", false, "log to stderr, among the command's own output")

		// Only what comes before the first -- is detour's; everything
		// after it is CMD's, flags included (detour run -- ls -l).
		flagArgs, command, dashed := args, []string(nil), false
		if i := slices.Index(args, "--"); i >= 0 {
			flagArgs, command, dashed = args[:i], args[i+1:], true
		}
		if help, err := parse(fs, flagArgs, stdout); help || err != nil {
			return err
		}
		if !dashed || fs.NArg() > 0 || len(command) == 0 {
			example := "python app.py"
			if !dashed && fs.NArg() > 0 {
				example = strings.Join(fs.Args(), " ")
			}
			return usageError(fs, stderr, "put -- before the command: detour run -- %s", example)
		}
		if *verbose && *logFile != "" {
			return usageError(fs, stderr, "--log and --verbose both say where the log goes: choose one")
		}

		path := *policyPath
		if path == "" {
			if _, err := os.Stat("policy.json"); err == nil {
				path = "policy.json"
			} else if builtin == nil {
				return errors.New("detour run: no policy: pass --policy FILE or create ./policy.json")
			}
		}
		logTo := *logFile
		if *verbose {
			logTo = "-"
		}

		// context.WithoutCancel: main cancels ctx on SIGINT and SIGTERM,
		// and for `detour run` those are CMD's to act on (devrun passes
		// them on); detour must keep serving until CMD has exited.
		res, err := devrun.Run(context.WithoutCancel(ctx), devrun.Options{
			Command:       command,
			PolicyPath:    path,
			BuiltinPolicy: builtin,
			LogFile:       logTo,
			Stdin:         os.Stdin,
			Stdout:        stdout,
			Stderr:        stderr,
		})
		var start *devrun.StartError
		switch {
		case errors.As(err, &start):
			fmt.Fprintf(stderr, "detour run: %v\n", err)
			return ExitError{Code: start.Code}
		case err != nil:
			return err
		case res.ExitCode != 0:
			return ExitError{Code: res.ExitCode}
		}
		return nil
	}
}
