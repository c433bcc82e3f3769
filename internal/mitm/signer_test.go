package mitm

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

func newTestSigner(t testing.TB, ca *CA, cacheSize int) *Signer {
	t.Helper()
	s, err := NewSigner(ca, cacheSize)
	if err != nil {
		t.Fatalf("NewSigner: %v", err)
	}
	return s
}

func caPool(ca *CA) *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	return pool
}

// verifyLeaf checks cert verifies for name against a pool holding only ca.
func verifyLeaf(t *testing.T, ca *CA, cert *tls.Certificate, name string) {
	t.Helper()
	if _, err := cert.Leaf.Verify(x509.VerifyOptions{
		Roots:     caPool(ca),
		DNSName:   name,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}); err != nil {
		t.Errorf("leaf does not verify for %q: %v", name, err)
	}
}

// fakeClock is a settable clock for Signer.now.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) set(t time.Time) { c.mu.Lock(); defer c.mu.Unlock(); c.t = t }

func TestLeafVerifiesOnlyForItsHost(t *testing.T) {
	ca := newTestCA(t)
	s := newTestSigner(t, ca, 0)
	tests := []struct {
		host       string
		verifyAs   string
		wantDNS    []string
		wantIP     string
		otherNames []string
	}{
		{"api.example.test", "api.example.test", []string{"api.example.test"}, "", []string{"other.example.test", "example.test"}},
		{"API.Example.TEST.:443", "api.example.test", []string{"api.example.test"}, "", []string{"evil.test"}},
		{"10.1.2.3:443", "10.1.2.3", nil, "10.1.2.3", []string{"10.1.2.4", "api.example.test"}},
		{"[2001:db8::1]:443", "2001:db8::1", nil, "2001:db8::1", []string{"2001:db8::2"}},
	}
	for _, tt := range tests {
		t.Run(tt.host, func(t *testing.T) {
			cert, err := s.Certificate(tt.host)
			if err != nil {
				t.Fatalf("Certificate: %v", err)
			}
			verifyLeaf(t, ca, cert, tt.verifyAs)
			if fmt.Sprint(cert.Leaf.DNSNames) != fmt.Sprint(tt.wantDNS) {
				t.Errorf("DNSNames = %q; want %q", cert.Leaf.DNSNames, tt.wantDNS)
			}
			if tt.wantIP != "" && (len(cert.Leaf.IPAddresses) != 1 || !cert.Leaf.IPAddresses[0].Equal(net.ParseIP(tt.wantIP))) {
				t.Errorf("IPAddresses = %v; want [%s]", cert.Leaf.IPAddresses, tt.wantIP)
			}
			for _, other := range tt.otherNames {
				if _, err := cert.Leaf.Verify(x509.VerifyOptions{Roots: caPool(ca), DNSName: other}); err == nil {
					t.Errorf("leaf for %q verifies for %q", tt.host, other)
				}
			}
			if len(cert.Certificate) != 2 || string(cert.Certificate[1]) != string(ca.Cert.Raw) {
				t.Errorf("chain has %d certificates; want [leaf, CA]", len(cert.Certificate))
			}
		})
	}

	// And not against a pool holding a different CA.
	cert, err := s.Certificate("api.example.test")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cert.Leaf.Verify(x509.VerifyOptions{Roots: caPool(newTestCA(t)), DNSName: "api.example.test"}); err == nil {
		t.Error("leaf verifies against another CA")
	}
}

