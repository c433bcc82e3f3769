// Package devrun implements `detour run -- CMD ARGS…`, the development
// wrapper: it starts detour in-process on free loopback ports, runs CMD with
// the environment that sends its LLM calls through detour whatever its
// runtime honours (HTTPS_PROXY and a CA bundle that trusts detour; the
// official SDKs' base-URL variables for runtimes that ignore the proxy, such
// as Node before 22.21; JAVA_TOOL_OPTIONS with a PKCS12 trust store for
// Java), passes signals on to it, warns when one of CMD's processes
// connects to a vendor past detour (Linux), and when CMD exits stops detour,
// prints a one-line summary and reports CMD's exit status.
//
// It wires existing parts together (proxy.Serve, mitm.WriteBundle, the
// request records of internal/chain, the policy's routes and upstreams); it
// adds no proxy behaviour of its own. It must not import internal/cli,
// which imports it.
package devrun

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/detour-proxy/detour/internal/mitm"
	"github.com/detour-proxy/detour/proxy"
)

// Defaults of Options.
const (
	// DefaultDrain is how long detour may finish in-flight requests once
	// CMD has exited. Short: the app that sent them is gone, and only a
	// process CMD left behind can still be waiting for an answer.
	DefaultDrain = 3 * time.Second
	// startTimeout bounds detour's start (policy, CA, listeners).
	startTimeout = 30 * time.Second
	// killGrace is how long a child has to exit after the SIGTERM that a
	// cancelled context sends, before it is killed.
	killGrace = 5 * time.Second
	// pipeWait bounds how long Run waits, after CMD exits, for CMD's output
	// when Stdout or Stderr is not a file (a background process of CMD may
	// hold the pipe open for ever).
	pipeWait = 2 * time.Second
)

// Options configure Run.
type Options struct {
	// Command is CMD and its arguments; required. Command[0] is looked up
	// in PATH as a shell would.
	Command []string
	// PolicyPath is the policy file; "" means BuiltinPolicy.
	PolicyPath string
	// BuiltinPolicy is the policy used when PolicyPath is "".
	BuiltinPolicy []byte
	// LogFile is where detour's JSON log goes: a file name (appended to),
	// "-" for Stderr, or "" for a new file in the system temporary
	// directory, which outlives the run so it can be read afterwards. The
	// log is kept apart from Stderr by default so that it does not
	// interleave with CMD's own output.
	LogFile string
	// Env is the environment CMD inherits before detour's variables are
	// added; nil means the process's environment (os.Environ).
	Env []string
	// Stdin, Stdout and Stderr are CMD's; nil means the null device.
	// Stderr also receives detour's start line and summary.
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Signals delivers the signals to pass on to CMD; nil means Run
	// subscribes to ForwardedSignals itself. Tests inject signals here
	// instead of signalling the test process.
	Signals <-chan os.Signal
	// Drain bounds detour's shutdown after CMD exits; zero means
	// DefaultDrain.
	Drain time.Duration
}

// Result is how a run ended.
type Result struct {
	// ExitCode is CMD's exit status, or 128+N when signal N killed it, as a
	// shell reports it.
	ExitCode int
	// Summary counts the requests detour served during the run.
	Summary Summary
	// LogFile is the file detour logged to; "" when it logged to Stderr.
	LogFile string
}

// StartError means CMD could not be started. Code is the status a shell
// exits with in the same case: 127 when the command is not found, 126 when
// it is found but cannot be executed.
type StartError struct {
	Name string
	Code int
	Err  error
}

func (e *StartError) Error() string {
	if e.Code == 127 {
		return fmt.Sprintf("%s: command not found", e.Name)
	}
	return fmt.Sprintf("%s: cannot run it: %v", e.Name, e.Err)
}

func (e *StartError) Unwrap() error { return e.Err }

