package cloud

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/detour-proxy/detour/internal/testsupport"
)

// googleTestKey is one RSA key for every test: generating one takes a
// while, and no test needs its own.
var googleTestKey = sync.OnceValue(func() *rsa.PrivateKey {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	return k
})

const testEmail = "detour@proj-1.iam.gserviceaccount.com"

// newTestClock is a clock a test moves by hand, starting now.
func newTestClock() *testsupport.Clock { return testsupport.NewClock(time.Now()) }

// fakeGoogleOAuth is Google's token endpoint (POST /token) as a service
// account's key file and gcloud's files use it: the JWT-bearer grant, whose
// assertion must verify with the key's public half and carry the claims
// Google checks, and the refresh-token grant of the clients it knows.
// Every check that fails is a test error and an OAuth2 error answer.
type fakeGoogleOAuth struct {
	t   *testing.T
	pub *rsa.PublicKey
	now func() time.Time
	// url is the server's, for the aud claim.
	url string
	// lifetime is expires_in; zero is an hour.
	lifetime time.Duration
	// refresh maps a refresh token to the access token's name.
	refresh map[string]string
	// rotate, when set, is the refresh token the first refresh answer
	// hands out in place of the one sent.
	rotate string
	// gate, when set, holds every answer until it is closed.
	gate chan struct{}
	// fail, when set, is the status and body of every answer.
	failStatus int
	failBody   string

	mu   sync.Mutex
	hits int
}

// newFakeGoogleOAuth starts the endpoint once configure (if any) has set
// its fields: only refresh changes afterwards, under mu.
func newFakeGoogleOAuth(t *testing.T, configure func(*fakeGoogleOAuth)) *fakeGoogleOAuth {
	f := &fakeGoogleOAuth{t: t, pub: &googleTestKey().PublicKey, now: time.Now, refresh: map[string]string{}}
	srv := httptest.NewUnstartedServer(f)
	f.url = "http://" + srv.Listener.Addr().String() + "/token"
	if configure != nil {
		configure(f)
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return f
}

func (f *fakeGoogleOAuth) setRefresh(token, label string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if label == "" {
		delete(f.refresh, token)
		return
	}
	f.refresh[token] = label
}

func (f *fakeGoogleOAuth) Hits() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.hits
}

func (f *fakeGoogleOAuth) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.hits++
	n := f.hits
	f.mu.Unlock()
	if f.gate != nil {
		<-f.gate
	}
	if f.failStatus != 0 {
		w.WriteHeader(f.failStatus)
		fmt.Fprint(w, f.failBody)
		return
	}
	fail := func(code, format string, args ...any) {
		f.t.Errorf("token endpoint: "+format, args...)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, `{"error":%q,"error_description":%q}`, code, fmt.Sprintf(format, args...))
	}
	if r.Method != http.MethodPost || r.URL.Path != "/token" || r.Header.Get("Content-Type") != "application/x-www-form-urlencoded" {
		fail("invalid_request", "%s %s %q", r.Method, r.URL.Path, r.Header.Get("Content-Type"))
		return
	}
	if err := r.ParseForm(); err != nil {
		fail("invalid_request", "form: %v", err)
		return
	}
	var name, rotated string
	switch g := r.PostForm.Get("grant_type"); g {
	case googleJWTBearer:
		if err := f.verifyAssertion(r.PostForm.Get("assertion")); err != nil {
			fail("invalid_grant", "%v", err)
			return
		}
		name = fmt.Sprintf("sa-%d", n)
	case "refresh_token":
		id, secret, basic := r.BasicAuth()
		if !basic {
			id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
		}
		rt := r.PostForm.Get("refresh_token")
		f.mu.Lock()
		label, ok := f.refresh[rt]
		f.mu.Unlock()
		if !ok || id != "client-"+label || secret != "secret-"+label {
			fail("invalid_grant", "refresh token %q, client %q", rt, id)
			return
		}
		name = fmt.Sprintf("%s-%d", label, n)
		if f.rotate != "" && n == 1 {
			rotated = f.rotate
			f.setRefresh(f.rotate, label)
		}
	default:
		fail("unsupported_grant_type", "grant_type %q", g)
		return
	}
	life := f.lifetime
	if life == 0 {
		life = time.Hour
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{
		"access_token": "ya29." + name, "expires_in": int(life.Seconds()), "token_type": "Bearer",
		"refresh_token": rotated,
	})
}