func TestLeafIsP256ECDSASHA256ServerCert(t *testing.T) {
	ca := newTestCA(t)
	s := newTestSigner(t, ca, 0)
	clock := &fakeClock{t: time.Now().Truncate(time.Second)}
	s.now = clock.now
	cert, err := s.Certificate("api.example.test")
	if err != nil {
		t.Fatal(err)
	}
	leaf := cert.Leaf
	if leaf.SignatureAlgorithm != x509.ECDSAWithSHA256 {
		t.Errorf("SignatureAlgorithm = %v; want ECDSA-SHA256", leaf.SignatureAlgorithm)
	}
	if pub, ok := leaf.PublicKey.(*ecdsa.PublicKey); !ok || pub.Curve != elliptic.P256() {
		t.Errorf("leaf public key %T; want ECDSA P-256", leaf.PublicKey)
	}
	if priv, ok := cert.PrivateKey.(*ecdsa.PrivateKey); !ok || !priv.PublicKey.Equal(leaf.PublicKey) {
		t.Error("PrivateKey is not the leaf's ECDSA key")
	}
	if leaf.IsCA {
		t.Error("leaf is a CA")
	}
	if len(leaf.ExtKeyUsage) != 1 || leaf.ExtKeyUsage[0] != x509.ExtKeyUsageServerAuth {
		t.Errorf("ExtKeyUsage = %v; want [ServerAuth]", leaf.ExtKeyUsage)
	}
	if want := clock.now().Add(-time.Hour); !leaf.NotBefore.Equal(want) {
		t.Errorf("NotBefore = %v; want %v", leaf.NotBefore, want)
	}
	if want := clock.now().Add(LeafValidity); !leaf.NotAfter.Equal(want) {
		t.Errorf("NotAfter = %v; want %v", leaf.NotAfter, want)
	}
	if string(leaf.AuthorityKeyId) != string(ca.Cert.SubjectKeyId) {
		t.Error("leaf AuthorityKeyId does not name the CA")
	}
	other, err := s.Certificate("other.example.test")
	if err != nil {
		t.Fatal(err)
	}
	if other.Leaf.SerialNumber.Cmp(leaf.SerialNumber) == 0 {
		t.Error("two leaves share a serial")
	}
}

func TestLeafValidityIsCappedAtCAExpiry(t *testing.T) {
	ca := newTestCA(t)
	s := newTestSigner(t, ca, 0)
	// Within the renewal window of the CA's own expiry: the leaf can last
	// only until the CA does, and re-signing cannot do better, so the
	// cached leaf keeps being served.
	clock := &fakeClock{t: ca.Cert.NotAfter.Add(-30 * time.Minute)}
	s.now = clock.now
	cert, err := s.Certificate("api.example.test")
	if err != nil {
		t.Fatal(err)
	}
	if !cert.Leaf.NotAfter.Equal(ca.Cert.NotAfter) {
		t.Errorf("leaf NotAfter = %v; want CA NotAfter %v", cert.Leaf.NotAfter, ca.Cert.NotAfter)
	}
	if _, err := s.Certificate("api.example.test"); err != nil {
		t.Fatal(err)
	}
	if got := s.Stats().Signed; got != 1 {
		t.Errorf("Signed = %d; want 1 (capped leaf served from cache)", got)
	}

	clock.set(ca.Cert.NotAfter.Add(time.Second))
	if _, err := s.Certificate("api.example.test"); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Errorf("err = %v; want CA expired", err)
	}
}

func TestCertificateNormalisesHostForCache(t *testing.T) {
	s := newTestSigner(t, newTestCA(t), 0)
	for _, h := range []string{"API.example.test:443", "api.example.test", "api.example.test.", "Api.Example.Test:8443"} {
		if _, err := s.Certificate(h); err != nil {
			t.Fatalf("Certificate(%q): %v", h, err)
		}
	}
	if got, want := s.Stats(), (Stats{Hits: 3, Misses: 1, Signed: 1}); got != want {
		t.Errorf("Stats = %+v; want %+v", got, want)
	}
}

func TestNormalizeHost(t *testing.T) {
	tests := []struct {
		in, want string
		wantIP   bool
		wantErr  bool
	}{
		{in: "api.openai.com", want: "api.openai.com"},
		{in: "API.OpenAI.com:443", want: "api.openai.com"},
		{in: "api.openai.com.", want: "api.openai.com"},
		{in: "1password.com", want: "1password.com"},
		{in: "_service.example.test", want: "_service.example.test"},
		{in: "localhost", want: "localhost"},
		{in: "10.0.0.1", want: "10.0.0.1", wantIP: true},
		{in: "10.0.0.1:8443", want: "10.0.0.1", wantIP: true},
		{in: "::1", want: "::1", wantIP: true},
		{in: "[::1]", want: "::1", wantIP: true},
		{in: "[::1]:443", want: "::1", wantIP: true},
		{in: "2001:DB8::1", want: "2001:db8::1", wantIP: true},
		{in: "::ffff:10.0.0.1", want: "10.0.0.1", wantIP: true},
		{in: "fe80::1%eth0", want: "fe80::1", wantIP: true},
		{in: "", wantErr: true},
		{in: ":443", wantErr: true},
		{in: ".", wantErr: true},
		{in: "a..b", wantErr: true},
		{in: "*.example.test", wantErr: true},
		{in: "exa mple.test", wantErr: true},
		{in: "ünicode.test", wantErr: true},
		{in: "bad:host:name", wantErr: true},
		{in: "[::1", wantErr: true},
		{in: strings.Repeat("a", 64) + ".test", wantErr: true},
	}
	for _, tt := range tests {
		got, ip, err := normalizeHost(tt.in)
		if (err != nil) != tt.wantErr {
			t.Errorf("normalizeHost(%q) err = %v; want error %v", tt.in, err, tt.wantErr)
			continue
		}
		if got != tt.want || ip.IsValid() != tt.wantIP {
			t.Errorf("normalizeHost(%q) = %q, IP %v; want %q, IP %v", tt.in, got, ip.IsValid(), tt.want, tt.wantIP)
		}
	}
}