// Run starts detour, runs CMD under it, and returns when CMD has exited and
// detour has stopped. Signals received meanwhile are passed on to CMD and do
// not stop detour: CMD decides when the run ends, so an app that shuts down
// gracefully on SIGTERM can still reach its LLM vendors while it does.
//
// Cancelling ctx is a hard stop, for callers that must end a run: CMD gets
// SIGTERM, then SIGKILL after a grace period. `detour run` detaches ctx from
// main's signal handling for that reason (its signals are CMD's to handle).
//
// An error means detour did not start (bad policy, CA, listeners) or CMD
// could not be started (*StartError); CMD's own failure is not an error but
// a non-zero Result.ExitCode.
func Run(ctx context.Context, opts Options) (Result, error) {
	var res Result
	if len(opts.Command) == 0 || opts.Command[0] == "" {
		return res, errors.New("devrun: no command to run")
	}
	if opts.Stderr == nil {
		opts.Stderr = io.Discard
	}
	// The bypass watcher warns on Stderr while CMD writes to it.
	opts.Stdout, opts.Stderr = serialize(opts.Stdout, opts.Stderr)
	if opts.Drain <= 0 {
		opts.Drain = DefaultDrain
	}
	if opts.Env == nil {
		opts.Env = os.Environ()
	}
	// Before anything starts: a typo in the command should cost nothing
	// and say so the way a shell would.
	path, err := lookPath(opts.Command[0])
	if err != nil {
		return res, err
	}
	sigs := opts.Signals
	if sigs == nil {
		// Subscribed before the child exists, so that a signal arriving
		// during start-up is seen (and ends the run before CMD starts).
		ch := make(chan os.Signal, 16)
		signal.Notify(ch, ForwardedSignals...)
		defer signal.Stop(ch)
		sigs = ch
	}

	// Loaded here as well as by proxy.Serve, to learn whether the admin
	// listener is on before choosing its port.
	pol, err := proxy.LoadPolicy(opts.PolicyPath, opts.BuiltinPolicy)
	if err != nil {
		return res, err
	}
	dir, err := os.MkdirTemp("", "detour-run-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)

	logw, logFile, closeLog, err := openLog(opts.LogFile, opts.Stderr)
	if err != nil {
		return res, err
	}
	defer closeLog()
	res.LogFile = logFile

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return res, fmt.Errorf("detour run: listening on loopback: %w", err)
	}
	var adminLn net.Listener
	if pol.AdminListen != "" {
		if adminLn, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			ln.Close()
			return res, fmt.Errorf("detour run: listening on loopback: %w", err)
		}
	}

	t := newTally()
	// detour's life is Run's to end, never ctx's: see the doc comment.
	serveCtx, stopServe := context.WithCancel(context.WithoutCancel(ctx))
	defer stopServe()
	ready := make(chan *mitm.CA, 1)
	served := make(chan error, 1)
	go func() {
		served <- proxy.Serve(serveCtx, proxy.Options{
			PolicyPath:    opts.PolicyPath,
			BuiltinPolicy: opts.BuiltinPolicy,
			Stderr:        logw,
			Listener:      ln,
			AdminListener: adminLn,
			Ready:         func(_ net.Addr, ca *mitm.CA) { ready <- ca },
			OnRecord:      t.add,
		})
	}()
	// stopDetour stops detour and waits a little for it to finish the
	// requests in flight; it is safe to call more than once.
	stopped := false
	stopDetour := func() error {
		if stopped {
			return nil
		}
		stopped = true
		stopServe()
		var err error
		select {
		case err = <-served:
		case <-time.After(opts.Drain):
			// Serve goes on draining in the background; its requests'
			// records may then miss the summary.
		}
		if adminLn != nil {
			// In case Serve never took it over.
			adminLn.Close()
		}
		return err
	}
	defer stopDetour()

	var ca *mitm.CA
	select {
	case ca = <-ready:
	case err := <-served:
		// Serve may fail before it takes the listeners over (a bad CA).
		stopped = true
		ln.Close()
		if adminLn != nil {
			adminLn.Close()
		}
		return res, err
	case <-time.After(startTimeout):
		return res, fmt.Errorf("detour run: detour did not start within %v", startTimeout)
	}

	proxyURL := "http://" + ln.Addr().String()
	adminURL := ""
	if adminLn != nil {
		adminURL = "http://" + adminLn.Addr().String()
	}
	files, warning, err := writeTrustFiles(dir, ca, opts.Env)
	if err != nil {
		return res, err
	}
	if warning != "" {
		fmt.Fprintf(opts.Stderr, "detour run: warning: %s\n", warning)
	}
	sdkVars, kept := baseURLs(pol, proxyURL, opts.Env)
	fmt.Fprintln(opts.Stderr, banner(proxyURL, adminURL, logFile, sdkVars))
	for _, note := range kept {
		fmt.Fprintf(opts.Stderr, "detour run: note: %s\n", note)
	}

	cmd := exec.Command(path, opts.Command[1:]...)
	cmd.Args[0] = opts.Command[0] // what the user typed, as a shell passes it
	cmd.Env = childEnv(opts.Env, vars{
		Proxy: proxyURL, Admin: adminURL, Bundle: files.bundle, NodeCA: files.nodeCA,
		BaseURLs:    sdkVars,
		JavaOptions: javaToolOptions(lookupEnv(opts.Env, "JAVA_TOOL_OPTIONS"), ln.Addr().String(), files.java),
	})
	cmd.Stdin, cmd.Stdout, cmd.Stderr = opts.Stdin, opts.Stdout, opts.Stderr
	cmd.WaitDelay = pipeWait

	// A signal or a cancellation before CMD starts ends the run here: the
	// user asked to stop before there was anything to pass it on to.
	select {
	case sig := <-sigs:
		res.ExitCode = 128 + signalNumber(sig)
		res.Summary = t.summary()
		return res, nil
	case <-ctx.Done():
		return res, ctx.Err()
	default:
	}
	if err := cmd.Start(); err != nil {
		return res, &StartError{Name: opts.Command[0], Code: 126, Err: err}
	}

	// The run's own events go to detour's log, as JSON lines like the rest
	// of it: which signals were passed on is what one wants to know when
	// an app did not shut down as expected.
	logger := proxy.NewLogger(logw, pol.LogLevel).With().Str("component", "run").Logger()
	logger.Info().Strs("command", opts.Command).Int("pid", cmd.Process.Pid).Msg("command started")
	own := []net.Addr{ln.Addr()}
	if adminLn != nil {
		own = append(own, adminLn.Addr())
	}
	stopWatch, unchecked := watchBypasses(cmd.Process.Pid, newBypassTargets(pol, own...), func(b Bypass) {
		fmt.Fprintf(opts.Stderr, "detour run: warning: %s (pid %d) connected to %s directly, so detour never saw that call: %s\n", b.Runtime, b.PID, b.Remote, hint(b.Runtime))
		logger.Warn().Str("runtime", b.Runtime).Int("pid", b.PID).Str("remote", b.Remote).Msg("connection past detour")
	})
	defer stopWatch()
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	fw := &forwarder{child: cmd.Process, delivered: keyboardDelivered}
	var waitErr error
	ctxDone := ctx.Done()
	var kill <-chan time.Time
