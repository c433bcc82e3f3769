package mitm

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
)

const (
	// DefaultCacheSize is the number of leaf certificates a Signer keeps when
	// NewSigner is given a cacheSize of zero or less. detour intercepts a
	// handful of vendor hosts, so this is far more than needed; it bounds
	// memory when clients send many distinct SNI names.
	DefaultCacheSize = 1024

	// LeafValidity is how long a leaf certificate is valid (before being
	// capped at the CA's expiry). Leaves are cached in memory only, so a
	// short life costs one signature a week per host and limits how long a
	// leaked leaf key is useful.
	LeafValidity = 7 * 24 * time.Hour

	// leafRenewBefore is how close to expiry a cached leaf is replaced, so a
	// long-lived connection or a slow client clock never sees it expire.
	leafRenewBefore = time.Hour
)

// Stats counts Signer activity since NewSigner. Hits+Misses is the number of
// Certificate calls that got past host validation.
type Stats struct {
	// Hits is the number of requests served from the cache.
	Hits uint64
	// Misses is the number of requests that found no usable cached leaf,
	// including those that waited for another caller's signing.
	Misses uint64
	// Signed is the number of leaf certificates signed.
	Signed uint64
}

// Signer signs leaf certificates for intercepted hosts with a CA and caches
// them. It is safe for concurrent use.
type Signer struct {
	ca    *CA
	cache *lru.Cache[string, *tls.Certificate]

	// mu guards inflight, the per-host signings in progress, so concurrent
	// first requests for one host sign once and share the result. This is a
	// small single-flight of our own: goproxy's example cache has neither
	// this nor expiry (goproxy PR #387).
	mu       sync.Mutex
	inflight map[string]*signing

	// now and leafValidity are fields so tests can move the clock and
	// shorten leaf lives; NewSigner sets them to time.Now and LeafValidity.
	now          func() time.Time
	leafValidity time.Duration

	hits, misses, signed atomic.Uint64
}

// signing is one in-progress leaf signing that other callers wait on.
type signing struct {
	done chan struct{} // closed when cert and err are set
	cert *tls.Certificate
	err  error
}

// NewSigner returns a Signer that signs with ca and caches up to cacheSize
// leaves (DefaultCacheSize when cacheSize <= 0).
func NewSigner(ca *CA, cacheSize int) (*Signer, error) {
	if ca == nil || ca.Cert == nil || ca.Key == nil {
		return nil, errors.New("mitm: NewSigner needs a CA with a certificate and a key")
	}
	if !publicKeysEqual(ca.Cert.PublicKey, ca.Key.Public()) {
		return nil, errors.New("mitm: CA key does not match CA certificate")
	}
	if cacheSize <= 0 {
		cacheSize = DefaultCacheSize
	}
	cache, err := lru.New[string, *tls.Certificate](cacheSize)
	if err != nil {
		return nil, fmt.Errorf("mitm: creating leaf cache: %w", err)
	}
	return &Signer{
		ca:           ca,
		cache:        cache,
		inflight:     make(map[string]*signing),
		now:          time.Now,
		leafValidity: LeafValidity,
	}, nil
}

// Certificate returns a leaf certificate for host, signing one if no usable
// leaf is cached. host may carry a port, which is ignored. An IP address gets
// an IP SAN; anything else must be a DNS name and gets a lowercased DNS SAN.
// The result's Certificate chain is [leaf, CA] and its Leaf is set; callers
// must not modify it, as it is shared.
func (s *Signer) Certificate(host string) (*tls.Certificate, error) {
	name, ip, err := normalizeHost(host)
	if err != nil {
		return nil, err
	}
	// Fast path: a cache hit takes only the LRU's lock.
	if cert, ok := s.cache.Get(name); ok && s.usable(cert) {
		s.hits.Add(1)
		return cert, nil
	}

	s.mu.Lock()
	// Check again under mu: a signing may have finished, and been removed
	// from inflight, between the lookup above and here. The leader adds to
	// the cache before leaving inflight, so this check cannot miss it.
	if cert, ok := s.cache.Get(name); ok && s.usable(cert) {
		s.mu.Unlock()
		s.hits.Add(1)
		return cert, nil
	}
	s.misses.Add(1)
	if w, ok := s.inflight[name]; ok {
		s.mu.Unlock()
		<-w.done
		return w.cert, w.err
	}
	w := &signing{done: make(chan struct{})}
	s.inflight[name] = w
	s.mu.Unlock()

	w.cert, w.err = s.sign(name, ip)
	if w.err == nil {
		s.cache.Add(name, w.cert)
	}
	s.mu.Lock()
	delete(s.inflight, name)
	s.mu.Unlock()
	close(w.done)
	return w.cert, w.err
}

// usable reports whether a cached leaf can still be served: it is more than
// leafRenewBefore from expiry, or it already expires with the CA, in which
// case signing again cannot produce a longer-lived leaf.
func (s *Signer) usable(cert *tls.Certificate) bool {
	now := s.now()
	notAfter := cert.Leaf.NotAfter
	if now.Before(notAfter.Add(-leafRenewBefore)) {
		return true
	}
	return notAfter.Equal(s.ca.Cert.NotAfter) && now.Before(notAfter)
}