func TestConcurrentFirstRequestsSignOnce(t *testing.T) {
	s := newTestSigner(t, newTestCA(t), 0)
	const n = 100
	var (
		start = make(chan struct{})
		wg    sync.WaitGroup
		certs = make([]*tls.Certificate, n)
		errs  = make([]error, n)
	)
	for i := range n {
		wg.Go(func() {
			<-start
			certs[i], errs[i] = s.Certificate("api.example.test:443")
		})
	}
	close(start)
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("goroutine %d: %v", i, errs[i])
		}
		if certs[i] != certs[0] {
			t.Fatalf("goroutine %d got a different certificate", i)
		}
	}
	st := s.Stats()
	if st.Signed != 1 {
		t.Errorf("Signed = %d; want 1", st.Signed)
	}
	if st.Hits+st.Misses != n {
		t.Errorf("Hits+Misses = %d; want %d", st.Hits+st.Misses, n)
	}
}

func TestCacheEvictsLeastRecentlyUsed(t *testing.T) {
	s := newTestSigner(t, newTestCA(t), 2)
	ask := func(host string) {
		t.Helper()
		if _, err := s.Certificate(host); err != nil {
			t.Fatal(err)
		}
	}
	ask("a.test")
	ask("b.test")
	ask("c.test") // evicts a.test
	ask("b.test")
	ask("c.test")
	if got := s.Stats().Signed; got != 3 {
		t.Fatalf("Signed = %d after a, b, c, b, c; want 3", got)
	}
	ask("a.test")
	if got := s.Stats().Signed; got != 4 {
		t.Errorf("Signed = %d after asking for evicted a.test; want 4", got)
	}
}

func TestNearlyExpiredLeafIsResigned(t *testing.T) {
	s := newTestSigner(t, newTestCA(t), 0)
	t0 := time.Now()
	clock := &fakeClock{t: t0}
	s.now = clock.now

	first, err := s.Certificate("api.example.test")
	if err != nil {
		t.Fatal(err)
	}
	clock.set(t0.Add(LeafValidity - 2*time.Hour))
	second, err := s.Certificate("api.example.test")
	if err != nil {
		t.Fatal(err)
	}
	if second != first || s.Stats().Signed != 1 {
		t.Fatalf("leaf 2h from expiry was replaced; want it served from cache")
	}
	clock.set(t0.Add(LeafValidity - 30*time.Minute))
	third, err := s.Certificate("api.example.test")
	if err != nil {
		t.Fatal(err)
	}
	if third == first || s.Stats().Signed != 2 {
		t.Fatalf("leaf 30m from expiry was served again (Signed = %d); want it re-signed", s.Stats().Signed)
	}
	if !third.Leaf.NotAfter.After(first.Leaf.NotAfter) {
		t.Errorf("re-signed leaf expires %v, not after the old %v", third.Leaf.NotAfter, first.Leaf.NotAfter)
	}
	// The fresh leaf is cached in place of the old one.
	if fourth, _ := s.Certificate("api.example.test"); fourth != third {
		t.Error("re-signed leaf was not cached")
	}
}

func TestInjectedValidityIsUsed(t *testing.T) {
	s := newTestSigner(t, newTestCA(t), 0)
	s.leafValidity = 30 * time.Minute // shorter than the renewal window
	for range 3 {
		if _, err := s.Certificate("api.example.test"); err != nil {
			t.Fatal(err)
		}
	}
	if got := s.Stats().Signed; got != 3 {
		t.Errorf("Signed = %d; want 3 (a leaf inside the renewal window is never served)", got)
	}
}