loop:
	for {
		select {
		case waitErr = <-waited:
			break loop
		case sig := <-sigs:
			if fw.forward(sig) {
				logger.Info().Str("signal", sig.String()).Msg("signal passed on to the command")
			} else {
				logger.Info().Str("signal", sig.String()).Msg("signal not passed on: the terminal delivered it to the command already, or the command has exited")
			}
		case <-ctxDone:
			ctxDone = nil
			logger.Warn().Msg("run cancelled: stopping the command")
			terminate(cmd.Process)
			kill = time.After(killGrace)
		case <-kill:
			_ = cmd.Process.Kill()
		case err := <-served:
			// detour died under a running app (it should not): say so
			// once, and leave the app to finish on its own terms.
			stopped = true
			served = nil
			fmt.Fprintf(opts.Stderr, "detour run: detour stopped while %s is running: %v\n", opts.Command[0], err)
		}
	}
	unseen := stopWatch()
	if cmd.ProcessState == nil {
		return res, fmt.Errorf("detour run: waiting for %s: %w", opts.Command[0], waitErr)
	}
	res.ExitCode = exitCode(cmd.ProcessState)
	logger.Info().Int("exit_code", res.ExitCode).Msg("command exited; stopping detour")

	if err := stopDetour(); err != nil {
		fmt.Fprintf(opts.Stderr, "detour run: detour stopped with an error: %v\n", err)
	}
	res.Summary = t.summary()
	res.Summary.Unseen, res.Summary.UnseenUnchecked = unseen, unchecked
	line := res.Summary.String()
	if res.Summary.Errors > 0 && logFile != "" {
		line += " (details: " + logFile + ")"
	}
	fmt.Fprintln(opts.Stderr, line)
	return res, nil
}

