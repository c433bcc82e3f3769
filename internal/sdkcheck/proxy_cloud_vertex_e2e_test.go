package sdkcheck

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/detour-proxy/detour/internal/detourtest"
	fv "github.com/detour-proxy/detour/internal/fakevendor"
	"github.com/detour-proxy/detour/rewrite"
)

// TestVertexBackupWithOfficialSDKs: apps of every shape fall over to Gemini
// on Vertex and to Claude on Vertex, streamed and not, with a tool round
// trip. The credentials are a service-account key file made here whose
// token_uri is the fake's token endpoint, so detour's OAuth2 JWT grant
// (internal/cloud/google_jwt.go) runs for real; one token serves every call.
func TestVertexBackupWithOfficialSDKs(t *testing.T) {
	t.Parallel()
	key := detourtest.ServiceAccountKey(t, 0)
	const email = "detour@proj-1.iam.gserviceaccount.com"
	for _, app := range rewrite.Shapes {
		for _, pub := range []rewrite.Shape{rewrite.Gemini, rewrite.Anthropic} {
			for _, stream := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s app, %s on vertex, stream %v", app, pub, stream), func(t *testing.T) {
					t.Parallel()
					primary := detourtest.NewVendor(t, app, "primary")
					primary.SetDefault(fv.Fault{Kind: fv.Status, Status: 503, Class: fv.ClassOverloaded})
					vx := fv.NewVertex("proj-1", "us-east5", email, &key.PublicKey, fv.Options{Name: "backup"})
					url, ca := detourtest.CloudServer(t, vx)
					saFile := detourtest.ServiceAccountFile(t, vx, email, key)
					model := map[rewrite.Shape]string{rewrite.Gemini: "gemini-2.5-flash", rewrite.Anthropic: "claude-sonnet-4-5@20250929"}[pub]
					h := detourtest.Start(t, detourtest.CloudPolicy(app, primary, fmt.Sprintf(
						`{"shape": %q, "base_url": %q, "ca_file": %q, "models": {"*": %q},
						  "vertex": {"project": "proj-1", "region": "us-east5", "credentials_file": %q}}`,
						pub, url, ca, model, saFile)))
					c := newAppClient(t, app, h)
					if got := c.ask(t, stream, false); got.text != "Hello from backup." {
						t.Fatalf("text = %q; want the Vertex backup's answer", got.text)
					}
					got := c.ask(t, stream, true)
					if got.tool != "get_weather" || got.args["city"] != "Paris" {
						t.Fatalf("tool call = %q %v; want get_weather {city: Paris}", got.tool, got.args)
					}
					if final := c.answerTool(t, stream, "sunny"); final.text != fv.ToolResultPrefix+"sunny" {
						t.Errorf("final answer = %q", final.text)
					}
					seen := vx.Seen()
					if len(seen) != 3 {
						t.Fatalf("vertex saw %d model requests; want 3", len(seen))
					}
					wantPub := map[rewrite.Shape]string{rewrite.Gemini: "google", rewrite.Anthropic: "anthropic"}[pub]
					for _, s := range seen {
						if !s.Valid || s.Model != model || s.Publisher != wantPub {
							t.Errorf("vertex saw %+v; want a valid token, %s/%s", s, wantPub, model)
						}
					}
					if n := vx.TokensIssued(); n != 1 {
						t.Errorf("%d tokens issued; want 1, reused while valid", n)
					}
					if strings.Contains(h.Log(), "ya29.") || strings.Contains(h.Log(), "PRIVATE KEY") {
						t.Errorf("the log shows a credential")
					}
				})
			}
		}
	}
}

