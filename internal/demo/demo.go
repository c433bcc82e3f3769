// Package demo runs `detour demo`: three fake vendors with injected faults,
// detour in the same process as their HTTPS_PROXY, and an OpenAI client
// sending chat completions through it — so anyone can watch failover happen
// on a fresh machine with no keys and no network.
//
// The client is plain net/http sending what the official SDKs send (see
// client.go); the SDKs themselves stay out of the detour binary, and the
// package's tests run the demo's traffic through openai-go too.
package demo

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/detour-proxy/detour/internal/fakevendor"
	"github.com/detour-proxy/detour/internal/mitm"
	"github.com/detour-proxy/detour/proxy"
	"github.com/detour-proxy/detour/rewrite"
)

// Options configure a demo run.
type Options struct {
	// Requests is how many chat completions the client sends, one after
	// the other. Default 60.
	Requests int
	// Seed makes the injected faults reproducible. Default 1.
	Seed int64
	// Pace is the real pause between requests, so that a person can watch
	// the progress line. Default 100ms on a terminal, none otherwise. It
	// changes nothing in the outcome: see step.
	Pace time.Duration
	// Out receives the table (and, on a terminal, the progress line).
	Out io.Writer
	// LogOut receives detour's JSON log (default: discarded).
	LogOut io.Writer
}

// A demo run is the same for the same seed, byte for byte: the requests go
// one at a time (each once the previous one's record is written, so that
// no fault, cooldown or breaker decision depends on which of two requests
// got there first), and detour's cooldowns and breakers run on a virtual
// clock that starts at epoch and moves step per request — so the quota
// cooldown ends after the same request every time, however fast or loaded
// the machine. Wall-clock time and the loopback port, which differ from run
// to run, are shown only on a terminal.
const step = 100 * time.Millisecond

// epoch is where the virtual clock starts: the cooldown times in the table
// are read from it.
var epoch = time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)

// clock is the demo's virtual clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

type vendorSpec struct {
	name   string
	shape  rewrite.Shape
	model  string // the upstream's model when it is not the app's shape
	faults string
	about  string
}

// The cast: the primary is flaky, then runs out of quota a third of the way
// in; the backup is another vendor (Anthropic-shaped: detour translates the
// app's OpenAI requests and streams) and is overloaded now and then; local
// always answers.
var cast = []vendorSpec{
	{"openai", rewrite.OpenAI, "", "529:overloaded=0.15,hang=0.08,stream_error_early:overloaded=0.1", "OpenAI, flaky, then out of quota"},
	{"backup", rewrite.Anthropic, "claude-haiku-4-5", "529:overloaded=0.2,html=0.05", "Anthropic, translated, overloaded now and then"},
	{"local", rewrite.OpenAI, "qwen2.5:7b-instruct", "", "OpenAI-compatible, always answers"},
}

