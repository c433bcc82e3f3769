package detourtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"
)

// LocalhostCert is a self-signed ECDSA P-256 certificate for the names
// httptest's built-in one is for (127.0.0.1, ::1, example.com and
// *.example.com), made once per test binary. httptest's certificate has an
// RSA-2048 key: under -race every TLS handshake with it spends some 5 ms of
// CPU on the server's RSA signature, and the tests' fake vendors make
// hundreds of handshakes; a P-256 signature costs a small fraction of that.
// What a client checks is the same: a certificate it must be given
// (ca_file, a root pool) to trust.
var LocalhostCert = sync.OnceValue(func() tls.Certificate {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		panic(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{Organization: []string{"detour test vendor"}},
		// httptest's validity, so that a test on a virtual clock far from
		// today still trusts it.
		NotBefore:             time.Unix(0, 0),
		NotAfter:              time.Date(2084, time.January, 29, 16, 0, 0, 0, time.UTC),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		DNSNames:              []string{"example.com", "*.example.com"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		panic(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		panic(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}
})

// StartTLS starts srv over TLS as srv.StartTLS does, with LocalhostCert
// instead of httptest's certificate and X25519 key exchange (testCurves)
// unless srv.TLS asks for others; srv.Certificate and srv.Client work as
// usual.
func StartTLS(srv *httptest.Server) {
	if srv.TLS == nil {
		srv.TLS = &tls.Config{}
	}
	srv.TLS.Certificates = []tls.Certificate{LocalhostCert()}
	if srv.TLS.CurvePreferences == nil {
		srv.TLS.CurvePreferences = testCurves
	}
	srv.StartTLS()
}

// NewTLSServer is httptest.NewTLSServer with LocalhostCert.
func NewTLSServer(h http.Handler) *httptest.Server {
	srv := httptest.NewUnstartedServer(h)
	StartTLS(srv)
	return srv
}
