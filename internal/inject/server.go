package inject

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// Server timeouts. The API server gives a webhook at most its timeoutSeconds
// (the chart sets 5s; 30s at most).
const (
	// DefaultListen is the webhook's address when none is given.
	DefaultListen = ":8443"
	// CertCheckInterval is how often the serving certificate files are
	// checked for a change (a cert-manager renewal, a Secret update).
	CertCheckInterval = 10 * time.Second
	// ShutdownTimeout bounds the drain of in-flight reviews at exit.
	ShutdownTimeout   = 5 * time.Second
	readHeaderTimeout = 5 * time.Second
	readTimeout       = 10 * time.Second
	writeTimeout      = 10 * time.Second
	idleTimeout       = 90 * time.Second
)

// ServeOptions configure Serve.
type ServeOptions struct {
	// Listen is the TCP address. Default DefaultListen.
	Listen string
	// CertFile and KeyFile are the PEM serving certificate (its chain) and
	// key. Both required; re-read when they change.
	CertFile, KeyFile string
	// Config is what is injected.
	Config Config
	// Log receives the start line and one line per review.
	Log zerolog.Logger
	// Listener, when set, is used instead of listening on Listen (tests).
	Listener net.Listener
	// Ready, when set, is called once the server accepts connections.
	Ready func(addr net.Addr)
	// CertCheckInterval overrides CertCheckInterval (tests).
	CertCheckInterval time.Duration
}

// Serve runs the webhook until ctx ends: POST /inject answers
// AdmissionReviews, GET /healthz answers the kubelet's probes. An unusable
// certificate or config is an error before anything listens.
func Serve(ctx context.Context, opts ServeOptions) error {
	if err := opts.Config.Validate(); err != nil {
		return fmt.Errorf("injector config: %w", err)
	}
	if opts.CertFile == "" || opts.KeyFile == "" {
		return errors.New("the webhook needs a TLS certificate and key (the API server calls webhooks over HTTPS only)")
	}
	interval := opts.CertCheckInterval
	if interval == 0 {
		interval = CertCheckInterval
	}
	certs := &certReloader{certFile: opts.CertFile, keyFile: opts.KeyFile, interval: interval, log: opts.Log}
	if err := certs.load(); err != nil {
		return err
	}

	mux := http.NewServeMux()
	mux.Handle("/inject", &Handler{Config: opts.Config, Log: opts.Log})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	srv := &http.Server{
		Handler:           mux,
		TLSConfig:         &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: certs.get},
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		// TLS handshake errors (the kubelet's probes close early) are noise
		// at info level; keep them at debug.
		ErrorLog: log.New(debugWriter{opts.Log}, "", 0),
	}

	ln := opts.Listener
	if ln == nil {
		addr := opts.Listen
		if addr == "" {
			addr = DefaultListen
		}
		var err error
		if ln, err = net.Listen("tcp", addr); err != nil {
			return fmt.Errorf("listen on %s: %w", addr, err)
		}
	}
	c := opts.Config.withDefaults()
	opts.Log.Info().Str("listen", ln.Addr().String()).Str("image", c.Image).Bool("native_sidecars", *c.NativeSidecars).
		Str("interception", c.Interception).
		Str("policy_configmap", c.PolicyConfigMap).Str("ca_secret", c.CASecret).Msg("detour injector is listening")
	if opts.Ready != nil {
		opts.Ready(ln.Addr())
	}

	errc := make(chan error, 1)
	go func() { errc <- srv.ServeTLS(ln, "", "") }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("stopping the webhook: %w", err)
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// certReloader serves the certificate in certFile/keyFile and re-reads the
// files when their size or modification time changes, checked at most once
// per interval. Kubernetes updates a Secret volume by swapping a symlink, so
// the files are stat'ed through it. A changed pair that does not load (caught
// halfway through an update) is logged and the previous one kept.
type certReloader struct {
	certFile, keyFile string
	interval          time.Duration
	log               zerolog.Logger

	mu      sync.Mutex
	cert    *tls.Certificate
	stamp   string
	checked time.Time
}

func (r *certReloader) load() error {
	stamp, err := r.currentStamp()
	if err != nil {
		return err
	}
	cert, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		return fmt.Errorf("webhook TLS certificate: %w", err)
	}
	r.mu.Lock()
	r.cert, r.stamp, r.checked = &cert, stamp, time.Now()
	r.mu.Unlock()
	return nil
}

func (r *certReloader) currentStamp() (string, error) {
	stamp := ""
	for _, f := range []string{r.certFile, r.keyFile} {
		fi, err := os.Stat(f)
		if err != nil {
			return "", fmt.Errorf("webhook TLS certificate: %w", err)
		}
		stamp += fmt.Sprintf("%d/%d;", fi.Size(), fi.ModTime().UnixNano())
	}
	return stamp, nil
}

func (r *certReloader) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	r.mu.Lock()
	due := time.Since(r.checked) >= r.interval
	if due {
		r.checked = time.Now()
	}
	cert, stamp := r.cert, r.stamp
	r.mu.Unlock()
	if due {
		if now, err := r.currentStamp(); err == nil && now != stamp {
			if err := r.load(); err != nil {
				r.log.Warn().Err(err).Msg("keeping the previous webhook certificate")
			} else {
				r.log.Info().Str("cert_file", r.certFile).Msg("reloaded the webhook certificate")
				r.mu.Lock()
				cert = r.cert
				r.mu.Unlock()
			}
		}
	}
	return cert, nil
}

// debugWriter sends net/http's server log to the logger at debug level.
type debugWriter struct{ log zerolog.Logger }

func (d debugWriter) Write(p []byte) (int, error) {
	d.log.Debug().Str("component", "http").Msg(string(p))
	return len(p), nil
}
