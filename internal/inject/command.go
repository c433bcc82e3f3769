package inject

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/rs/zerolog"
)

// Synopsis is the usage line of the webhook's command. The user types
// `detour inject`, which execs detour-webhook with the same arguments.
const Synopsis = "detour inject --tls-cert FILE --tls-key FILE [--listen ADDR] [--config FILE] [--log-level LEVEL]"

// ErrUsage marks a command-line mistake (exit status 2).
var ErrUsage = errors.New("usage")

// Command runs the webhook from its command-line arguments (those after
// `detour inject`) until ctx ends. It is detour-webhook's main; `detour
// inject` checks the same flags before it execs detour-webhook, so that the
// sidecar's binary carries none of the Kubernetes types.
func Command(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("inject", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: %s\n", Synopsis)
		fs.PrintDefaults()
	}
	listen := fs.String("listen", DefaultListen, "address of the HTTPS webhook (POST /inject, GET /healthz)")
	certFile := fs.String("tls-cert", "", "PEM serving certificate, re-read when it changes (required)")
	keyFile := fs.String("tls-key", "", "PEM key of --tls-cert (required)")
	configFile := fs.String("config", "", "injector config, JSON or YAML (default: the built-in defaults)")
	level := fs.String("log-level", "info", "debug, info, warn or error")
	usage := func(format string, a ...any) error {
		fmt.Fprintf(stderr, "detour inject: %s\n", fmt.Sprintf(format, a...))
		fs.Usage()
		return ErrUsage
	}
	// flag prints the usage itself on -h and on errors; hold it back and
	// print it where it belongs (stdout for a requested --help).
	printUsage := fs.Usage
	fs.Usage = func() {}
	err := fs.Parse(args)
	fs.Usage = printUsage
	switch {
	case errors.Is(err, flag.ErrHelp):
		fs.SetOutput(stdout)
		fs.Usage()
		return nil
	case err != nil:
		fs.Usage()
		return ErrUsage
	}
	if fs.NArg() > 0 {
		return usage("unexpected argument %q", fs.Arg(0))
	}
	if *certFile == "" || *keyFile == "" {
		return usage("--tls-cert and --tls-key are required: the API server calls webhooks over HTTPS only")
	}
	lvl, err := zerolog.ParseLevel(*level)
	if err != nil || *level == "" {
		return usage("--log-level %q: want debug, info, warn or error", *level)
	}
	cfg, err := LoadConfig(*configFile)
	if err != nil {
		return err
	}
	return Serve(ctx, ServeOptions{
		Listen:   *listen,
		CertFile: *certFile,
		KeyFile:  *keyFile,
		Config:   cfg,
		Log:      zerolog.New(stderr).Level(lvl).With().Timestamp().Logger(),
	})
}
