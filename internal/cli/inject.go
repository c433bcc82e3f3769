package cli

import (
	"context"
	"io"

	"github.com/rs/zerolog"

	"github.com/detour-proxy/detour/internal/inject"
)

// injectSynopsis is the usage line of `detour inject`.
const injectSynopsis = "detour inject --tls-cert FILE --tls-key FILE [--listen ADDR] [--config FILE] [--log-level LEVEL]"

// Inject runs `detour inject`: the Kubernetes mutating admission webhook that
// adds detour to opted-in pods. The Helm chart in charts/detour runs it; see
// its README.
func Inject(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("inject", injectSynopsis, stderr)
	listen := fs.String("listen", inject.DefaultListen, "address of the HTTPS webhook (POST /inject, GET /healthz)")
	certFile := fs.String("tls-cert", "", "PEM serving certificate, re-read when it changes (required)")
	keyFile := fs.String("tls-key", "", "PEM key of --tls-cert (required)")
	configFile := fs.String("config", "", "injector config, JSON or YAML (default: the built-in defaults)")
	level := fs.String("log-level", "info", "debug, info, warn or error")
	if help, err := parse(fs, args, stdout); help || err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError(fs, stderr, "unexpected argument %q", fs.Arg(0))
	}
	if *certFile == "" || *keyFile == "" {
		return usageError(fs, stderr, "--tls-cert and --tls-key are required: the API server calls webhooks over HTTPS only")
	}
	lvl, err := zerolog.ParseLevel(*level)
	if err != nil || *level == "" {
		return usageError(fs, stderr, "--log-level %q: want debug, info, warn or error", *level)
	}
	cfg, err := inject.LoadConfig(*configFile)
	if err != nil {
		return err
	}
	return inject.Serve(ctx, inject.ServeOptions{
		Listen:   *listen,
		CertFile: *certFile,
		KeyFile:  *keyFile,
		Config:   cfg,
		Log:      zerolog.New(stderr).Level(lvl).With().Timestamp().Logger(),
	})
}
