package admin

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/detour-proxy/detour/policy"
)

// openPaths are the only endpoints anyone who reaches admin_listen may
// call: the kubelet probes the pod IP and Prometheus scrapes it, neither
// with a credential. Every other path — those registered today and any
// added later — goes through the guard, because it is the guard that wraps
// the whole mux, not each handler that opts in.
var openPaths = map[string]bool{"/healthz": true, "/readyz": true, "/metrics": true}

// tokenRecheck is how long the admin token read from admin.token_file is
// trusted before the file is read again. A rotated Kubernetes Secret is in
// effect within this long, with no policy reload; and a burst of requests
// (or of wrong guesses) reads the file at most once per interval.
const tokenRecheck = time.Second

// bearerChallenge is the WWW-Authenticate value of a 401 (RFC 6750).
const bearerChallenge = `Bearer realm="detour admin"`

// Admission says how a guarded request was let in, for the audit line of
// a state change.
type Admission string

// The ways a request gets past the guard.
const (
	// AdmittedLoopback: the peer address is on the loopback interface (a
	// process on the same host, or in the same pod, or kubectl
	// port-forward, which connects from the pod's own loopback).
	AdmittedLoopback Admission = "loopback"
	// AdmittedToken: the request carried the admin bearer token.
	AdmittedToken Admission = "token"
)

type admissionKey struct{}

// AdmissionOf returns how r was let past the guard ("" for open paths).
func AdmissionOf(r *http.Request) Admission {
	a, _ := r.Context().Value(admissionKey{}).(Admission)
	return a
}

// guard lets a request to anything but openPaths through when its peer
// is on loopback, or when it carries the admin token. It decides by
// r.RemoteAddr, the address of the TCP peer, never by a header a client
// could write (X-Forwarded-For): nothing legitimate proxies the admin
// listener.
type guard struct {
	store *policy.Store
	log   zerolog.Logger
	now   func() time.Time
	next  http.Handler

	mu     sync.Mutex
	cached cachedToken
}

// cachedToken is the last read of an admin token file. Only the token's
// SHA-256 is kept: comparing fixed-size digests in constant time does not
// leak the token's length either.
type cachedToken struct {
	path string
	sum  [sha256.Size]byte
	err  error
	at   time.Time
}

func (g *guard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if openPaths[r.URL.Path] {
		g.next.ServeHTTP(w, r)
		return
	}
	loopback := loopbackPeer(r.RemoteAddr)
	tokenFile := g.store.Load().Admin.TokenFile
	authz := r.Header.Get("Authorization")
	switch {
	case loopback && (tokenFile == "" || authz == ""):
		// A browser on the developer's machine is a loopback peer too: a
		// DNS-rebinding page's requests carry its own domain name as Host.
		// A request with the token needs no such check: the page does not
		// have the token.
		if !localHost(r.Host) {
			g.refuse(w, r, http.StatusForbidden, "", "host",
				"a loopback caller must address detour by IP address or localhost (Host "+r.Host+" refused: DNS rebinding protection)")
			return
		}
		g.admit(w, r, AdmittedLoopback)
		return
	case tokenFile == "":
		g.refuse(w, r, http.StatusForbidden, "", "no_token_configured",
			r.URL.Path+" answers only loopback callers, and this detour has no admin token: "+policy.AdminTokenHint)
		return
	case authz == "":
		g.refuse(w, r, http.StatusUnauthorized, bearerChallenge, "no_token",
			"send Authorization: Bearer <token> (the token is the content of the file admin.token_file names)")
		return
	}
	want, err := g.token(tokenFile)
	if err != nil {
		// Fail closed, and say why in detour's log, not to the caller.
		g.log.Error().Str("component", "admin").Str("token_file", tokenFile).Err(err).
			Msg("admin token file unreadable: only loopback callers without a token are let in")
		g.refuse(w, r, http.StatusServiceUnavailable, "", "token_file_unreadable",
			"detour cannot read its admin token file; its log says why")
		return
	}
	scheme, tok, _ := strings.Cut(authz, " ")
	got := sha256.Sum256([]byte(strings.TrimSpace(tok)))
	if !strings.EqualFold(scheme, "Bearer") || subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
		g.refuse(w, r, http.StatusUnauthorized, bearerChallenge+`, error="invalid_token"`, "wrong_token",
			"wrong admin token: send Authorization: Bearer <token> with the content of the file admin.token_file names")
		return
	}
	g.admit(w, r, AdmittedToken)
}

func (g *guard) admit(w http.ResponseWriter, r *http.Request, a Admission) {
	g.next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), admissionKey{}, a)))
}

// refuse answers a request the guard turns away. A refused state change is
// logged (warn: someone tried to change the policy); a refused read only at
// debug, so that a port scan does not flood the log. Neither line carries
// the Authorization header.
func (g *guard) refuse(w http.ResponseWriter, r *http.Request, status int, challenge, reason, msg string) {
	ev := g.log.Debug()
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		ev = g.log.Warn()
	}
	ev.Str("component", "admin").Str("method", r.Method).Str("path", r.URL.Path).Str("peer", r.RemoteAddr).
		Str("reason", reason).Int("status", status).Msg("admin request refused")
	if challenge != "" {
		w.Header().Set("WWW-Authenticate", challenge)
	}
	writeJSON(w, status, errorJSON{Error: msg})
}

// token returns the SHA-256 of the admin token in path, read again when
// the cached read is older than tokenRecheck or was of another file.
func (g *guard) token(path string) ([sha256.Size]byte, error) {
	now := g.now()
	g.mu.Lock()
	defer g.mu.Unlock()
	c := &g.cached
	if c.path != path || c.at.IsZero() || now.Sub(c.at) >= tokenRecheck || now.Before(c.at) {
		tok, err := policy.ReadAdminToken(path)
		*c = cachedToken{path: path, sum: sha256.Sum256([]byte(tok)), err: err, at: now}
	}
	return c.sum, c.err
}

// loopbackPeer reports whether a connection's remote address is on the
// loopback interface (127.0.0.0/8, ::1, or ::ffff:127.0.0.0/104). Anything
// it cannot parse is not.
func loopbackPeer(remoteAddr string) bool {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		return false
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

// localHost reports whether a Host header names detour by IP address or
// as localhost. A DNS-rebinding page's requests carry its own domain name.
func localHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	return strings.EqualFold(host, "localhost") || net.ParseIP(host) != nil
}
