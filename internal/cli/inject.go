package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"

	"github.com/rs/zerolog"
)

// injectSynopsis is the usage line of `detour inject`.
const injectSynopsis = "detour inject --tls-cert FILE --tls-key FILE [--listen ADDR] [--config FILE] [--log-level LEVEL]"

// WebhookBinary is the injector's program: `detour inject` execs it. It is
// built from cmd/detour-webhook and installed next to detour (the image has
// both in /usr/local/bin); it is separate so that the Kubernetes types stay
// out of the sidecar's binary and memory.
const WebhookBinary = "detour-webhook"

// runWebhook replaces this process with the injector; tests stub it.
var runWebhook = execWebhook

// Inject runs `detour inject`: the Kubernetes mutating admission webhook that
// adds detour to opted-in pods. The Helm chart in charts/detour runs it; see
// its README. detour checks the command line (and answers --help) itself,
// then execs detour-webhook with the same arguments.
func Inject(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("inject", injectSynopsis, stderr)
	// The same flags as detour-webhook's (internal/inject.Command); a test
	// holds the two usages equal.
	fs.String("listen", ":8443", "address of the HTTPS webhook (POST /inject, GET /healthz)")
	certFile := fs.String("tls-cert", "", "PEM serving certificate, re-read when it changes (required)")
	keyFile := fs.String("tls-key", "", "PEM key of --tls-cert (required)")
	fs.String("config", "", "injector config, JSON or YAML (default: the built-in defaults)")
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
	if _, err := zerolog.ParseLevel(*level); err != nil || *level == "" {
		return usageError(fs, stderr, "--log-level %q: want debug, info, warn or error", *level)
	}
	return runWebhook(ctx, args, stdout, stderr)
}

// webhookPath finds detour-webhook: next to the running detour (the image,
// an install of both), else on PATH.
func webhookPath() (string, error) {
	if self, err := os.Executable(); err == nil {
		if self, err = filepath.EvalSymlinks(self); err == nil {
			p := filepath.Join(filepath.Dir(self), WebhookBinary)
			if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
				return p, nil
			}
		}
	}
	p, err := exec.LookPath(WebhookBinary)
	if err != nil {
		return "", fmt.Errorf("detour inject runs %s, which is neither next to detour nor on PATH "+
			"(the image has it; from the source: go install ./cmd/%s)", WebhookBinary, WebhookBinary)
	}
	return p, nil
}

// execWebhook replaces this process with detour-webhook, so that the
// webhook's pod runs one process and holds no memory of detour's.
func execWebhook(_ context.Context, args []string, _, _ io.Writer) error {
	p, err := webhookPath()
	if err != nil {
		return err
	}
	err = syscall.Exec(p, append([]string{WebhookBinary}, args...), os.Environ())
	return errors.Join(fmt.Errorf("exec %s", p), err)
}