// Run runs the demo and returns when every request has finished.
func Run(ctx context.Context, opts Options) error {
	if opts.Requests <= 0 {
		opts.Requests = 60
	}
	if opts.Seed == 0 {
		opts.Seed = 1
	}
	out := opts.Out
	live := isTerminal(out)
	if opts.Pace == 0 && live {
		opts.Pace = 100 * time.Millisecond
	}
	if opts.LogOut == nil {
		opts.LogOut = io.Discard
	}
	clk := &clock{now: epoch}
	dir, err := os.MkdirTemp("", "detour-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	// The fake vendors serve HTTPS with leaves from a throwaway CA of the
	// demo's own, which detour trusts through each upstream's ca_file.
	vendorCA, err := mitm.Generate()
	if err != nil {
		return err
	}
	vendorSigner, err := mitm.NewSigner(vendorCA, 0)
	if err != nil {
		return err
	}
	leaf, err := vendorSigner.Certificate("127.0.0.1")
	if err != nil {
		return err
	}
	caFile := filepath.Join(dir, "vendors-ca.pem")
	if err := os.WriteFile(caFile, vendorCA.CertPEM, 0o644); err != nil {
		return err
	}

	var ups []string
	var vendors []*fakevendor.Vendor
	for i, spec := range cast {
		v := fakevendor.New(spec.shape, fakevendor.Options{Name: spec.name, EventDelay: 10 * time.Millisecond, Now: clk.Now})
		if spec.faults != "" {
			fs, err := fakevendor.ParseFaults(spec.faults)
			if err != nil {
				return err
			}
			v.SetRandomFaults(fs, opts.Seed+int64(i))
		}
		srv, err := serveTLS(v, leaf)
		if err != nil {
			return err
		}
		defer srv.Close()
		base, models := srv.url, ""
		if spec.shape == rewrite.OpenAI {
			base += "/v1"
		}
		if spec.model != "" {
			models = fmt.Sprintf(`, "models": {"*": %q}`, spec.model)
		}
		ups = append(ups, fmt.Sprintf(`%q: {"shape": %q, "base_url": %q, "ca_file": %q, "auth": {"none": true}, "timeouts": {"first_byte": "400ms"}%s}`,
			spec.name, spec.shape, base, caFile, models))
		vendors = append(vendors, v)
	}
	policyPath := filepath.Join(dir, "policy.json")
	pol := fmt.Sprintf(`{
  "version": "demo",
  "admin_listen": "off",
  "ca": {"cert_file": "ca.pem", "key_file": "ca-key.pem"},
  "upstreams": {%s},
  "routes": [{"name": "openai-chat", "match": {"host": "api.openai.com", "path": "/v1/chat/completions"}, "chain": ["openai", "backup", "local"]}],
  "errors": {"classes": {"quota_exhausted": {"cooldown": "1s"}}},
  "breaker": {"open_for": "400ms", "half_open_probes": 2},
  "deadline": "10s"
}`, strings.Join(ups, ",\n"))
	if err := os.WriteFile(policyPath, []byte(pol), 0o644); err != nil {
		return err
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	tally := newTally()
	ready := make(chan *mitm.CA, 1)
	pctx, stop := context.WithCancel(ctx)
	defer stop()
	served := make(chan error, 1)
	go func() {
		served <- proxy.Serve(pctx, proxy.Options{
			PolicyPath: policyPath, Stderr: opts.LogOut, Listener: ln,
			Ready:    func(_ net.Addr, ca *mitm.CA) { ready <- ca },
			OnRecord: tally.add,
			Now:      clk.Now,
		})
	}()
	var ca *mitm.CA
	select {
	case ca = <-ready:
	case err := <-served:
		return fmt.Errorf("detour did not start: %w", err)
	}

	fmt.Fprintf(out, "detour demo: %d chat completions from an OpenAI client through detour as its HTTPS_PROXY, seed %d\n", opts.Requests, opts.Seed)
	if live {
		fmt.Fprintf(out, "(HTTPS_PROXY=http://%s)\n", ln.Addr())
	}
	fmt.Fprintf(out, "chain: openai (%s)\n    → backup (%s)\n    → local (%s)\n\n", cast[0].about, cast[1].about, cast[2].about)

	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	app := &client{
		baseURL: "https://api.openai.com/v1/",
		apiKey:  "sk-demo-not-a-real-key",
		http: &http.Client{Transport: &http.Transport{
			Proxy:           http.ProxyURL(&url.URL{Scheme: "http", Host: ln.Addr().String()}),
			TLSClientConfig: &tls.Config{RootCAs: pool},
		}},
	}
	defer app.http.CloseIdleConnections()
	start := time.Now()
	quotaAt := opts.Requests / 3
	appErrs := 0
	for i := 0; i < opts.Requests && ctx.Err() == nil; i++ {
		if i == quotaAt {
			// From here on the primary's quota is gone: every call gets
			// 429 insufficient_quota. detour should cool it down and
			// probe it only when the cooldown ends.
			vendors[0].SetRandomFaults(nil, 0)
			vendors[0].SetDefault(fakevendor.Fault{Kind: fakevendor.Status, Status: 429, Class: fakevendor.ClassInsufficientQuota})
		}
		clk.advance(step)
		if err := app.ask(ctx, i%3 == 0); err != nil && ctx.Err() == nil {
			appErrs++
		}
		// The app has a stream's last event before detour has written
		// the request's record (and counted the answering attempt in its
		// breaker): the next request waits for it.
		if err := tally.wait(ctx, i+1); err != nil {
			break
		}
		tally.progress(out, opts.Requests, live, time.Since(start))
		if opts.Pace > 0 {
			select {
			case <-time.After(opts.Pace):
			case <-ctx.Done():
			}
		}
	}
	stop()
	<-served
	if live {
		fmt.Fprintln(out)
	}
	tally.table(out, vendors)
	fmt.Fprintf(out, "\nThe app saw %d errors in %d requests. Each answer's x-detour-answered-by header names who answered.\n", appErrs, opts.Requests)
	return ctx.Err()
}

// isTerminal reports whether w is a terminal, where a progress line can be
// redrawn in place.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// vendorServer is one fake vendor's HTTPS server on a loopback port of the
// kernel's choosing.
type vendorServer struct {
	srv *http.Server
	url string
}

func serveTLS(h http.Handler, leaf *tls.Certificate) (*vendorServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{*leaf}, NextProtos: []string{"http/1.1"}}
	s := &vendorServer{srv: &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}, url: "https://" + ln.Addr().String()}
	go func() { _ = s.srv.Serve(tls.NewListener(ln, cfg)) }()
	return s, nil
}

// Close stops the server and its connections.
func (s *vendorServer) Close() { _ = s.srv.Close() }
