package cloud

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"time"
)

// googleEarlyExpiry is how long before its expiry a cached token is
// replaced. The token travels in the request's headers, so the margin
// needs to cover only the time from handing it out to sending them (a
// connection and a TLS handshake; a retry asks for a token again).
// golang.org/x/oauth2 used the same 10 s, so tokens are refreshed when
// they were before. A much larger margin would refresh on every call a
// token that lives little longer than it (an emulator's, or a metadata
// server's cached token near its end).
const googleEarlyExpiry = 10 * time.Second

// googleFetchTimeout bounds one refresh: finding the credential and the
// token endpoint's (or the metadata server's) answer. It does not end with
// the request that started it, since every caller waiting shares it.
const googleFetchTimeout = 30 * time.Second

// googleAppCredentialsEnv names a credentials file, first of ADC's search.
const googleAppCredentialsEnv = "GOOGLE_APPLICATION_CREDENTIALS"

// googleTokens is Vertex's access token source for one credentials file
// (or, file "", for Application Default Credentials), kept by the
// Registry for the life of the process. It hands out the cached token until
// googleEarlyExpiry before it expires; then one refresh runs, and every
// caller that comes meanwhile waits for it (or for its own request to
// end). The source is found on first use and kept once it has given a
// token; a search, or a source that has never given one, that fails is
// not kept, so the next call searches again (a gcloud login meanwhile is
// seen).
type googleTokens struct {
	file string
	// getenv, hc and now are os.Getenv, http.DefaultClient (which honours
	// HTTPS_PROXY, as golang.org/x/oauth2 did) and time.Now unless a test
	// sets them.
	getenv func(string) string
	hc     *http.Client
	now    func() time.Time

	mu      sync.Mutex
	src     googleSource
	srcName string
	issued  bool // src has given a token
	tok     googleToken
	pending *googleRefresh
}

// googleRefresh is one refresh in flight; done is closed when tok or err
// is set.
type googleRefresh struct {
	done chan struct{}
	tok  googleToken
	err  error
}

func (g *googleTokens) clock() time.Time {
	if g.now != nil {
		return g.now()
	}
	return time.Now()
}

func (g *googleTokens) env(k string) string {
	if g.getenv != nil {
		return g.getenv(k)
	}
	return os.Getenv(k)
}

// token returns an access token: the cached one, or a new one. It waits
// for a refresh no longer than ctx lasts; the refresh itself goes on for
// the other callers.
func (g *googleTokens) token(ctx context.Context) (string, error) {
	g.mu.Lock()
	if g.tok.access != "" && g.clock().Before(g.tok.expiry.Add(-googleEarlyExpiry)) {
		tok := g.tok.access
		g.mu.Unlock()
		return tok, nil
	}
	r := g.pending
	if r == nil {
		r = &googleRefresh{done: make(chan struct{})}
		g.pending = r
		go g.refresh(r)
	}
	g.mu.Unlock()
	select {
	case <-r.done:
		if r.err != nil {
			return "", r.err
		}
		return r.tok.access, nil
	case <-ctx.Done():
		return "", fmt.Errorf("vertex: access token: %w", context.Cause(ctx))
	}
}

// refresh finds the source if none is kept, fetches a token, and ends r.
// Only one runs at a time (g.pending), so src is not fetched from twice at
// once.
func (g *googleTokens) refresh(r *googleRefresh) {
	ctx, cancel := context.WithTimeout(context.Background(), googleFetchTimeout)
	defer cancel()
	g.mu.Lock()
	src, name := g.src, g.srcName
	g.mu.Unlock()
	var tok googleToken
	var err error
	if src == nil {
		src, name, err = g.find()
		if err != nil {
			err = fmt.Errorf("vertex: Google credentials: %w", err)
		}
	}
	if err == nil {
		hc := g.hc
		if hc == nil {
			hc = http.DefaultClient
		}
		if tok, err = src.fetch(ctx, googleFetcher{hc: hc, now: g.clock}); err != nil {
			err = fmt.Errorf("vertex: access token from %s: %w", name, err)
		}
	}
	g.mu.Lock()
	switch {
	case err == nil:
		g.src, g.srcName, g.issued, g.tok = src, name, true, tok
	case !g.issued:
		g.src, g.srcName = nil, ""
	}
	g.pending = nil
	g.mu.Unlock()
	r.tok, r.err = tok, err
	close(r.done)
}

// find is Application Default Credentials' search
// (https://cloud.google.com/docs/authentication/application-default-credentials),
// after the policy's own file: vertex.credentials_file, then
// GOOGLE_APPLICATION_CREDENTIALS, then gcloud's file, then the metadata
// server. A file that is named but cannot be read or used is an error,
// not a reason to look further: the search would find some other account.
// It returns the source and a name for it that errors quote.
func (g *googleTokens) find() (googleSource, string, error) {
	if g.file != "" {
		return g.fromFile(g.file, "vertex.credentials_file "+g.file)
	}
	if f := g.env(googleAppCredentialsEnv); f != "" {
		src, name, err := g.fromFile(f, googleAppCredentialsEnv+"="+f)
		if err != nil {
			err = fmt.Errorf("%w (set %s to a readable Google credentials file, or unset it)", err, googleAppCredentialsEnv)
		}
		return src, name, err
	}
	// gcloud's file is used when it can be read, as by Google's own
	// libraries; otherwise the search goes on.
	wk := g.wellKnownFile()
	if b, err := os.ReadFile(wk); wk != "" && err == nil {
		return fileSource(b, "gcloud's application default credentials "+wk)
	}
	host := g.env(googleMetadataHostEnv)
	if host == "" {
		host = googleMetadataIP
	}
	searched := googleAppCredentialsEnv + " is not set, there is no " + wk
	if wk == "" {
		searched = googleAppCredentialsEnv + " is not set, there is no home directory for gcloud's file"
	}
	m := &googleMetadata{host: host, searched: searched, hc: googleMetadataClient}
	return m, m.String(), nil
}

func (g *googleTokens) fromFile(path, name string) (googleSource, string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", name, err)
	}
	return fileSource(b, name)
}

func fileSource(b []byte, name string) (googleSource, string, error) {
	src, err := parseGoogleCredentials(b)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", name, err)
	}
	return src, src.String() + " (" + name + ")", nil
}

// wellKnownFile is where gcloud auth application-default login writes:
// %APPDATA%\gcloud on Windows, ~/.config/gcloud elsewhere; "" when there
// is no home directory.
func (g *googleTokens) wellKnownFile() string {
	const f = "application_default_credentials.json"
	if runtime.GOOS == "windows" {
		if d := g.env("APPDATA"); d != "" {
			return filepath.Join(d, "gcloud", f)
		}
		return ""
	}
	if home := g.env("HOME"); home != "" {
		return filepath.Join(home, ".config", "gcloud", f)
	}
	return ""
}