func TestTLSHandshakeThroughHTTPTestServer(t *testing.T) {
	ca := newTestCA(t)
	s := newTestSigner(t, ca, 0)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s %s", r.Proto, r.TLS.NegotiatedProtocol)
	}))
	srv.TLS = s.TLSConfig("example.test")
	// The untrusting client below makes the server log a handshake error.
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	defer srv.Close()

	get := func(roots *x509.CertPool) (*http.Response, error) {
		tr := &http.Transport{
			TLSClientConfig:   &tls.Config{RootCAs: roots, ServerName: "example.test"},
			ForceAttemptHTTP2: true, // offer h2 and http/1.1: the leaf's ALPN prefers h2
		}
		defer tr.CloseIdleConnections()
		return (&http.Client{Transport: tr}).Get(srv.URL)
	}

	resp, err := get(caPool(ca))
	if err != nil {
		t.Fatalf("GET with only detour's CA trusted: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if got, want := string(body), "HTTP/2.0 h2"; got != want {
		t.Errorf("served %q; want %q", got, want)
	}
	if peer := resp.TLS.PeerCertificates[0]; peer.Issuer.String() != ca.Cert.Subject.String() ||
		len(peer.DNSNames) != 1 || peer.DNSNames[0] != "example.test" {
		t.Errorf("served leaf issuer %q DNS %q; want detour's leaf for example.test", peer.Issuer, peer.DNSNames)
	}

	if resp, err := get(caPool(newTestCA(t))); err == nil {
		resp.Body.Close()
		t.Error("GET succeeded for a client trusting another CA")
	}
}

// handshake runs a TLS handshake over a pipe between s.TLSConfig(connectHost)
// and a client using cfg.
func handshake(t *testing.T, s *Signer, connectHost string, cfg *tls.Config) (tls.ConnectionState, error) {
	t.Helper()
	sc, cc := net.Pipe()
	defer sc.Close()
	defer cc.Close()
	server := tls.Server(sc, s.TLSConfig(connectHost))
	serverErr := make(chan error, 1)
	go func() { serverErr <- server.Handshake() }()
	client := tls.Client(cc, cfg)
	err := client.Handshake()
	if err != nil {
		cc.Close() // unblock the server
	}
	<-serverErr
	return client.ConnectionState(), err
}

func TestTLSConfigFallsBackToConnectHostWithoutSNI(t *testing.T) {
	ca := newTestCA(t)
	s := newTestSigner(t, ca, 0)
	// Go clients send no SNI for an IP ServerName, as with any client
	// connecting to an IP: the leaf must then be for the CONNECT target.
	state, err := handshake(t, s, "192.0.2.7:443", &tls.Config{
		RootCAs:    caPool(ca),
		ServerName: "192.0.2.7",
		NextProtos: []string{"h2", "http/1.1"},
	})
	if err != nil {
		t.Fatalf("handshake: %v", err)
	}
	if ips := state.PeerCertificates[0].IPAddresses; len(ips) != 1 || !ips[0].Equal(net.ParseIP("192.0.2.7")) {
		t.Errorf("leaf IPs = %v; want [192.0.2.7]", ips)
	}
	if state.NegotiatedProtocol != "h2" {
		t.Errorf("ALPN = %q; want h2", state.NegotiatedProtocol)
	}
}

// The leaf offers h2 and http/1.1, preferring h2 as the vendors' servers
// do: a client that speaks only one of them gets that one, never an alert,
// and a client that names none gets no ALPN (and speaks HTTP/1.1).
func TestTLSConfigOffersH2AndHTTP1(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t)
	s := newTestSigner(t, ca, 0)
	for _, tc := range []struct {
		offer []string
		want  string
	}{
		{[]string{"h2"}, "h2"},
		{[]string{"http/1.1"}, "http/1.1"},
		{[]string{"http/1.1", "h2"}, "h2"},
		{[]string{"h2", "http/1.1"}, "h2"},
		{nil, ""},
	} {
		state, err := handshake(t, s, "example.test", &tls.Config{RootCAs: caPool(ca), ServerName: "example.test", NextProtos: tc.offer})
		if err != nil {
			t.Errorf("client offering %q: handshake: %v", tc.offer, err)
			continue
		}
		if state.NegotiatedProtocol != tc.want {
			t.Errorf("client offering %q: ALPN = %q; want %q", tc.offer, state.NegotiatedProtocol, tc.want)
		}
	}
}

