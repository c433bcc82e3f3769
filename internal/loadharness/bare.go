package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/detour-proxy/detour/internal/loadharness/profwin"
)

// barePoolSize is the buffer size of the bare proxy's BufferPool: the size
// httputil.ReverseProxy allocates per copy when it has no pool.
const barePoolSize = 32 << 10

// barePool is the simplest BufferPool: a sync.Pool of 32 KiB buffers.
type barePool struct{ p sync.Pool }

func (b *barePool) Get() []byte {
	if v, ok := b.p.Get().(*[]byte); ok {
		return *v
	}
	return make([]byte, barePoolSize)
}

func (b *barePool) Put(p []byte) { b.p.Put(&p) }

// newBareProxy is the baseline detour is measured against: a bare
// httputil.ReverseProxy to target with a BufferPool, and a transport that
// pools as many connections per host as detour's. proxy/bench_test.go
// counts allocations against the same proxy.
func newBareProxy(target *url.URL) http.Handler {
	rp := &httputil.ReverseProxy{
		Rewrite:    func(pr *httputil.ProxyRequest) { pr.SetURL(target) },
		Transport:  &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 64, IdleConnTimeout: 90 * time.Second},
		BufferPool: &barePool{},
	}
	// The request body streams to the vendor while the answer streams back.
	// Without full duplex, net/http's HTTP/1 server closes the request body
	// as soon as the first answer bytes are written; when the vendor
	// answers before the transport has made its last read of the body (the
	// check that nothing follows the declared length), that read fails, and
	// the transport closes the vendor connection mid-answer: "use of closed
	// network connection", the app cut (golang/go#40747). detour reads the
	// body whole before it sends it, so it never meets this.
	// Asserted rather than through http.NewResponseController, which
	// would add an allocation per request to the baseline.
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if fd, ok := w.(interface{ EnableFullDuplex() error }); ok {
			_ = fd.EnableFullDuplex()
		}
		rp.ServeHTTP(w, r)
	})
}

// bareReadyLine starts the line the bare proxy child writes to stderr once
// it listens; the address follows.
const bareReadyLine = "bare proxy listening "

// bare runs the baseline proxy as a child process of compare, so that it is
// measured exactly as detour is: its own process, pinned to the same core.
// With -window (profile's run), it also keeps the measuring window that
// writes its CPU profile and runtime counts.
func bare(args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("bare", flag.ContinueOnError)
	fs.SetOutput(stderr)
	upstream := fs.String("upstream", "", "base URL of the vendor to proxy to")
	window := fs.String("window", "", "prefix of the profile and stats files (profile's run only)")
	hz := fs.Int("hz", 0, "CPU profile rate with -window (0: 100 Hz)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	u, err := url.Parse(*upstream)
	if err != nil || u.Host == "" {
		return fmt.Errorf("-upstream %q is not a URL", *upstream)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: newBareProxy(u), ReadHeaderTimeout: 30 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	done := make(chan struct{})
	if *window != "" {
		go func() { profwin.Run(ctx, *window, *hz); close(done) }()
	} else {
		close(done)
	}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	fmt.Fprintln(stderr, bareReadyLine+ln.Addr().String())
	err = srv.Serve(ln)
	<-done
	if !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