// sign issues a leaf for name (ip is valid when name is an IP address).
func (s *Signer) sign(name string, ip netip.Addr) (*tls.Certificate, error) {
	now := s.now()
	caCert := s.ca.Cert
	if !now.Before(caCert.NotAfter) {
		return nil, fmt.Errorf("mitm: CA %q expired on %s", caCert.Subject.CommonName,
			caCert.NotAfter.UTC().Format(time.RFC3339))
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("mitm: generating leaf key for %s: %w", name, err)
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, err
	}
	notAfter := now.Add(s.leafValidity)
	if notAfter.After(caCert.NotAfter) {
		// A leaf outliving its CA would fail verification anyway; capping
		// it makes the cache renew it on the CA's schedule instead.
		notAfter = caCert.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		// Go ignores the CN for name checks, but some clients and tools
		// still display it.
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             now.Add(-clockSkew),
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
	}
	if ip.IsValid() {
		tmpl.IPAddresses = []net.IP{ip.AsSlice()}
	} else {
		tmpl.DNSNames = []string{name}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, key.Public(), s.ca.Key)
	if err != nil {
		return nil, fmt.Errorf("mitm: signing leaf for %s: %w", name, err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("mitm: parsing leaf for %s: %w", name, err)
	}
	s.signed.Add(1)
	return &tls.Certificate{
		// The CA goes in the chain too: harmless for clients that trust it
		// directly, and lets clients with an intermediate-aware store build
		// the path.
		Certificate: [][]byte{der, caCert.Raw},
		PrivateKey:  key,
		Leaf:        leaf,
	}, nil
}

// ErrSNIMismatch is the handshake error of a ClientHello whose server name
// is not the host the connection was intercepted for.
var ErrSNIMismatch = errors.New("mitm: the TLS server name is not the CONNECT host")

// TLSConfig returns the server-side TLS config for a connection intercepted
// for connectHost (the CONNECT target or original destination). The leaf is
// always connectHost's: a ClientHello naming another server is refused with
// ErrSNIMismatch, and one naming none (clients connecting to an IP send no
// SNI) gets connectHost's leaf. Following the SNI would let any client that
// can reach detour have it sign a certificate for any name it likes, one
// signature and one cache entry per name; connectHost is one the policy
// intercepts, so the leaves are bounded by the policy's routes.
//
// ALPN offers h2 and then http/1.1, as the vendors' servers do: a client
// that speaks only HTTP/2 (gRPC-style stacks, some fetch implementations)
// would otherwise get a no_application_protocol alert, and one that speaks
// both gets h2, as it would from the vendor. The server of the connection
// must serve both (detour's inner http.Server does, by the negotiated
// protocol). A client that offers no ALPN gets HTTP/1.1.
func (s *Signer) TLSConfig(connectHost string) *tls.Config {
	want, _, wantErr := normalizeHost(connectHost)
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"h2", "http/1.1"},
		GetCertificate: func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
			if hello.ServerName != "" && wantErr == nil {
				// Compared normalised: case and a trailing dot do not
				// make another host.
				if sni, _, err := normalizeHost(hello.ServerName); err != nil || sni != want {
					return nil, fmt.Errorf("%w: server name %q, CONNECT host %q", ErrSNIMismatch, hello.ServerName, want)
				}
			}
			return s.Certificate(connectHost)
		},
	}
}

// Stats returns the Signer's counters.
func (s *Signer) Stats() Stats {
	return Stats{Hits: s.hits.Load(), Misses: s.misses.Load(), Signed: s.signed.Load()}
}

// normalizeHost turns host (a DNS name or IP, optionally with a port, IPv6
// optionally bracketed) into the cache key and SAN: lowercase DNS name without
// a trailing dot, or the canonical IP string. Normalising before the cache
// means "API.openai.com:443" and "api.openai.com" share one leaf.
func normalizeHost(host string) (name string, ip netip.Addr, err error) {
	h := host
	switch {
	case strings.HasPrefix(h, "["):
		if hh, _, err := net.SplitHostPort(h); err == nil {
			h = hh
		} else if strings.HasSuffix(h, "]") {
			h = h[1 : len(h)-1]
		} else {
			return "", netip.Addr{}, fmt.Errorf("mitm: invalid host %q", host)
		}
	case strings.Count(h, ":") == 1: // name:port or v4:port; bare IPv6 has more colons
		hh, _, err := net.SplitHostPort(h)
		if err != nil {
			return "", netip.Addr{}, fmt.Errorf("mitm: invalid host %q: %w", host, err)
		}
		h = hh
	}
	if h == "" {
		return "", netip.Addr{}, fmt.Errorf("mitm: empty host in %q", host)
	}
	// Only try an IP parse when it could be one, so the common DNS-name path
	// does not allocate a parse error.
	if c := h[0]; ('0' <= c && c <= '9') || strings.Contains(h, ":") {
		if a, err := netip.ParseAddr(h); err == nil {
			a = a.WithZone("").Unmap()
			return a.String(), a, nil
		}
	}
	h = strings.TrimSuffix(h, ".")
	h = strings.ToLower(h)
	if !validDNSName(h) {
		return "", netip.Addr{}, fmt.Errorf("mitm: invalid host %q", host)
	}
	return h, netip.Addr{}, nil
}

// validDNSName accepts lowercase ASCII names of letters, digits, '-' and '_'
// in non-empty labels. SNI carries IDNs in punycode, so nothing else needs to
// pass; wildcards are refused because every leaf names one exact host.
func validDNSName(h string) bool {
	if len(h) == 0 || len(h) > 253 {
		return false
	}
	label := 0
	for i := 0; i < len(h); i++ {
		switch c := h[i]; {
		case c == '.':
			if label == 0 {
				return false
			}
			label = 0
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '-', c == '_':
			label++
			if label > 63 {
				return false
			}
		default:
			return false
		}
	}
	return label > 0
}
