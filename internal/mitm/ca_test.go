package mitm

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// newTestCA generates a CA, failing the test on error.
func newTestCA(t testing.TB) *CA {
	t.Helper()
	ca, err := Generate()
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	return ca
}

// makeCert self-signs a certificate with key after mutate edits a CA template.
func makeCert(t testing.TB, key crypto.Signer, mutate func(*x509.Certificate)) *x509.Certificate {
	t.Helper()
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(42),
		Subject:               pkix.Name{CommonName: "test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().AddDate(1, 0, 0),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	if mutate != nil {
		mutate(tmpl)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatalf("CreateCertificate: %v", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("ParseCertificate: %v", err)
	}
	return cert
}

func pemBytes(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

func pkcs8PEM(t testing.TB, key crypto.Signer) []byte {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatalf("MarshalPKCS8PrivateKey: %v", err)
	}
	return pemBytes("PRIVATE KEY", der)
}

// writePair writes certPEM and keyPEM (mode 0600) into dir and returns the paths.
func writePair(t testing.TB, dir string, certPEM, keyPEM []byte) (certFile, keyFile string) {
	t.Helper()
	certFile = filepath.Join(dir, "ca.pem")
	keyFile = filepath.Join(dir, "ca-key.pem")
	if err := os.WriteFile(certFile, certPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

func TestGenerateMakesLeafOnlyP256CA(t *testing.T) {
	before := time.Now()
	ca := newTestCA(t)
	c := ca.Cert

	if !c.IsCA || !c.BasicConstraintsValid {
		t.Errorf("IsCA=%v BasicConstraintsValid=%v; want both true", c.IsCA, c.BasicConstraintsValid)
	}
	if c.MaxPathLen != 0 || !c.MaxPathLenZero {
		t.Errorf("MaxPathLen=%d MaxPathLenZero=%v; want 0, true", c.MaxPathLen, c.MaxPathLenZero)
	}
	wantUsage := x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature
	if c.KeyUsage != wantUsage {
		t.Errorf("KeyUsage = %v; want %v", c.KeyUsage, wantUsage)
	}
	if len(c.PermittedDNSDomains) != 0 || len(c.ExcludedDNSDomains) != 0 {
		t.Errorf("name constraints set: %v / %v", c.PermittedDNSDomains, c.ExcludedDNSDomains)
	}
	if !strings.HasPrefix(c.Subject.CommonName, caCommonName+" ") {
		t.Errorf("CN = %q; want prefix %q", c.Subject.CommonName, caCommonName+" ")
	}
	pub, ok := c.PublicKey.(*ecdsa.PublicKey)
	if !ok || pub.Curve != elliptic.P256() {
		t.Errorf("public key %T; want ECDSA P-256", c.PublicKey)
	}
	if c.SerialNumber.Sign() <= 0 || c.SerialNumber.BitLen() > 128 {
		t.Errorf("serial %v; want positive, at most 128 bits", c.SerialNumber)
	}
	if d := before.Add(-clockSkew).Sub(c.NotBefore); d < -time.Minute || d > time.Minute {
		t.Errorf("NotBefore %v; want about now-1h", c.NotBefore)
	}
	if want := c.NotBefore.AddDate(10, 0, 0); !c.NotAfter.Equal(want.Truncate(time.Second)) {
		t.Errorf("NotAfter %v; want %v", c.NotAfter, want)
	}
	if len(c.SubjectKeyId) == 0 {
		t.Error("SubjectKeyId empty; leaves would get no AuthorityKeyId")
	}
	if err := c.CheckSignatureFrom(c); err != nil {
		t.Errorf("CA is not self-signed: %v", err)
	}
	block, _ := pem.Decode(ca.CertPEM)
	if block == nil || block.Type != "CERTIFICATE" || string(block.Bytes) != string(c.Raw) {
		t.Error("CertPEM does not hold the CA certificate")
	}

	other := newTestCA(t)
	if other.Cert.Subject.CommonName == c.Subject.CommonName {
		t.Errorf("two CAs share CN %q; installs must differ", c.Subject.CommonName)
	}
	if other.Cert.SerialNumber.Cmp(c.SerialNumber) == 0 {
		t.Error("two CAs share a serial")
	}
}

func TestLoadOrCreateWritesPrivateFiles(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "a", "b")
	certFile, keyFile := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca-key.pem")

	ca, created, warnings, err := LoadOrCreate(certFile, keyFile)
	if err != nil {
		t.Fatalf("LoadOrCreate: %v", err)
	}
	if !created || len(warnings) != 0 {
		t.Errorf("created=%v warnings=%q; want true, none", created, warnings)
	}
	if ca == nil || ca.Cert == nil || ca.Key == nil {
		t.Fatal("LoadOrCreate returned an incomplete CA")
	}
	for path, want := range map[string]os.FileMode{
		keyFile:                  0o600,
		certFile:                 0o644,
		dir:                      0o700,
		filepath.Join(base, "a"): 0o700,
	} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != want {
			t.Errorf("%s mode %04o; want %04o", path, got, want)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2 {
		t.Errorf("directory holds %d entries; want only the cert and key (no temp files)", len(entries))
	}
}

func TestLoadOrCreateLeavesExistingDirModeAlone(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := LoadOrCreate(filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca-key.pem")); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != 0o755 {
		t.Errorf("existing dir mode changed to %04o; want 0755 kept", got)
	}
}

func TestLoadOrCreateLoadsSameCAAgain(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca-key.pem")
	first, _, _, err := LoadOrCreate(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	second, created, warnings, err := LoadOrCreate(certFile, keyFile)
	if err != nil {
		t.Fatalf("second LoadOrCreate: %v", err)
	}
	if created || len(warnings) != 0 {
		t.Errorf("created=%v warnings=%q; want false, none", created, warnings)
	}
	if !second.Cert.Equal(first.Cert) {
		t.Error("second load returned a different certificate")
	}
	if !publicKeysEqual(second.Key.Public(), first.Key.Public()) {
		t.Error("second load returned a different key")
	}
	if string(second.CertPEM) != string(first.CertPEM) {
		t.Error("CertPEM differs between create and load")
	}
}

func TestLoadOrCreateRefusesWhenOneFileIsMissing(t *testing.T) {
	for _, missing := range []string{"cert", "key"} {
		t.Run(missing, func(t *testing.T) {
			dir := t.TempDir()
			certFile, keyFile := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca-key.pem")
			if _, _, _, err := LoadOrCreate(certFile, keyFile); err != nil {
				t.Fatal(err)
			}
			gone := certFile
			if missing == "key" {
				gone = keyFile
			}
			if err := os.Remove(gone); err != nil {
				t.Fatal(err)
			}
			_, _, _, err := LoadOrCreate(certFile, keyFile)
			if err == nil {
				t.Fatal("LoadOrCreate succeeded with one file missing")
			}
			if !strings.Contains(err.Error(), gone) || !strings.Contains(err.Error(), "missing") {
				t.Errorf("error %q; want it to name missing file %s", err, gone)
			}
			if _, err := os.Stat(gone); err == nil {
				t.Errorf("%s was recreated", gone)
			}
		})
	}
}

func TestLoadOrCreateRejectsMismatchedKey(t *testing.T) {
	a, b := newTestCA(t), newTestCA(t)
	certFile, keyFile := writePair(t, t.TempDir(), a.CertPEM, pkcs8PEM(t, b.Key))
	_, _, _, err := LoadOrCreate(certFile, keyFile)
	if err == nil || !strings.Contains(err.Error(), "does not match") || !strings.Contains(err.Error(), keyFile) {
		t.Fatalf("err = %v; want a mismatch error naming %s", err, keyFile)
	}
}

func TestLoadOrCreateWarnsOnGroupReadableKey(t *testing.T) {
	ca := newTestCA(t)
	certFile, keyFile := writePair(t, t.TempDir(), ca.CertPEM, pkcs8PEM(t, ca.Key))
	if err := os.Chmod(keyFile, 0o640); err != nil {
		t.Fatal(err)
	}
	got, created, warnings, err := LoadOrCreate(certFile, keyFile)
	if err != nil {
		t.Fatalf("LoadOrCreate: %v", err)
	}
	if created || got == nil {
		t.Fatalf("created=%v ca=%v; want the existing CA loaded", created, got)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], keyFile) || !strings.Contains(warnings[0], "0640") {
		t.Errorf("warnings = %q; want one naming %s and mode 0640", warnings, keyFile)
	}
}

func TestLoadOrCreateAcceptsKeyFormats(t *testing.T) {
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ecDER, err := x509.MarshalECPrivateKey(ecKey)
	if err != nil {
		t.Fatal(err)
	}
	ecCert := pemBytes("CERTIFICATE", makeCert(t, ecKey, nil).Raw)
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	rsaCert := pemBytes("CERTIFICATE", makeCert(t, rsaKey, nil).Raw)
	// What `openssl ecparam -genkey -name prime256v1` writes.
	ecParams := pemBytes("EC PARAMETERS", []byte{0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07})

	tests := []struct {
		name          string
		cert, key     []byte
		wantRSASigned bool
	}{
		{"EC PRIVATE KEY", ecCert, pemBytes("EC PRIVATE KEY", ecDER), false},
		{"EC PARAMETERS then EC PRIVATE KEY", ecCert, append(ecParams, pemBytes("EC PRIVATE KEY", ecDER)...), false},
		{"PKCS#8 ECDSA", ecCert, pkcs8PEM(t, ecKey), false},
		{"PKCS#8 RSA", rsaCert, pkcs8PEM(t, rsaKey), true},
		{"PKCS#1 RSA", rsaCert, pemBytes("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(rsaKey)), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			certFile, keyFile := writePair(t, t.TempDir(), tt.cert, tt.key)
			ca, created, warnings, err := LoadOrCreate(certFile, keyFile)
			if err != nil {
				t.Fatalf("LoadOrCreate: %v", err)
			}
			if created || len(warnings) != 0 {
				t.Errorf("created=%v warnings=%q; want false, none", created, warnings)
			}
			// The loaded CA must be able to sign a verifiable leaf.
			s, err := NewSigner(ca, 0)
			if err != nil {
				t.Fatal(err)
			}
			cert, err := s.Certificate("api.example.test")
			if err != nil {
				t.Fatalf("Certificate: %v", err)
			}
			verifyLeaf(t, ca, cert, "api.example.test")
			if got := cert.Leaf.SignatureAlgorithm == x509.SHA256WithRSA; got != tt.wantRSASigned {
				t.Errorf("leaf signature algorithm %v", cert.Leaf.SignatureAlgorithm)
			}
		})
	}
}

func TestLoadOrCreateRejectsBadFiles(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM := pkcs8PEM(t, key)
	goodCert := pemBytes("CERTIFICATE", makeCert(t, key, nil).Raw)
	smallRSA, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name      string
		cert, key []byte
		badFile   string // "cert" or "key": the file the error must name
		want      string
	}{
		{"cert not PEM", []byte("hello"), keyPEM, "cert", "no PEM CERTIFICATE"},
		{"cert PEM of garbage", pemBytes("CERTIFICATE", []byte("junk")), keyPEM, "cert", "parsing certificate"},
		{"cert not a CA", pemBytes("CERTIFICATE", makeCert(t, key, func(c *x509.Certificate) {
			c.IsCA = false
			c.KeyUsage = x509.KeyUsageDigitalSignature
		}).Raw), keyPEM, "cert", "not a CA"},
		{"cert without keyCertSign", pemBytes("CERTIFICATE", makeCert(t, key, func(c *x509.Certificate) {
			c.KeyUsage = x509.KeyUsageDigitalSignature
		}).Raw), keyPEM, "cert", "keyCertSign"},
		{"cert expired", pemBytes("CERTIFICATE", makeCert(t, key, func(c *x509.Certificate) {
			c.NotBefore = time.Now().Add(-48 * time.Hour)
			c.NotAfter = time.Now().Add(-time.Hour)
		}).Raw), keyPEM, "cert", "expired"},
		{"cert not yet valid", pemBytes("CERTIFICATE", makeCert(t, key, func(c *x509.Certificate) {
			c.NotBefore = time.Now().Add(time.Hour)
		}).Raw), keyPEM, "cert", "not valid until"},
		{"key not PEM", goodCert, []byte("hello"), "key", "no PEM private key"},
		{"key PEM of garbage", goodCert, pemBytes("PRIVATE KEY", []byte("junk")), "key", "parsing PRIVATE KEY"},
		{"key encrypted", goodCert, pemBytes("ENCRYPTED PRIVATE KEY", []byte("junk")), "key", "encrypted"},
		{"key RSA too small", goodCert, pkcs8PEM(t, smallRSA), "key", "too small"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			certFile, keyFile := writePair(t, t.TempDir(), tt.cert, tt.key)
			_, _, _, err := LoadOrCreate(certFile, keyFile)
			if err == nil {
				t.Fatal("LoadOrCreate succeeded")
			}
			file := certFile
			if tt.badFile == "key" {
				file = keyFile
			}
			if !strings.Contains(err.Error(), file) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %q; want it to name %s and contain %q", err, file, tt.want)
			}
		})
	}
}

func TestLoadWarnsWhenCAExpiresSoon(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	cert := pemBytes("CERTIFICATE", makeCert(t, key, func(c *x509.Certificate) {
		c.NotAfter = time.Now().Add(10 * 24 * time.Hour)
	}).Raw)
	certFile, keyFile := writePair(t, t.TempDir(), cert, pkcs8PEM(t, key))
	_, _, warnings, err := LoadOrCreate(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "expires in") {
		t.Errorf("warnings = %q; want one about expiry", warnings)
	}
}
