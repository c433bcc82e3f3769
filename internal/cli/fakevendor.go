package cli

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/detour-proxy/detour/internal/fakevendor"
	"github.com/detour-proxy/detour/internal/mitm"
	"github.com/detour-proxy/detour/rewrite"
)

// FakeVendor runs `detour fake-vendor`: a chaos vendor for testing one's own
// app and policy, speaking a vendor's exact wire format and failing as told.
func FakeVendor(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("fake-vendor", "detour fake-vendor --shape openai|anthropic|gemini [--faults SPEC] [--listen ADDR] [--tls] [--name NAME] [--seed N] [--event-delay D]", stderr)
	shape := fs.String("shape", "openai", "wire format: openai, anthropic or gemini")
	faults := fs.String("faults", "", `faults with probabilities, e.g. "429:insufficient_quota=0.2,529=0.1,hang=0.05,html=0.01"`)
	listen := fs.String("listen", "127.0.0.1:9090", "address to listen on (loopback by default)")
	useTLS := fs.Bool("tls", false, "serve HTTPS with a self-signed certificate (written next to the log line, for an upstream's ca_file)")
	name := fs.String("name", "", `name in the answer text ("Hello from NAME.")`)
	seed := fs.Int64("seed", 1, "seed of the random faults (same seed, same sequence)")
	delay := fs.Duration("event-delay", 0, "pause between stream events")
	if help, err := parse(fs, args, stdout); help || err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError(fs, stderr, "unexpected argument %q", fs.Arg(0))
	}
	s := rewrite.Shape(*shape)
	if !s.Valid() {
		return usageError(fs, stderr, "--shape must be openai, anthropic or gemini; got %q", *shape)
	}
	wf, err := fakevendor.ParseFaults(*faults)
	if err != nil {
		return usageError(fs, stderr, "--faults: %v", err)
	}
	v := fakevendor.New(s, fakevendor.Options{Name: *name, EventDelay: *delay})
	v.SetRandomFaults(wf, *seed)

	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w (choose another with --listen)", *listen, err)
	}
	scheme, caFile := "http", ""
	srv := &http.Server{Handler: v, ReadHeaderTimeout: 30 * time.Second}
	if *useTLS {
		// A throwaway CA of its own signs a leaf for whatever name or
		// address the client dials (127.0.0.1, a container's address, a
		// DNS name); writing the CA out lets a policy trust it through
		// ca_file.
		ca, err := mitm.Generate()
		if err != nil {
			return err
		}
		signer, err := mitm.NewSigner(ca, 0)
		if err != nil {
			return err
		}
		certFile := fmt.Sprintf("%s/detour-fake-vendor-%d.pem", os.TempDir(), ln.Addr().(*net.TCPAddr).Port)
		if err := os.WriteFile(certFile, ca.CertPEM, 0o644); err != nil {
			return err
		}
		// The certificate is good only while this vendor runs.
		defer os.Remove(certFile)
		srv.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
			host := hello.ServerName
			if host == "" {
				// No SNI: the client dialled an address.
				host, _, _ = net.SplitHostPort(hello.Conn.LocalAddr().String())
			}
			return signer.Certificate(host)
		}}
		ln = tls.NewListener(ln, srv.TLSConfig)
		scheme, caFile = "https", certFile
		fmt.Fprintf(stdout, "certificate: %s (the upstream's ca_file; removed when this vendor stops)\n", certFile)
	}
	base := scheme + "://" + ln.Addr().String()
	if s == rewrite.OpenAI {
		base += "/v1"
	}
	fmt.Fprintf(stdout, "fake %s vendor on %s; faults: %q (seed %d)\n", s, base, *faults, *seed)
	// The upstream as a policy takes it: with --tls, detour must trust the
	// self-signed certificate, which only ca_file makes it do.
	upstream, err := json.Marshal(struct {
		Shape   rewrite.Shape   `json:"shape"`
		BaseURL string          `json:"base_url"`
		CAFile  string          `json:"ca_file,omitempty"`
		Auth    map[string]bool `json:"auth"`
	}{s, base, caFile, map[string]bool{"none": true}})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "policy upstream: %s\n", upstream)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	fmt.Fprintf(stdout, "served %d requests\n", v.Calls())
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
