package detourtest

import (
	"context"
	"crypto/rsa"
	"crypto/x509"
	"embed"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/detour-proxy/detour/internal/chain"
	"github.com/detour-proxy/detour/internal/fakevendor"
	"github.com/detour-proxy/detour/rewrite"
)

// The end-to-end tests' policies and checks that need no vendor SDK, shared
// by proxy's tests and the SDK-driven ones in internal/sdkcheck.

const (
	// AppOpenAIKey is the key the tests' OpenAI apps send.
	AppOpenAIKey = "sk-app-openai-SECRET"
	// BackupKey is detour's own key for TwoUpstreams' backup.
	BackupKey = "sk-backup-key"
	// BedrockModel is the model id of the tests' Bedrock upstreams.
	BedrockModel = "anthropic.claude-3-5-haiku-20241022-v1:0"
)

// TwoUpstreams is a policy whose route for the app's vendor host chains a
// primary (the app's own key) and a backup (detour's own key from a file).
func TwoUpstreams(tb testing.TB, shape rewrite.Shape, primary, backup *Vendor, extra string) string {
	tb.Helper()
	return TwoUpstreamsWith(tb, shape, primary, backup, "", extra)
}

// TwoUpstreamsWith also adds primaryExtra (JSON members) to the primary upstream.
func TwoUpstreamsWith(tb testing.TB, shape rewrite.Shape, primary, backup *Vendor, primaryExtra, extra string) string {
	tb.Helper()
	keyFile := filepath.Join(tb.TempDir(), "backup.key")
	if err := os.WriteFile(keyFile, []byte(BackupKey+"\n"), 0o600); err != nil {
		tb.Fatal(err)
	}
	path := "/v1/chat/completions"
	if shape == rewrite.Anthropic {
		path = "/v1/messages"
	}
	return fmt.Sprintf(`{
  "upstreams": {
    "primary": {"shape": %[1]q, "base_url": %[2]q, "ca_file": %[3]q, "auth": {"from": "client"}%[10]s},
    "backup":  {"shape": %[1]q, "base_url": %[4]q, "ca_file": %[5]q, "auth": {"file": %[6]q}}
  },
  "routes": [{"name": "r", "match": {"host": %[7]q, "path": %[8]q}, "chain": ["primary", "backup"]}]
  %[9]s
}`, shape, primary.BaseURL(), primary.CAFile, backup.BaseURL(), backup.CAFile, keyFile, shape.DefaultHost(), path, extra, primaryExtra)
}

// ChatRequest is an OpenAI chat completion request of body from the app
// (AppOpenAIKey) to api.openai.com.
func ChatRequest(ctx context.Context, body string) *http.Request {
	return ChatRequestTo(ctx, "https://api.openai.com/v1/chat/completions", body)
}

// ChatRequestTo is ChatRequest to url.
func ChatRequestTo(ctx context.Context, url, body string) *http.Request {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+AppOpenAIKey)
	req.Header.Set("Content-Type", "application/json")
	return req
}

// TestContext ends 20 s from now, or when the test does.
func TestContext(tb testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	tb.Cleanup(cancel)
	return ctx
}