// lookPath finds name as a shell would, and fails as one would: 127 when it
// is not found, 126 when it is there but not executable.
func lookPath(name string) (string, error) {
	path, err := exec.LookPath(name)
	if err == nil {
		return path, nil
	}
	code := 127
	if errors.Is(err, fs.ErrPermission) {
		code = 126
	}
	return "", &StartError{Name: name, Code: code, Err: err}
}

// openLog opens detour's log according to Options.LogFile and returns the
// writer, the file's name ("" for stderr) and a closer.
func openLog(name string, stderr io.Writer) (io.Writer, string, func(), error) {
	switch name {
	case "-":
		return stderr, "", func() {}, nil
	case "":
		// Not in the run's own temporary directory: that one is removed
		// at exit, and the log is most wanted after a run that went wrong.
		f, err := os.CreateTemp("", "detour-run-*.log")
		if err != nil {
			return nil, "", nil, fmt.Errorf("detour run: creating the log file: %w", err)
		}
		return f, f.Name(), func() { f.Close() }, nil
	}
	// 0600: with log.prompts on, the log holds prompts.
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, "", nil, fmt.Errorf("detour run: opening the log file: %w", err)
	}
	abs, err := filepath.Abs(name)
	if err != nil {
		abs = name
	}
	return f, abs, func() { f.Close() }, nil
}

// banner is the line printed before CMD starts: where detour listens, where
// it logs, and which SDK base-URL variables it set.
func banner(proxyURL, adminURL, logFile string, sdkVars [][2]string) string {
	s := "detour run: proxy " + proxyURL
	if adminURL != "" {
		s += ", admin " + adminURL
	}
	if logFile != "" {
		s += ", log " + logFile
	}
	if len(sdkVars) > 0 {
		names := make([]string, len(sdkVars))
		for i, kv := range sdkVars {
			names[i] = kv[0]
		}
		s += ", base URL in " + strings.Join(names, " ")
	}
	return s
}

// serialize makes Stderr safe to write while CMD writes to it: a file
// already is (each write is one system call), and any other writer is
// wrapped with a lock, shared with Stdout when CMD's two outputs are one
// writer (exec.Cmd then copies both through one goroutine, which the lock
// must cover too).
func serialize(stdout, stderr io.Writer) (io.Writer, io.Writer) {
	if _, ok := stderr.(*os.File); ok {
		return stdout, stderr
	}
	l := &lockedWriter{w: stderr}
	if sameWriter(stdout, stderr) {
		return l, l
	}
	return stdout, l
}

// sameWriter reports whether a and b are the same writer, as exec.Cmd
// decides it (a writer of a type that cannot be compared is no other's).
func sameWriter(a, b io.Writer) (same bool) {
	defer func() {
		if recover() != nil {
			same = false
		}
	}()
	return a == b
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
