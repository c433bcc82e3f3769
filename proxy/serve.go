package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/detour-proxy/detour/internal/admin"
	"github.com/detour-proxy/detour/internal/chain"
	"github.com/detour-proxy/detour/internal/health"
	"github.com/detour-proxy/detour/internal/mitm"
	"github.com/detour-proxy/detour/internal/probe"
	"github.com/detour-proxy/detour/internal/telemetry"
	"github.com/detour-proxy/detour/policy"
)

// DrainTimeout is the default of the policy's drain_timeout: how long a
// stopping detour lets in-flight requests and streams finish.
const DrainTimeout = policy.DefaultDrainTimeout

// drainCutGrace is how long the requests ended at the drain timeout get to
// write their error events and log lines before the listeners close.
const drainCutGrace = 2 * time.Second

// adminShutdownTimeout bounds closing the admin listener once the proxy has
// drained: its requests are short, and a scrape must not hold up the exit.
const adminShutdownTimeout = 2 * time.Second

// Options configure Serve.
type Options struct {
	// PolicyPath is the policy file; "" means the built-in policy (and no
	// watch).
	PolicyPath string
	// BuiltinPolicy is used when PolicyPath is "".
	BuiltinPolicy []byte
	// Stderr receives the log.
	Stderr io.Writer
	// BatchLog, when Stderr is a file, writes the requests' log lines to
	// it in batches, each line at most a few milliseconds late (see
	// logbatch.go): `detour serve`, whose log is nothing but a stream to
	// read. Other lines are written at once, in order.
	BatchLog bool
	// HeapFloor keeps the garbage collector's heap goal at 16 MiB or more
	// while the live heap is small (heapfloor.go), unless GOGC is set in
	// the environment: `detour serve`, a process of its own, where a
	// collection every few hundred requests cost a tenth of the CPU per
	// request. In-process Serves (tests, `detour run`) leave the
	// collector to their program.
	HeapFloor bool
	// Listener, when set, is used instead of listening on the policy's
	// listen address (tests; `detour run`).
	Listener net.Listener
	// AdminListener, when set, is used instead of listening on the policy's
	// admin_listen address, so that tests never bind the fixed default
	// 127.0.0.1:8788. When nil, detour listens on admin_listen unless the
	// policy turns the admin listener off.
	AdminListener net.Listener
	// Ready, when set, is called once the proxy accepts connections.
	Ready func(addr net.Addr, ca *mitm.CA)
	// OnRecord receives every finished request record, after detour's own
	// metrics have counted it.
	OnRecord func(*chain.Record)
	// TransparentListeners, when set, are used instead of listening on
	// the policy's transparent.listen (tests, and `detour serve --transparent`).
	TransparentListeners []net.Listener
	// Now, when set, is the clock of cooldowns and breakers (chain.Runner's
	// Now): `detour demo` runs on a virtual clock so that a seed always
	// gives the same run. Nil is the real clock.
	Now func() time.Time
	// Rand, when set, draws weighted selections (chain.Runner's Rand): a
	// seeded generator makes a canary's split reproducible. Nil is
	// math/rand/v2.
	Rand func() uint64
}

// CompilePolicy compiles a policy file with the process's environment.
func CompilePolicy(name string, data []byte) (*policy.Compiled, error) {
	return policy.Compile(name, data, policy.Options{})
}

// LoadPolicy reads and compiles the policy at path, or the built-in one.
func LoadPolicy(path string, builtin []byte) (*policy.Compiled, error) {
	if path == "" {
		return policy.Compile("built-in policy.json", builtin, policy.Options{BaseDir: "."})
	}
	data, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("policy file %s does not exist: create it (the README has an example) or omit --policy to use the built-in policy", path)
		}
		return nil, fmt.Errorf("reading policy: %w", err)
	}
	return CompilePolicy(path, data)
}

// NewLogger returns the JSON logger detour writes its log lines with.
func NewLogger(w io.Writer, level string) zerolog.Logger {
	lvl, err := zerolog.ParseLevel(level)
	if err != nil || level == "" {
		lvl = zerolog.InfoLevel
	}
	return zerolog.New(w).Level(lvl).With().Timestamp().Logger()
}