// Outcomes is r's attempts as upstream:outcome[:class], comma-separated.
func Outcomes(r *chain.Record) string {
	var parts []string
	for _, a := range r.Attempts {
		s := a.Upstream + ":" + a.Outcome
		if a.Class != "" {
			s += ":" + a.Class
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ",")
}

// PEMCert is c as a PEM block, for a ca_file.
func PEMCert(c *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
}

// CloudServer serves a cloud fake over loopback TLS, and returns its URL
// and a PEM file of its certificate for the upstream's ca_file.
func CloudServer(tb testing.TB, h http.Handler) (url, caFile string) {
	tb.Helper()
	srv := httptest.NewUnstartedServer(h)
	srv.EnableHTTP2 = true
	StartTLS(srv)
	tb.Cleanup(srv.Close)
	caFile = filepath.Join(tb.TempDir(), "cloud-ca.pem")
	if err := os.WriteFile(caFile, PEMCert(srv.Certificate()), 0o644); err != nil {
		tb.Fatal(err)
	}
	return srv.URL, caFile
}

var appPaths = map[rewrite.Shape]string{rewrite.OpenAI: "/v1/chat/completions", rewrite.Anthropic: "/v1/messages", rewrite.Gemini: "/v1beta/models/*"}

// CloudPolicy routes the app's vendor host to a failing primary of the
// app's shape, then to the cloud upstream described by backup (a JSON
// object without the closing brace's neighbours).
func CloudPolicy(app rewrite.Shape, primary *Vendor, backup string) string {
	return fmt.Sprintf(`{
  "upstreams": {
    "primary": {"shape": %q, "base_url": %q, "ca_file": %q, "auth": {"from": "client"}},
    "backup":  %s
  },
  "routes": [{"name": "r", "match": {"host": %q, "path": %q}, "chain": ["primary", "backup"]}]
}`, app, primary.BaseURL(), primary.CAFile, backup, app.DefaultHost(), appPaths[app])
}

// AWSSharedCredentials points detour's AWS credential chain at a shared
// credentials file of the test's own (and away from anything on the
// machine: no env keys, no profile, no instance metadata). It sets the
// process environment, so its tests cannot run in parallel.
func AWSSharedCredentials(t *testing.T, keyID, secret string) {
	dir := t.TempDir()
	creds := filepath.Join(dir, "credentials")
	os.WriteFile(creds, []byte("[default]\naws_access_key_id = "+keyID+"\naws_secret_access_key = "+secret+"\n"), 0o600)
	os.WriteFile(filepath.Join(dir, "config"), nil, 0o600)
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", creds)
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "config"))
	for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_DEFAULT_PROFILE",
		"AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN", "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"} {
		t.Setenv(k, "")
	}
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
}

// ServiceAccountFile writes a service-account key file for email whose
// token_uri is vx's token endpoint, served over plain loopback HTTP, so that
// detour's OAuth2 JWT grant runs for real against the fake.
func ServiceAccountFile(tb testing.TB, vx *fakevendor.Vertex, email string, key *rsa.PrivateKey) string {
	tb.Helper()
	tokenSrv := httptest.NewServer(vx)
	tb.Cleanup(tokenSrv.Close)
	saFile := filepath.Join(tb.TempDir(), "sa.json")
	if err := os.WriteFile(saFile, fakevendor.ServiceAccountJSON(email, "proj-1", tokenSrv.URL+"/token", key), 0o600); err != nil {
		tb.Fatal(err)
	}
	return saFile
}

// serviceAccountPEM holds the service-account keys of the Vertex tests:
// fixed 2048-bit keys made for these tests and trusted by nothing else,
// because generating one under -race costs 0.1 to 1 s of CPU (the search for
// primes is random). Two are enough: a test that needs a key the endpoint
// does not trust takes the other one.
//
//go:embed testdata/service-account-0.pem testdata/service-account-1.pem
var serviceAccountPEM embed.FS

// rsaKeys are the parsed keys, once per test binary: a test reads its key
// (the fake token endpoint checks signatures with the public half) without
// changing it.
var rsaKeys [2]func() (*rsa.PrivateKey, error)

func init() {
	for i := range rsaKeys {
		rsaKeys[i] = sync.OnceValues(func() (*rsa.PrivateKey, error) {
			file := fmt.Sprintf("testdata/service-account-%d.pem", i)
			data, err := serviceAccountPEM.ReadFile(file)
			if err != nil {
				return nil, err
			}
			block, _ := pem.Decode(data)
			if block == nil {
				return nil, fmt.Errorf("%s: no PEM block", file)
			}
			key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", file, err)
			}
			rsaKey, ok := key.(*rsa.PrivateKey)
			if !ok || rsaKey.N.BitLen() != 2048 {
				return nil, fmt.Errorf("%s: want a 2048-bit RSA key", file)
			}
			return rsaKey, nil
		})
	}
}

// ServiceAccountKey returns shared service-account key i (0 or 1).
func ServiceAccountKey(tb testing.TB, i int) *rsa.PrivateKey {
	tb.Helper()
	key, err := rsaKeys[i]()
	if err != nil {
		tb.Fatal(err)
	}
	return key
}
