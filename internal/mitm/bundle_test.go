package mitm

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// bundleCerts parses every CERTIFICATE block in data.
func bundleCerts(t *testing.T, data []byte) []*x509.Certificate {
	t.Helper()
	var certs []*x509.Certificate
	for rest := data; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			return certs
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatalf("bundle holds an unparsable certificate: %v", err)
		}
		certs = append(certs, c)
	}
}

// writeRoots writes a fake system bundle: two other CAs, a comment, a
// non-certificate block and a stale copy of ca, as an earlier detour bundle
// would hold.
func writeRoots(t *testing.T, ca *CA) (path string, others []*CA) {
	t.Helper()
	others = []*CA{newTestCA(t), newTestCA(t)}
	var b bytes.Buffer
	b.WriteString("# some distribution comment\n")
	b.Write(others[0].CertPEM)
	b.Write(pemBytes("X509 CRL", []byte("not a cert")))
	b.Write(ca.CertPEM)
	b.Write(others[1].CertPEM)
	path = filepath.Join(t.TempDir(), "roots.pem")
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path, others
}

func TestWriteBundleAppendsCAToSystemRoots(t *testing.T) {
	ca := newTestCA(t)
	roots, others := writeRoots(t, ca)
	t.Setenv("SSL_CERT_FILE", roots)

	var buf bytes.Buffer
	if err := WriteBundle(&buf, ca, true); err != nil {
		t.Fatalf("WriteBundle: %v", err)
	}
	certs := bundleCerts(t, buf.Bytes())
	if len(certs) != 3 {
		t.Fatalf("bundle has %d certificates; want 2 system roots + detour CA once", len(certs))
	}
	for i, want := range []*x509.Certificate{others[0].Cert, others[1].Cert, ca.Cert} {
		if !certs[i].Equal(want) {
			t.Errorf("certificate %d is %q; want %q", i, certs[i].Subject.CommonName, want.Subject.CommonName)
		}
	}
	if !strings.Contains(buf.String(), "# detour CA \""+ca.Cert.Subject.CommonName+"\"\n") {
		t.Error("bundle lacks the comment naming detour's CA")
	}

	// A pool built the way apps build it trusts detour's leaves.
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(buf.Bytes()) {
		t.Fatal("AppendCertsFromPEM found no certificates")
	}
	s := newTestSigner(t, ca, 0)
	leaf, err := s.Certificate("api.example.test")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := leaf.Leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "api.example.test"}); err != nil {
		t.Errorf("leaf does not verify against the bundle: %v", err)
	}
}

func TestWriteBundleUsesFirstExistingSystemPath(t *testing.T) {
	ca := newTestCA(t)
	roots, _ := writeRoots(t, ca)
	t.Setenv("SSL_CERT_FILE", "")
	saved := systemBundlePaths
	t.Cleanup(func() { systemBundlePaths = saved })

	systemBundlePaths = []string{filepath.Join(t.TempDir(), "missing.pem"), roots}
	var buf bytes.Buffer
	if err := WriteBundle(&buf, ca, true); err != nil {
		t.Fatalf("WriteBundle: %v", err)
	}
	if n := len(bundleCerts(t, buf.Bytes())); n != 3 {
		t.Errorf("bundle has %d certificates; want 3", n)
	}

	systemBundlePaths = []string{filepath.Join(t.TempDir(), "missing.pem")}
	if err := WriteBundle(&bytes.Buffer{}, ca, true); !errors.Is(err, ErrNoSystemRoots) {
		t.Errorf("err = %v; want ErrNoSystemRoots", err)
	}
}

func TestWriteBundleErrors(t *testing.T) {
	ca := newTestCA(t)
	missing := filepath.Join(t.TempDir(), "missing.pem")
	t.Setenv("SSL_CERT_FILE", missing)
	if err := WriteBundle(&bytes.Buffer{}, ca, true); err == nil || !strings.Contains(err.Error(), "SSL_CERT_FILE") {
		t.Errorf("err = %v; want an error about SSL_CERT_FILE", err)
	}

	empty := filepath.Join(t.TempDir(), "empty.pem")
	if err := os.WriteFile(empty, []byte("# nothing here\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SSL_CERT_FILE", empty)
	if err := WriteBundle(&bytes.Buffer{}, ca, true); err == nil || !strings.Contains(err.Error(), empty) {
		t.Errorf("err = %v; want an error naming %s", err, empty)
	}
}

func TestWriteBundleCAOnly(t *testing.T) {
	ca := newTestCA(t)
	// SSL_CERT_FILE must not matter when system roots are not wanted.
	t.Setenv("SSL_CERT_FILE", filepath.Join(t.TempDir(), "missing.pem"))
	var buf bytes.Buffer
	if err := WriteBundle(&buf, ca, false); err != nil {
		t.Fatalf("WriteBundle: %v", err)
	}
	certs := bundleCerts(t, buf.Bytes())
	if len(certs) != 1 || !certs[0].Equal(ca.Cert) {
		t.Errorf("bundle has %d certificates; want only detour's CA", len(certs))
	}
}

// TestWriteBundleRealSystemRoots runs against this machine's bundle when it
// has one, to catch a real distribution bundle we cannot parse.
func TestWriteBundleRealSystemRoots(t *testing.T) {
	t.Setenv("SSL_CERT_FILE", "")
	if _, _, err := readSystemRoots("", systemBundlePaths); errors.Is(err, ErrNoSystemRoots) {
		t.Skip("no system CA bundle on this machine")
	}
	ca := newTestCA(t)
	var buf bytes.Buffer
	if err := WriteBundle(&buf, ca, true); err != nil {
		t.Fatalf("WriteBundle: %v", err)
	}
	certs := bundleCerts(t, buf.Bytes())
	if len(certs) < 2 || !certs[len(certs)-1].Equal(ca.Cert) {
		t.Errorf("bundle has %d certificates; want system roots then detour's CA last", len(certs))
	}
}
