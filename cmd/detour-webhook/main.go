// Command detour-webhook is detour's Kubernetes injector: the mutating
// admission webhook that adds the detour sidecar to opted-in pods. Users run
// it as `detour inject`, which execs this binary (it sits next to detour in
// the image); it is a separate program so that the Kubernetes types it
// decodes and emits stay out of the sidecar's binary and memory.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/detour-proxy/detour/internal/inject"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := inject.Command(ctx, os.Args[1:], os.Stdout, os.Stderr)
	switch {
	case err == nil:
	case errors.Is(err, inject.ErrUsage):
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "detour inject:", err)
		os.Exit(1)
	}
}