// verifyAssertion checks a JWT-bearer assertion the way Google does: RS256
// with the account's key, iss the account, the cloud-platform scope, aud
// this endpoint, an hour from iat to exp, and valid now.
func (f *fakeGoogleOAuth) verifyAssertion(a string) error {
	parts := strings.Split(a, ".")
	if len(parts) != 3 {
		return fmt.Errorf("assertion has %d parts", len(parts))
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return err
	}
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if err := rsa.VerifyPKCS1v15(f.pub, crypto.SHA256, sum[:], sig); err != nil {
		return fmt.Errorf("signature: %v", err)
	}
	var header struct{ Alg, Typ, Kid string }
	hb, _ := base64.RawURLEncoding.DecodeString(parts[0])
	if err := json.Unmarshal(hb, &header); err != nil || header.Alg != "RS256" || header.Typ != "JWT" || header.Kid != "key-1" {
		return fmt.Errorf("header %s", hb)
	}
	var c struct {
		Iss, Scope, Aud string
		Iat, Exp        int64
	}
	cb, _ := base64.RawURLEncoding.DecodeString(parts[1])
	if err := json.Unmarshal(cb, &c); err != nil {
		return err
	}
	now := f.now().Unix()
	if c.Iss != testEmail || c.Scope != vertexScope || c.Aud != f.url || c.Exp-c.Iat != 3600 || c.Iat > now || c.Exp <= now {
		return fmt.Errorf("claims %s at %d", cb, now)
	}
	return nil
}

func serviceAccountFile(t *testing.T, tokenURI string, pkcs1 bool) string {
	t.Helper()
	key := googleTestKey()
	block := &pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}
	if !pkcs1 {
		der, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		block = &pem.Block{Type: "PRIVATE KEY", Bytes: der}
	}
	return writeJSON(t, "sa.json", map[string]any{
		"type": "service_account", "project_id": "proj-1", "private_key_id": "key-1",
		"private_key": string(pem.EncodeToMemory(block)), "client_email": testEmail,
		"client_id": "1", "token_uri": tokenURI,
	})
}

func authorizedUserFile(t *testing.T, tokenURI, label string) string {
	t.Helper()
	return writeJSON(t, label+".json", map[string]any{
		"type": "authorized_user", "client_id": "client-" + label, "client_secret": "secret-" + label,
		"refresh_token": "rt-" + label, "token_uri": tokenURI, "quota_project_id": "proj-1",
	})
}