func TestTLSConfigRefusesOldTLS(t *testing.T) {
	ca := newTestCA(t)
	s := newTestSigner(t, ca, 0)
	_, err := handshake(t, s, "example.test", &tls.Config{
		RootCAs:    caPool(ca),
		ServerName: "example.test",
		MinVersion: tls.VersionTLS10, // else the client alone refuses
		MaxVersion: tls.VersionTLS11,
	})
	if err == nil {
		t.Error("TLS 1.1 handshake succeeded; want MinVersion TLS 1.2")
	}
}

func TestNewSignerRejectsBadCA(t *testing.T) {
	a, b := newTestCA(t), newTestCA(t)
	if _, err := NewSigner(nil, 0); err == nil {
		t.Error("NewSigner(nil) succeeded")
	}
	if _, err := NewSigner(&CA{Cert: a.Cert, Key: b.Key}, 0); err == nil {
		t.Error("NewSigner with a mismatched key succeeded")
	}
}

func TestCertificateRejectsInvalidHost(t *testing.T) {
	s := newTestSigner(t, newTestCA(t), 0)
	if _, err := s.Certificate("*.example.test"); err == nil {
		t.Error("Certificate(*.example.test) succeeded")
	}
	if got := s.Stats(); got != (Stats{}) {
		t.Errorf("Stats = %+v after invalid host; want zero", got)
	}
}

func BenchmarkSignLeaf(b *testing.B) {
	s := newTestSigner(b, newTestCA(b), 0)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := s.Certificate(fmt.Sprintf("h%d.example.test", i)); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

func BenchmarkCachedLeaf(b *testing.B) {
	s := newTestSigner(b, newTestCA(b), 0)
	const host = "api.example.test:443"
	if _, err := s.Certificate(host); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Certificate(host); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCachedLeafParallel(b *testing.B) {
	s := newTestSigner(b, newTestCA(b), 0)
	const host = "api.example.test:443"
	if _, err := s.Certificate(host); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := s.Certificate(host); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// TestTLSConfigSignsOnlyTheConnectHost: a ClientHello naming another server
// than the intercepted host fails the handshake and mints nothing, however
// many names a client tries; the CONNECT host's own name, in any case or
// with a trailing dot, gets its leaf.
func TestTLSConfigSignsOnlyTheConnectHost(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t)
	s := newTestSigner(t, ca, 0)
	for i := 0; i < 50; i++ {
		name := fmt.Sprintf("n%d.attacker.example", i)
		_, err := handshake(t, s, "api.openai.com:443", &tls.Config{RootCAs: caPool(ca), ServerName: name})
		if err == nil {
			t.Fatalf("handshake with SNI %s for CONNECT api.openai.com succeeded", name)
		}
	}
	if st := s.Stats(); st.Signed != 0 || st.Misses != 0 || st.Hits != 0 {
		t.Errorf("after 50 foreign SNIs: %+v; want nothing signed or even looked up", st)
	}
	for _, sni := range []string{"api.openai.com", "API.OpenAI.com", "api.openai.com."} {
		state, err := handshake(t, s, "api.openai.com:443", &tls.Config{RootCAs: caPool(ca), ServerName: sni})
		if err != nil {
			t.Fatalf("SNI %q: %v", sni, err)
		}
		if got := state.PeerCertificates[0].DNSNames; len(got) != 1 || got[0] != "api.openai.com" {
			t.Errorf("SNI %q: leaf for %v", sni, got)
		}
	}
	if got := s.Stats().Signed; got != 1 {
		t.Errorf("Signed = %d; want 1 (one leaf for the CONNECT host)", got)
	}
}

func TestTLSConfigMismatchIsErrSNIMismatch(t *testing.T) {
	ca := newTestCA(t)
	s := newTestSigner(t, ca, 0)
	_, err := s.TLSConfig("api.openai.com").GetCertificate(&tls.ClientHelloInfo{ServerName: "other.example"})
	if !errors.Is(err, ErrSNIMismatch) || !strings.Contains(err.Error(), `"other.example"`) {
		t.Errorf("error %v; want ErrSNIMismatch naming the server name", err)
	}
}
