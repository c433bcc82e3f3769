// Command servechild is `detour serve` for the load harness's profile
// mode: proxy.Serve with the options detour serve gives it (the log to
// stderr, batched; the heap floor), and the harness's measuring window (profwin) beside
// it. It is a binary of its own, not a mode of the harness, so that the
// bare proxy the harness runs does not carry detour's packages (their
// globals are scanned by every GC cycle).
//
//	servechild -policy policy.json -window /tmp/prof/detour
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"syscall"

	"github.com/detour-proxy/detour/internal/loadharness/profwin"
	"github.com/detour-proxy/detour/proxy"
)

func main() {
	pol := flag.String("policy", "", "policy file")
	window := flag.String("window", "", "prefix of the profile and stats files")
	memRate := flag.Int("memprofilerate", 0, "runtime.MemProfileRate for the heap profile (0: the runtime's default)")
	hz := flag.Int("hz", 0, "CPU profile rate (0: 100 Hz)")
	flag.Parse()
	if *memRate > 0 {
		runtime.MemProfileRate = *memRate
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	done := make(chan struct{})
	wctx, wcancel := context.WithCancel(ctx)
	go func() { profwin.Run(wctx, *window, *hz); close(done) }()
	err := proxy.Serve(ctx, proxy.Options{PolicyPath: *pol, Stderr: os.Stderr, BatchLog: true, HeapFloor: true})
	wcancel()
	<-done
	if err != nil {
		fmt.Fprintln(os.Stderr, "servechild:", err)
		os.Exit(1)
	}
}