func writeJSON(t *testing.T, name string, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// env is a test's environment for googleTokens.getenv.
func env(kv ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

// closedAddr is a loopback address nothing listens on: connecting is
// refused at once, as off Google Cloud an unrouted metadata address is.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

func TestGoogleServiceAccountJWTGrant(t *testing.T) {
	t.Parallel()
	for _, pkcs1 := range []bool{false, true} {
		t.Run(fmt.Sprintf("pkcs1=%v", pkcs1), func(t *testing.T) {
			t.Parallel()
			f := newFakeGoogleOAuth(t, nil)
			g := &googleTokens{file: serviceAccountFile(t, f.url, pkcs1), getenv: env()}
			tok, err := g.token(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if tok != "ya29.sa-1" || f.Hits() != 1 {
				t.Errorf("token %q after %d grants; want ya29.sa-1 after 1", tok, f.Hits())
			}
		})
	}
}

// TestGoogleTokenCachedUntilShortlyBeforeExpiry: calls get the cached
// token until googleEarlyExpiry before it expires, and only then a new one.
func TestGoogleTokenCachedUntilShortlyBeforeExpiry(t *testing.T) {
	t.Parallel()
	clock := newTestClock()
	f := newFakeGoogleOAuth(t, func(f *fakeGoogleOAuth) { f.now = clock.Now })
	g := &googleTokens{file: serviceAccountFile(t, f.url, false), getenv: env(), now: clock.Now}
	get := func() string {
		t.Helper()
		tok, err := g.token(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	first := get()
	for range 5 {
		if tok := get(); tok != first {
			t.Fatalf("token %q; want the cached %q", tok, first)
		}
	}
	clock.Advance(time.Hour - googleEarlyExpiry - time.Second)
	if tok := get(); tok != first || f.Hits() != 1 {
		t.Fatalf("just outside the margin: token %q after %d grants; want the cached %q after 1", tok, f.Hits(), first)
	}
	clock.Advance(2 * time.Second)
	if tok := get(); tok == first || f.Hits() != 2 {
		t.Fatalf("inside the margin: token %q after %d grants; want a new one after 2", tok, f.Hits())
	}
}

// TestGoogleConcurrentCallersShareOneRefresh: callers that come while a
// refresh runs wait for it rather than start their own, and one whose
// request ends stops waiting without ending the refresh for the others.
// In a synctest bubble, with the fake endpoint served in memory, so that
// "every caller is waiting" is known rather than hoped for.
func TestGoogleConcurrentCallersShareOneRefresh(t *testing.T) {
	t.Parallel()
	key := googleTestKey()
	synctest.Test(t, func(t *testing.T) {
		f := &fakeGoogleOAuth{t: t, pub: &key.PublicKey, now: time.Now, url: "http://oauth2.test/token", gate: make(chan struct{})}
		g := &googleTokens{
			file: serviceAccountFile(t, f.url, false), getenv: env(),
			hc: &http.Client{Transport: handlerTransport{f}},
		}
		const callers = 8
		toks := make([]string, callers)
		errs := make([]error, callers)
		var wg sync.WaitGroup
		for i := range callers {
			wg.Go(func() { toks[i], errs[i] = g.token(context.Background()) })
		}
		ctx, cancel := context.WithCancel(context.Background())
		var leftErr error
		left := make(chan struct{})
		go func() { _, leftErr = g.token(ctx); close(left) }()
		synctest.Wait()
		if n := f.Hits(); n != 1 {
			t.Fatalf("%d token requests while %d callers wait; want 1", n, callers+1)
		}
		cancel()
		<-left
		if leftErr == nil {
			t.Error("a caller whose request ended got a token; want its context's error")
		}
		close(f.gate)
		wg.Wait()
		for i := range callers {
			if errs[i] != nil || toks[i] != "ya29.sa-1" {
				t.Errorf("caller %d: %q, %v; want ya29.sa-1", i, toks[i], errs[i])
			}
		}
		if n := f.Hits(); n != 1 {
			t.Errorf("%d token requests; want 1", n)
		}
	})
}

// handlerTransport serves requests with a handler, in memory.
type handlerTransport struct{ h http.Handler }

func (h handlerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	h.h.ServeHTTP(rec, r)
	return rec.Result(), nil
}

// fakeMetadata is the GCE / GKE metadata server's token endpoint.
func fakeMetadata(t *testing.T, h http.HandlerFunc) (host string, hits func() int) {
	t.Helper()
	var mu sync.Mutex
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n++
		mu.Unlock()
		h(w, r)
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://"), func() int { mu.Lock(); defer mu.Unlock(); return n }
}

func metadataToken(t *testing.T) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Metadata-Flavor", "Google")
		if r.Header.Get("Metadata-Flavor") != "Google" || r.URL.Path != "/computeMetadata/v1/instance/service-accounts/default/token" ||
			r.URL.Query().Get("scopes") != vertexScope {
			t.Errorf("metadata server asked %s %s with Metadata-Flavor %q", r.Method, r.URL, r.Header.Get("Metadata-Flavor"))
			w.WriteHeader(http.StatusForbidden)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"access_token":"ya29.metadata","expires_in":3599,"token_type":"Bearer"}`)
	}
}

// TestGoogleMetadataServer: with no file, the metadata server's token for
// the instance's service account, asked for with Metadata-Flavor: Google
// and the scope, and cached.
func TestGoogleMetadataServer(t *testing.T) {
	t.Parallel()
	host, hits := fakeMetadata(t, metadataToken(t))
	g := &googleTokens{getenv: env(googleMetadataHostEnv, host, "HOME", t.TempDir())}
	for range 3 {
		tok, err := g.token(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if tok != "ya29.metadata" {
			t.Fatalf("token %q", tok)
		}
	}
	if hits() != 1 {
		t.Errorf("%d metadata requests; want 1", hits())
	}
}

func TestGoogleMetadataErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		h    http.HandlerFunc
		want []string
	}{
		{"not Google's", func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) },
			[]string{"not as Google's metadata server", "GOOGLE_APPLICATION_CREDENTIALS", "gcloud auth application-default login"}},
		{"no service account", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Metadata-Flavor", "Google")
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, "service account not defined")
		}, []string{"the metadata server at", "answered 404", "service account not defined", "Workload Identity"}},
		{"no expires_in", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Metadata-Flavor", "Google")
			fmt.Fprint(w, `{"access_token":"ya29.x"}`)
		}, []string{"no expires_in"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			host, _ := fakeMetadata(t, tc.h)
			g := &googleTokens{getenv: env(googleMetadataHostEnv, host, "HOME", t.TempDir())}
			_, err := g.token(context.Background())
			if err == nil {
				t.Fatal("got a token")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q; want it to say %q", err, w)
				}
			}
		})
	}
}

// TestGoogleNoCredentialsFailsAndIsNotKept: off Google Cloud (nothing at
// the metadata address) the error says what was searched and what to do;
// the failed search is not kept, so credentials written afterwards (a
// gcloud login) are found by the next call.
func TestGoogleNoCredentialsFailsAndIsNotKept(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	addr := closedAddr(t)
	g := &googleTokens{getenv: env(googleMetadataHostEnv, addr, "HOME", home)}
	_, err := g.token(context.Background())
	if err == nil {
		t.Fatal("got a token with no credentials anywhere")
	}
	wk := filepath.Join(home, ".config", "gcloud", "application_default_credentials.json")
	for _, w := range []string{"no Google credentials found", "GOOGLE_APPLICATION_CREDENTIALS is not set", wk, addr,
		"vertex.credentials_file", "gcloud auth application-default login", "Workload Identity"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q; want it to say %q", err, w)
		}
	}
	f := newFakeGoogleOAuth(t, func(f *fakeGoogleOAuth) { f.refresh["rt-gcloud"] = "gcloud" })
	b, _ := os.ReadFile(authorizedUserFile(t, f.url, "gcloud"))
	os.MkdirAll(filepath.Dir(wk), 0o700)
	if err := os.WriteFile(wk, b, 0o600); err != nil {
		t.Fatal(err)
	}
	tok, err := g.token(context.Background())
	if err != nil || tok != "ya29.gcloud-1" {
		t.Errorf("after gcloud login: %q, %v; want gcloud's user's token", tok, err)
	}
}

// TestGoogleADCOrder: the policy's file, then GOOGLE_APPLICATION_CREDENTIALS,
// then gcloud's file, then the metadata server; a named file that cannot be
// read is an error, not a reason to use the next.
func TestGoogleADCOrder(t *testing.T) {
	t.Parallel()
	f := newFakeGoogleOAuth(t, func(f *fakeGoogleOAuth) {
		for _, l := range []string{"policy", "env", "gcloud"} {
			f.refresh["rt-"+l] = l
		}
	})
	policyFile := authorizedUserFile(t, f.url, "policy")
	envFile := authorizedUserFile(t, f.url, "env")
	home := t.TempDir()
	wk := filepath.Join(home, ".config", "gcloud", "application_default_credentials.json")
	os.MkdirAll(filepath.Dir(wk), 0o700)
	b, _ := os.ReadFile(authorizedUserFile(t, f.url, "gcloud"))
	os.WriteFile(wk, b, 0o600)
	host, _ := fakeMetadata(t, metadataToken(t))
	missing := filepath.Join(t.TempDir(), "gone.json")
	for _, tc := range []struct {
		name      string
		file, env string
		home      string
		want      string // token prefix, or error text
		wantErr   bool
	}{
		{"policy file first", policyFile, envFile, home, "ya29.policy-", false},
		{"then the environment", "", envFile, home, "ya29.env-", false},
		{"then gcloud's file", "", "", home, "ya29.gcloud-", false},
		{"then the metadata server", "", "", t.TempDir(), "ya29.metadata", false},
		{"a missing policy file", missing, envFile, home, "vertex.credentials_file " + missing, true},
		{"a missing GOOGLE_APPLICATION_CREDENTIALS", "", missing, home, "GOOGLE_APPLICATION_CREDENTIALS=" + missing, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := &googleTokens{file: tc.file, getenv: env(googleAppCredentialsEnv, tc.env, "HOME", tc.home, googleMetadataHostEnv, host)}
			tok, err := g.token(context.Background())
			switch {
			case tc.wantErr && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("got %q, %v; want an error naming %q", tok, err, tc.want)
			case !tc.wantErr && (err != nil || !strings.HasPrefix(tok, tc.want)):
				t.Errorf("got %q, %v; want %s…", tok, err, tc.want)
			}
		})
	}
}

// TestGoogleAuthorizedUserRefresh: gcloud's authorized user sends its
// client in the form, a workforce identity user by Basic authentication;
// a refresh token the endpoint rotates is the one sent next.
func TestGoogleAuthorizedUserRefresh(t *testing.T) {
	t.Parallel()
	t.Run("authorized_user, rotated", func(t *testing.T) {
		t.Parallel()
		clock := newTestClock()
		f := newFakeGoogleOAuth(t, func(f *fakeGoogleOAuth) {
			f.refresh["rt-user"] = "user"
			f.rotate = "rt-user-2"
		})
		g := &googleTokens{file: authorizedUserFile(t, f.url, "user"), getenv: env(), now: clock.Now}
		if tok, err := g.token(context.Background()); err != nil || tok != "ya29.user-1" {
			t.Fatalf("%q, %v", tok, err)
		}
		f.setRefresh("rt-user", "") // only the rotated one is good now
		clock.Advance(time.Hour)
		if tok, err := g.token(context.Background()); err != nil || tok != "ya29.user-2" {
			t.Fatalf("after rotation: %q, %v; want the rotated refresh token used", tok, err)
		}
	})
	t.Run("external_account_authorized_user", func(t *testing.T) {
		t.Parallel()
		f := newFakeGoogleOAuth(t, func(f *fakeGoogleOAuth) { f.refresh["rt-wf"] = "wf" })
		file := writeJSON(t, "wf.json", map[string]any{
			"type": "external_account_authorized_user", "audience": "//iam.googleapis.com/locations/global/workforcePools/p/providers/x",
			"client_id": "client-wf", "client_secret": "secret-wf", "refresh_token": "rt-wf", "token_url": f.url,
			"token_info_url": "https://sts.googleapis.com/v1/introspect",
		})
		g := &googleTokens{file: file, getenv: env()}
		if tok, err := g.token(context.Background()); err != nil || tok != "ya29.wf-1" {
			t.Fatalf("%q, %v", tok, err)
		}
	})
}

// TestGoogleTokenEndpointErrorIsSurfaced: the endpoint's OAuth2 error code
// and description are in the error, with the source and what to do, and
// no secret is: not the key, not the assertion, not a refresh token, even
// from an endpoint that echoes what it was sent.
func TestGoogleTokenEndpointErrorIsSurfaced(t *testing.T) {
	t.Parallel()
	f := newFakeGoogleOAuth(t, func(f *fakeGoogleOAuth) {
		f.failStatus, f.failBody = http.StatusBadRequest, `{"error":"invalid_grant","error_description":"Invalid JWT Signature."}`
	})
	file := serviceAccountFile(t, f.url, false)
	g := &googleTokens{file: file, getenv: env()}
	_, err := g.token(context.Background())
	if err == nil {
		t.Fatal("got a token")
	}
	for _, w := range []string{"service account " + testEmail, file, f.url, "400", "invalid_grant", "Invalid JWT Signature.", "create a new key"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q; want it to say %q", err, w)
		}
	}
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		w.WriteHeader(http.StatusBadGateway)
		fmt.Fprint(w, r.PostForm.Encode())
	}))
	t.Cleanup(echo.Close)
	for _, file := range []string{serviceAccountFile(t, echo.URL, false), authorizedUserFile(t, echo.URL, "user")} {
		g := &googleTokens{file: file, getenv: env()}
		_, err := g.token(context.Background())
		if err == nil || !strings.Contains(err.Error(), "answered 502") {
			t.Fatalf("error %v; want the 502", err)
		}
		for _, secret := range []string{"assertion", "eyJ", "rt-user", "secret-user", "PRIVATE KEY"} {
			if strings.Contains(err.Error(), secret) {
				t.Errorf("error %q shows %q", err, secret)
			}
		}
	}
}

// TestGoogleImpersonatedServiceAccount: gcloud's file for an impersonated
// service account: the source's token asks the IAM Credentials API for the
// target's, with the scope, the delegates and an hour's lifetime.
func TestGoogleImpersonatedServiceAccount(t *testing.T) {
	t.Parallel()
	f := newFakeGoogleOAuth(t, func(f *fakeGoogleOAuth) { f.refresh["rt-user"] = "user" })
	const target = "/v1/projects/-/serviceAccounts/target@proj-1.iam.gserviceaccount.com:generateAccessToken"
	var deny atomic.Bool
	iam := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Delegates []string
			Scope     []string
			Lifetime  string
		}
		json.NewDecoder(r.Body).Decode(&body)
		if r.Method != http.MethodPost || r.URL.Path != target || !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ya29.user-") ||
			len(body.Scope) != 1 || body.Scope[0] != vertexScope || body.Lifetime != "3600s" || len(body.Delegates) != 1 {
			t.Errorf("IAM asked %s %s, %s, %+v", r.Method, r.URL.Path, r.Header.Get("Authorization"), body)
		}
		w.Header().Set("Content-Type", "application/json")
		if deny.Load() {
			w.WriteHeader(http.StatusForbidden)
			fmt.Fprint(w, `{"error":{"code":403,"message":"Permission 'iam.serviceAccounts.getAccessToken' denied on resource (or it may not exist).","status":"PERMISSION_DENIED"}}`)
			return
		}
		fmt.Fprintf(w, `{"accessToken":"ya29.impersonated","expireTime":%q}`, time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
	}))
	t.Cleanup(iam.Close)
	file := writeJSON(t, "imp.json", map[string]any{
		"type": "impersonated_service_account", "service_account_impersonation_url": iam.URL + target,
		"delegates": []string{"projects/-/serviceAccounts/middle@proj-1.iam.gserviceaccount.com"},
		"source_credentials": map[string]any{
			"type": "authorized_user", "client_id": "client-user", "client_secret": "secret-user", "refresh_token": "rt-user", "token_uri": f.url,
		},
	})
	g := &googleTokens{file: file, getenv: env()}
	if tok, err := g.token(context.Background()); err != nil || tok != "ya29.impersonated" {
		t.Fatalf("%q, %v", tok, err)
	}
	deny.Store(true)
	g = &googleTokens{file: file, getenv: env()}
	_, err := g.token(context.Background())
	if err == nil || !strings.Contains(err.Error(), "PERMISSION_DENIED") || !strings.Contains(err.Error(), "roles/iam.serviceAccountTokenCreator") {
		t.Errorf("error %v; want IAM's refusal and the role to grant", err)
	}
}

// TestGoogleCredentialsRefused: files detour cannot use are refused before
// any request, saying why and what to use instead.
func TestGoogleCredentialsRefused(t *testing.T) {
	t.Parallel()
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ecDER, _ := x509.MarshalPKCS8PrivateKey(ec)
	ecPEM := string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: ecDER}))
	nested := map[string]any{"type": "authorized_user", "client_id": "a", "client_secret": "b", "refresh_token": "c"}
	for range googleMaxSourceDepth {
		nested = map[string]any{"type": "impersonated_service_account", "service_account_impersonation_url": "https://iam.test/x", "source_credentials": nested}
	}
	for _, tc := range []struct {
		name string
		file any
		want string
	}{
		{"external_account from AWS", map[string]any{"type": "external_account", "audience": "//iam.googleapis.com/x",
			"subject_token_type": "urn:ietf:params:aws:token-type:aws4_request",
			"credential_source":  map[string]any{"environment_id": "aws1", "region_url": "http://169.254.169.254/latest/meta-data/placement/availability-zone"}},
			"GKE use Workload Identity"},
		{"external_account from a program", map[string]any{"type": "external_account", "audience": "//iam.googleapis.com/x",
			"subject_token_type": "urn:ietf:params:oauth:token-type:jwt",
			"credential_source":  map[string]any{"executable": map[string]any{"command": "/bin/get-token"}}}, "service-account key file"},
		{"external_account without a source", map[string]any{"type": "external_account", "audience": "//iam.googleapis.com/x",
			"subject_token_type": "urn:ietf:params:oauth:token-type:jwt"}, `"file" or a "url"`},
		{"external_account json without a field", map[string]any{"type": "external_account", "audience": "//iam.googleapis.com/x",
			"subject_token_type": "urn:ietf:params:oauth:token-type:jwt",
			"credential_source":  map[string]any{"file": "/t", "format": map[string]any{"type": "json"}}}, "subject_token_field_name"},
		{"gdch", map[string]any{"type": "gdch_service_account"}, "not supported"},
		{"OAuth client ID", map[string]any{"installed": map[string]any{"client_id": "x"}}, "OAuth client ID file"},
		{"no type", map[string]any{"client_email": "x"}, `no "type"`},
		{"unknown type", map[string]any{"type": "api_key"}, `"api_key" are not supported`},
		{"service account without key", map[string]any{"type": "service_account", "client_email": testEmail}, `"private_key"`},
		{"not PEM", map[string]any{"type": "service_account", "client_email": testEmail, "private_key": "MIIEv"}, "not a PEM block"},
		{"EC key", map[string]any{"type": "service_account", "client_email": testEmail, "private_key": ecPEM}, "not an RSA key"},
		{"bad token_uri", map[string]any{"type": "service_account", "client_email": testEmail, "private_key": pemOf(t), "token_uri": "file:///etc/passwd"}, "not an http(s) URL"},
		{"authorized_user without refresh token", map[string]any{"type": "authorized_user", "client_id": "a", "client_secret": "b"}, "gcloud auth application-default login"},
		{"impersonated without source", map[string]any{"type": "impersonated_service_account", "service_account_impersonation_url": "https://iam.test/x"}, `"source_credentials"`},
		{"impersonated nested too deep", nested, "nested too deep"},
		{"not JSON", "{", "not a Google credentials JSON file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var b []byte
			if s, ok := tc.file.(string); ok {
				b = []byte(s)
			} else {
				b, _ = json.Marshal(tc.file)
			}
			src, err := parseGoogleCredentials(b)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("parse = %v, %v; want an error saying %q", src, err, tc.want)
			}
		})
	}
}

func pemOf(t *testing.T) string {
	der, err := x509.MarshalPKCS8PrivateKey(googleTestKey())
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
}

// FuzzGoogleCredentials: the credentials-file parser never panics, a file
// it accepts gives a source with a name, and its errors never quote the
// file's key.
func FuzzGoogleCredentials(f *testing.F) {
	der := x509.MarshalPKCS1PrivateKey(googleTestKey())
	keyPEM := string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: der}))
	for _, v := range []any{
		map[string]any{"type": "service_account", "client_email": testEmail, "private_key": keyPEM, "private_key_id": "k", "token_uri": "https://oauth2.googleapis.com/token"},
		map[string]any{"type": "authorized_user", "client_id": "a", "client_secret": "b", "refresh_token": "c"},
		map[string]any{"type": "external_account_authorized_user", "client_id": "a", "client_secret": "b", "refresh_token": "c", "token_url": "https://sts.googleapis.com/v1/oauthtoken"},
		map[string]any{"type": "impersonated_service_account", "service_account_impersonation_url": "https://iamcredentials.googleapis.com/v1/x",
			"source_credentials": map[string]any{"type": "authorized_user", "client_id": "a", "client_secret": "b", "refresh_token": "c"}},
		map[string]any{"type": "external_account", "audience": "//iam.googleapis.com/x", "subject_token_type": "urn:ietf:params:oauth:token-type:jwt",
			"service_account_impersonation_url": "https://iamcredentials.googleapis.com/v1/x",
			"credential_source":                 map[string]any{"url": "http://169.254.169.254/token", "format": map[string]any{"type": "json", "subject_token_field_name": "t"}}},
		map[string]any{"type": "external_account", "credential_source": map[string]any{"environment_id": "aws1"}},
		map[string]any{"web": map[string]any{}},
	} {
		b, _ := json.Marshal(v)
		f.Add(b)
	}
	f.Add([]byte(`{"type":"service_account","client_email":"x","private_key":"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, b []byte) {
		src, err := parseGoogleCredentials(b)
		if err != nil {
			if src != nil {
				t.Errorf("a source and an error")
			}
			var f googleCredentialsFile
			json.Unmarshal(b, &f)
			// A key is PEM, which no fixed text of an error holds.
			if strings.Contains(f.PrivateKey, "-----BEGIN") && strings.Contains(err.Error(), f.PrivateKey) {
				t.Errorf("error quotes the key: %v", err)
			}
			return
		}
		if src == nil || src.String() == "" {
			t.Errorf("accepted %q with no source or name", b)
		}
	})
}

// fakeGoogleSTS is Google's Security Token Service: it exchanges a subject token
// it trusts for an access token (RFC 8693), checking the form an
// external_account file makes.
func fakeGoogleSTS(t *testing.T, audience string, trusted func(subject string) bool) (tokenURL string, hits func() int) {
	t.Helper()
	var mu sync.Mutex
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		mu.Lock()
		n++
		name := fmt.Sprintf("ya29.sts-%d", n)
		mu.Unlock()
		f := r.PostForm
		w.Header().Set("Content-Type", "application/json")
		if f.Get("grant_type") != "urn:ietf:params:oauth:grant-type:token-exchange" || f.Get("audience") != audience ||
			f.Get("scope") != vertexScope || f.Get("requested_token_type") != "urn:ietf:params:oauth:token-type:access_token" ||
			f.Get("subject_token_type") != "urn:ietf:params:oauth:token-type:jwt" || !trusted(f.Get("subject_token")) {
			t.Errorf("STS asked %v", f)
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"error":"invalid_grant","error_description":"The subject token is invalid."}`)
			return
		}
		fmt.Fprintf(w, `{"access_token":%q,"issued_token_type":"urn:ietf:params:oauth:token-type:access_token","token_type":"Bearer","expires_in":3600}`, name)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/v1/token", func() int { mu.Lock(); defer mu.Unlock(); return n }
}

// TestGoogleExternalAccount: workload identity federation whose subject
// token is a file (read again at each refresh, as a projected token
// rotates) or a URL's JSON, exchanged at the STS, and then, when the file
// says so, for an impersonated service account's token.
func TestGoogleExternalAccount(t *testing.T) {
	t.Parallel()
	const audience = "//iam.googleapis.com/projects/1/locations/global/workloadIdentityPools/pool/providers/k8s"
	t.Run("file, rotated", func(t *testing.T) {
		t.Parallel()
		clock := newTestClock()
		tokenFile := filepath.Join(t.TempDir(), "token")
		os.WriteFile(tokenFile, []byte("subject-1\n"), 0o600)
		var mu sync.Mutex
		want := "subject-1"
		stsURL, hits := fakeGoogleSTS(t, audience, func(s string) bool { mu.Lock(); defer mu.Unlock(); return s == want })
		file := writeJSON(t, "wif.json", map[string]any{
			"type": "external_account", "audience": audience, "subject_token_type": "urn:ietf:params:oauth:token-type:jwt",
			"token_url": stsURL, "credential_source": map[string]any{"file": tokenFile},
		})
		g := &googleTokens{file: file, getenv: env(), now: clock.Now}
		if tok, err := g.token(context.Background()); err != nil || tok != "ya29.sts-1" {
			t.Fatalf("%q, %v", tok, err)
		}
		mu.Lock()
		want = "subject-2"
		mu.Unlock()
		os.WriteFile(tokenFile, []byte("subject-2"), 0o600)
		clock.Advance(time.Hour)
		if tok, err := g.token(context.Background()); err != nil || tok != "ya29.sts-2" || hits() != 2 {
			t.Fatalf("after the token file rotated: %q, %v", tok, err)
		}
	})
	t.Run("url json, impersonated", func(t *testing.T) {
		t.Parallel()
		src := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Metadata") != "True" {
				w.WriteHeader(http.StatusBadRequest)
				return
			}
			fmt.Fprint(w, `{"access_token":"subject-url","token_type":"Bearer"}`)
		}))
		t.Cleanup(src.Close)
		stsURL, _ := fakeGoogleSTS(t, audience, func(s string) bool { return s == "subject-url" })
		iam := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var body struct{ Lifetime string }
			json.NewDecoder(r.Body).Decode(&body)
			if r.Header.Get("Authorization") != "Bearer ya29.sts-1" || body.Lifetime != "1800s" {
				t.Errorf("IAM asked with %q, %+v", r.Header.Get("Authorization"), body)
			}
			fmt.Fprintf(w, `{"accessToken":"ya29.wif-impersonated","expireTime":%q}`, time.Now().Add(30*time.Minute).UTC().Format(time.RFC3339))
		}))
		t.Cleanup(iam.Close)
		file := writeJSON(t, "wif.json", map[string]any{
			"type": "external_account", "audience": audience, "subject_token_type": "urn:ietf:params:oauth:token-type:jwt",
			"token_url": stsURL, "service_account_impersonation_url": iam.URL + "/v1/projects/-/serviceAccounts/sa@p.iam.gserviceaccount.com:generateAccessToken",
			"service_account_impersonation": map[string]any{"token_lifetime_seconds": 1800},
			"credential_source": map[string]any{"url": src.URL, "headers": map[string]string{"Metadata": "True"},
				"format": map[string]any{"type": "json", "subject_token_field_name": "access_token"}},
		})
		g := &googleTokens{file: file, getenv: env()}
		if tok, err := g.token(context.Background()); err != nil || tok != "ya29.wif-impersonated" {
			t.Fatalf("%q, %v", tok, err)
		}
	})
}