// TestVertexTokenRefreshedBeforeExpiry: a token about to expire (here
// within detour's 10 s early-expiry margin as soon as it is issued) is replaced
// before the next call rather than sent and refused.
func TestVertexTokenRefreshedBeforeExpiry(t *testing.T) {
	t.Parallel()
	key := detourtest.ServiceAccountKey(t, 0)
	const email = "detour@proj-1.iam.gserviceaccount.com"
	vx := fv.NewVertex("proj-1", "global", email, &key.PublicKey, fv.Options{Name: "vertex"})
	vx.TokenLifetime = 5 * time.Second // under detour's 10 s early-expiry margin
	url, ca := detourtest.CloudServer(t, vx)
	saFile := detourtest.ServiceAccountFile(t, vx, email, key)
	h := detourtest.Start(t, fmt.Sprintf(`{
  "upstreams": {"vx": {"shape": "gemini", "base_url": %q, "ca_file": %q, "vertex": {"project": "proj-1", "region": "global", "credentials_file": %q}}},
  "routes": [{"name": "r", "match": {"host": "generativelanguage.googleapis.com", "path": "/v1beta/models/*"}, "chain": ["vx"]}]
}`, url, ca, saFile))
	c := newAppClient(t, rewrite.Gemini, h)
	for range 2 {
		if got := c.ask(t, false, false); got.text != "Hello from vertex." {
			t.Fatalf("text = %q", got.text)
		}
	}
	seen := vx.Seen()
	if len(seen) != 2 || !seen[0].Valid || !seen[1].Valid || seen[0].Token == seen[1].Token {
		t.Errorf("vertex saw %+v; want two valid, different tokens", seen)
	}
}

// TestVertexBadCredentialsFallOver: a service account whose key the token
// endpoint refuses gets no token; the attempt fails without reaching Vertex
// (no request is sent with a missing token), the next upstream answers, and
// the key never shows in the log.
func TestVertexBadCredentialsFallOver(t *testing.T) {
	t.Parallel()
	trusted, other := detourtest.ServiceAccountKey(t, 0), detourtest.ServiceAccountKey(t, 1)
	const email = "detour@proj-1.iam.gserviceaccount.com"
	vx := fv.NewVertex("proj-1", "us-central1", email, &trusted.PublicKey, fv.Options{Name: "vertex"})
	url, ca := detourtest.CloudServer(t, vx)
	saFile := detourtest.ServiceAccountFile(t, vx, email, other)
	backup := detourtest.NewVendor(t, rewrite.Gemini, "backup")
	keyFile := filepath.Join(t.TempDir(), "k")
	os.WriteFile(keyFile, []byte("k"), 0o600)
	h := detourtest.Start(t, fmt.Sprintf(`{
  "upstreams": {
    "vx": {"shape": "gemini", "base_url": %q, "ca_file": %q, "vertex": {"project": "proj-1", "region": "us-central1", "credentials_file": %q}},
    "backup": {"shape": "gemini", "base_url": %q, "ca_file": %q, "auth": {"file": %q}}
  },
  "routes": [{"name": "r", "match": {"host": "generativelanguage.googleapis.com", "path": "/v1beta/models/*"}, "chain": ["vx", "backup"]}]
}`, url, ca, saFile, backup.BaseURL(), backup.CAFile, keyFile))
	c := newAppClient(t, rewrite.Gemini, h)
	if got := c.ask(t, false, false); got.text != "Hello from backup." {
		t.Fatalf("text = %q", got.text)
	}
	if n := len(vx.Seen()); n != 0 || vx.TokensIssued() != 0 {
		t.Errorf("vertex saw %d model requests, issued %d tokens; want none", n, vx.TokensIssued())
	}
	rec := h.WaitRecords(t, 1)[0]
	if rec.AnsweredBy != "backup" || rec.Attempts[0].Class != "unreachable" {
		t.Errorf("answered by %q, first attempt %s (%s)", rec.AnsweredBy, rec.Attempts[0].Class, rec.Attempts[0].Reason)
	}
	if strings.Contains(h.Log(), "PRIVATE KEY") {
		t.Errorf("the log shows the key")
	}
}
