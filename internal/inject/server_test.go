package inject

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	admissionv1 "k8s.io/api/admission/v1"

	"github.com/detour-proxy/detour/internal/testsupport"
)

// writeServingCert writes a self-signed certificate for 127.0.0.1 with the
// given serial and returns it parsed.
func writeServingCert(t *testing.T, certFile, keyFile string, serial int64) *x509.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(serial),
		Subject:               pkix.Name{CommonName: "detour-injector.detour.svc"},
		DNSNames:              []string{"detour-injector.detour.svc"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		BasicConstraintsValid: true,
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	// Like the kubelet's Secret update: new files, then an atomic rename.
	for _, f := range []struct {
		path, typ string
		der       []byte
	}{{certFile, "CERTIFICATE", der}, {keyFile, "EC PRIVATE KEY", keyDER}} {
		tmp := f.path + ".tmp"
		if err := os.WriteFile(tmp, pem.EncodeToMemory(&pem.Block{Type: f.typ, Bytes: f.der}), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, f.path); err != nil {
			t.Fatal(err)
		}
	}
	cert, _ := x509.ParseCertificate(der)
	return cert
}

// TestServeTLS: the webhook answers over TLS with the given certificate,
// serves /healthz for the kubelet, picks up a renewed certificate without a
// restart, and stops cleanly.
func TestServeTLS(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	first := writeServingCert(t, certFile, keyFile, 1)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var logBuf testsupport.SyncBuffer
	done := make(chan error, 1)
	go func() {
		done <- Serve(ctx, ServeOptions{
			CertFile: certFile, KeyFile: keyFile, Config: testConfig, Listener: ln,
			Log: zerolog.New(&logBuf), CertCheckInterval: time.Millisecond,
		})
	}()
	base := "https://" + ln.Addr().String()

	client := func(root *x509.Certificate) *http.Client {
		pool := x509.NewCertPool()
		pool.AddCert(root)
		return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
			TLSClientConfig:   &tls.Config{RootCAs: pool},
			DisableKeepAlives: true,
		}}
	}
	var resp *http.Response
	testsupport.Poll(5*time.Second, func() bool {
		resp, err = client(first).Get(base + "/healthz")
		return err == nil
	})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != "ok\n" {
		t.Fatalf("/healthz: %d %q", resp.StatusCode, body)
	}

	review, _ := os.ReadFile("testdata/labelled.json")
	resp, err = client(first).Post(base+"/inject", "application/json", bytes.NewReader(review))
	if err != nil {
		t.Fatal(err)
	}
	var ar admissionv1.AdmissionReview
	err = json.NewDecoder(resp.Body).Decode(&ar)
	resp.Body.Close()
	if err != nil || ar.Response == nil || !ar.Response.Allowed || len(ar.Response.Patch) == 0 {
		t.Fatalf("POST /inject over TLS: %v %+v", err, ar.Response)
	}
	if !strings.Contains(logBuf.String(), `"decision":"injected"`) {
		t.Errorf("no log line for the review: %s", logBuf.String())
	}

	// A renewed certificate (cert-manager, a Secret update) is served
	// without a restart.
	before, err := os.Stat(certFile)
	if err != nil {
		t.Fatal(err)
	}
	second := writeServingCert(t, certFile, keyFile, 2)
	// A new modification time even on a file system whose clock is coarse
	// (the reloader compares size and mtime), without waiting for it to tick.
	later := before.ModTime().Add(time.Second)
	for _, f := range []string{certFile, keyFile} {
		if err := os.Chtimes(f, later, later); err != nil {
			t.Fatal(err)
		}
	}
	var served *big.Int
	testsupport.Poll(5*time.Second, func() bool {
		conn, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{InsecureSkipVerify: true})
		if err != nil {
			t.Fatal(err)
		}
		served = conn.ConnectionState().PeerCertificates[0].SerialNumber
		conn.Close()
		return served.Cmp(second.SerialNumber) == 0
	})
	if served.Cmp(second.SerialNumber) != 0 {
		t.Fatalf("still serving serial %v after the certificate files changed", served)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve returned %v after cancel; want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not stop")
	}
}

func TestServeRefusesMissingCertificate(t *testing.T) {
	err := Serve(context.Background(), ServeOptions{CertFile: "/nonexistent/tls.crt", KeyFile: "/nonexistent/tls.key"})
	if err == nil || !strings.Contains(err.Error(), "webhook TLS certificate") {
		t.Fatalf("err %v; want a certificate error", err)
	}
	err = Serve(context.Background(), ServeOptions{Config: Config{AdminPort: 8787}, CertFile: "x", KeyFile: "y"})
	if err == nil || !strings.Contains(err.Error(), "injector config") {
		t.Fatalf("err %v; want a config error", err)
	}
}