// Serve runs the sidecar until ctx ends, then drains for up to the policy's
// drain_timeout; requests still running then are ended (see chain.Runner's
// Drain) and given drainCutGrace to say so.
// An invalid policy or an unusable CA is an error before anything listens.
func Serve(ctx context.Context, opts Options) error {
	pol, err := LoadPolicy(opts.PolicyPath, opts.BuiltinPolicy)
	if err != nil {
		return err
	}
	logger := NewLogger(opts.Stderr, pol.LogLevel)
	requestLogger := logger
	if f, ok := opts.Stderr.(*os.File); ok && opts.BatchLog {
		// The requests' lines are written in batches (logbatch.go); the
		// rest at once. Deferred first, so that it runs last.
		batch := newLogBatch(f)
		defer batch.Close()
		logger, requestLogger = NewLogger(batch.Direct(), pol.LogLevel), NewLogger(batch, pol.LogLevel)
	}
	if opts.HeapFloor {
		defer startHeapFloor()()
	}
	for _, w := range pol.ListenWarnings() {
		logger.Warn().Str("component", "listen").Msg(w)
	}
	for _, w := range pol.UpstreamWarnings() {
		logger.Warn().Str("component", "policy").Msg(w)
	}

	ca, created, warnings, err := mitm.LoadOrCreate(pol.CACertFile, pol.CAKeyFile)
	if err != nil {
		return fmt.Errorf("detour CA: %w", err)
	}
	for _, w := range warnings {
		logger.Warn().Str("component", "ca").Msg(w)
	}
	if created {
		logger.Info().Str("component", "ca").Str("cert_file", pol.CACertFile).Str("key_file", pol.CAKeyFile).
			Msg("created a new CA; apps must trust cert_file (e.g. SSL_CERT_FILE=<system roots + this file>)")
	}
	signer, err := mitm.NewSigner(ca, 0)
	if err != nil {
		return err
	}

	store := policy.NewStore(pol)
	readiness := &admin.Readiness{}
	readiness.PolicyLoaded()
	readiness.CAReady()

	ln := opts.Listener
	if ln == nil {
		ln, err = net.Listen("tcp", pol.Listen)
		if err != nil {
			return fmt.Errorf("listen on %s (policy field listen): %w", pol.Listen, err)
		}
	}
	adminLn := opts.AdminListener
	if adminLn == nil && pol.AdminListen != "" {
		adminLn, err = net.Listen("tcp", pol.AdminListen)
		if err != nil {
			if opts.Listener == nil {
				ln.Close()
			}
			return fmt.Errorf(`listen on %s (policy field admin_listen; "off" disables it): %w`, pol.AdminListen, err)
		}
	}

	hr := health.New()
	stopState, err := startState(pol, hr, logger, opts.Now)
	if err != nil {
		if opts.Listener == nil {
			ln.Close()
		}
		if adminLn != nil && opts.AdminListener == nil {
			adminLn.Close()
		}
		return err
	}
	defer stopState()
	onRecord := opts.OnRecord
	var metrics *admin.Metrics
	if adminLn != nil {
		// Metrics are only counted when something can scrape them.
		metrics = admin.NewMetrics(store, hr)
		onRecord = func(r *chain.Record) {
			metrics.Observe(r)
			if opts.OnRecord != nil {
				opts.OnRecord(r)
			}
		}
	}
	transports := &chain.Transports{}
	tracer := telemetry.New(logger)
	tracer.Apply(&pol.Telemetry)
	// Last: the final spans are flushed once every request has ended.
	defer tracer.Shutdown()
	drainCtx, drainNow := context.WithCancel(context.Background())
	defer drainNow()
	runner := &chain.Runner{
		Policy:     store.Load,
		Health:     hr,
		Transports: transports,
		Log:        requestLogger,
		OnRecord:   onRecord,
		Now:        opts.Now,
		Rand:       opts.Rand,
		Drain:      drainCtx,
		Tracer:     tracer,
		// Not inside a test's synctest bubble: the process's one Runner.
		ParkFirstWriters: true,
	}
	if metrics != nil {
		metrics.BufferedBytes(runner.BufferedBytes)
		metrics.Tracing(tracer.SpansDropped, tracer.ExportFailures)
	}
	srv := NewServer(store, signer, runner, logger)
	if adminLn != nil {
		srv.GuardListener(adminLn.Addr())
	}
	transports.Dial = srv.Dial
	runner.Passthrough = chain.NewTransport(TunnelDialTimeout, nil, srv.Dial)

	// Active health probes (upstreams.NAME.probe), after the dial guard is
	// in place; they follow reloads on their own and stop before Serve
	// returns.
	probeOpts := probe.Options{Policy: store.Load, Health: hr, Transports: transports, Log: logger, Now: opts.Now}
	if metrics != nil {
		probeOpts.OnResult = func(r probe.Result) { metrics.ObserveProbe(r.Upstream, r.Label()) }
	}
	probes := probe.New(probeOpts)
	probeCtx, stopProbes := context.WithCancel(ctx)
	probesDone := make(chan struct{})
	go func() { defer close(probesDone); probes.Run(probeCtx) }()
	defer func() { stopProbes(); <-probesDone }()

	// SIGHUP reloads the policy, for setups where file events do not
	// arrive (some network file systems, some container runtimes). The
	// handler is in place before detour says it is listening, so a SIGHUP
	// sent on that cue never kills the process.
	var hup chan os.Signal
	if opts.PolicyPath != "" {
		hup = make(chan os.Signal, 1)
		signal.Notify(hup, syscall.SIGHUP)
		defer signal.Stop(hup)
	}

	tctx, stopTransparent := context.WithCancel(ctx)
	defer stopTransparent()
	if err := srv.startTransparent(tctx, pol, opts.TransparentListeners); err != nil {
		if opts.Listener == nil {
			ln.Close()
		}
		return err
	}

	addr := ln.Addr().String()
	ev := logger.Info().Str("listen", addr).Str("policy", pol.Source).Str("version", pol.Version).
		Str("https_proxy", "http://"+addr).
		Str("openai_base_url", "http://"+addr+"/openai/v1").
		Str("anthropic_base_url", "http://"+addr+"/anthropic")
	if adminLn != nil {
		ev = ev.Str("admin", "http://"+adminLn.Addr().String())
	} else {
		ev = ev.Str("admin", "off")
	}
	ev.Msg("detour is listening")

	if adminLn != nil {
		adminSrv := &http.Server{
			Handler: admin.NewHandler(admin.Options{
				Store: store, Health: hr, Metrics: metrics, Ready: readiness.Check, Log: logger,
				CacheLen: runner.CacheLen, Probes: probes.Status, Windows: runner.Windows(),
			}),
			ReadHeaderTimeout: ReadHeaderTimeout,
			IdleTimeout:       IdleConnTimeout,
			ErrorLog:          log.New(serverErrorLog{logger}, "", 0),
		}
		go func() {
			if err := adminSrv.Serve(adminLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
				// The proxy keeps working without its admin listener; the
				// kubelet's probes will say so.
				logger.Error().Str("component", "admin").Err(err).Msg("admin listener stopped")
			}
		}()
		// Closed after the proxy has drained (defers run last in, first
		// out), so that probes and scrapes see the drain.
		defer func() {
			actx, acancel := context.WithTimeout(context.Background(), adminShutdownTimeout)
			defer acancel()
			_ = adminSrv.Shutdown(actx)
		}()
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// watching is closed once the policy's directory is watched (or the
	// watch failed): Ready waits for it, so that an edit made on that cue
	// is never missed.
	watching := make(chan struct{})
	if opts.PolicyPath == "" {
		close(watching)
	} else {
		go func() {
			var once sync.Once
			armed := func() { once.Do(func() { close(watching) }) }
			defer armed()
			err := store.Watch(ctx, opts.PolicyPath, CompilePolicy, policy.WatchOptions{Ready: armed, OnResult: func(r policy.ReloadResult) {
				// Rollbacks and history are recorded by the store itself.
				if r.Err != nil {
					logger.Error().Str("component", "policy").Str("file", opts.PolicyPath).Err(r.Err).
						Str("kept_version", store.Load().Version).Msg("policy reload refused; keeping the last good policy")
					return
				}
				ev := logger.Info().Str("component", "policy").Str("version", r.Policy.Version).Str("hash", r.Policy.Hash[:12])
				if r.Policy.Listen != pol.Listen {
					ev = ev.Str("warning", "listen changed; it takes effect at the next restart")
				}
				ev.Msg("policy reloaded")
			}})
			if err != nil {
				logger.Error().Str("component", "policy").Err(err).Msg("policy watch stopped; hot reload is off")
			}
		}()
	}

	if hup != nil {
		go func() {
			for {
				select {
				case <-ctx.Done():
					return
				case <-hup:
					r := store.Reload(opts.PolicyPath, CompilePolicy)
					switch {
					case r.Err != nil && !r.Changed:
						// Logged (and counted) when it was first refused.
						logger.Warn().Str("component", "policy").Str("trigger", "SIGHUP").Err(r.Err).Str("kept_version", store.Load().Version).
							Msg("policy file unchanged since it was refused; keeping the last good policy")
					case r.Err != nil:
						logger.Error().Str("component", "policy").Str("trigger", "SIGHUP").Err(r.Err).Msg("policy reload refused; keeping the last good policy")
					case r.Changed:
						logger.Info().Str("component", "policy").Str("trigger", "SIGHUP").Str("version", r.Policy.Version).Msg("policy reloaded")
					case r.RollbackKept:
						logger.Info().Str("component", "policy").Str("trigger", "SIGHUP").Str("version", store.Load().Version).
							Msg("policy file unchanged since the rollback; the rolled-back policy stays until the file changes")
					default:
						logger.Info().Str("component", "policy").Str("trigger", "SIGHUP").Msg("policy unchanged")
					}
				}
			}
		}()
	}

	errc := make(chan error, 1)
	serving := make(chan struct{})
	go func() {
		errc <- srv.Serve(&acceptNotifier{Listener: ln, first: func() { readiness.Serving(); close(serving) }})
	}()
	// Ready fires only once the server waits on the listener, so that
	// whoever it tells (a test, `detour run`) finds /readyz already 200.
	select {
	case <-serving:
	case err := <-errc:
		readiness.ShuttingDown()
		return err
	case <-ctx.Done():
	}
	select {
	case <-watching:
	case <-ctx.Done():
	}
	if opts.Ready != nil && ctx.Err() == nil {
		opts.Ready(ln.Addr(), ca)
	}
	select {
	case err := <-errc:
		readiness.ShuttingDown()
		return err
	case <-ctx.Done():
	}
	// Not ready before draining: a Kubernetes readinessProbe then takes the
	// pod out of its Service's endpoints while in-flight requests finish.
	readiness.ShuttingDown()
	drain := store.Load().Bounds.DrainTimeout
	logger.Info().Dur("drain_timeout", drain).Msg("shutting down: draining in-flight requests")
	err = shutdownWithin(srv, drain)
	if errors.Is(err, context.DeadlineExceeded) {
		// Whatever still runs is ended now, each request with an error in
		// its app's shape and its log line, rather than cut silently when
		// the process exits.
		drainNow()
		err = shutdownWithin(srv, drainCutGrace)
	}
	transports.CloseIdle()
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}

// shutdownWithin shuts srv down, waiting at most d for its requests.
func shutdownWithin(srv *Server, d time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return srv.Shutdown(ctx)
}

// acceptNotifier calls first once, when the server first waits for a
// connection: from then on the proxy listener is really being served, which
// is what /readyz reports.
type acceptNotifier struct {
	net.Listener
	once  sync.Once
	first func()
}

func (a *acceptNotifier) Accept() (net.Conn, error) {
	a.once.Do(a.first)
	return a.Listener.Accept()
}
