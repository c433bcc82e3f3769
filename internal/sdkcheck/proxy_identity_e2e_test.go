package sdkcheck

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3/option"
	"google.golang.org/genai"

	"github.com/detour-proxy/detour/internal/detourtest"
	fv "github.com/detour-proxy/detour/internal/fakevendor"
	"github.com/detour-proxy/detour/rewrite"
)

// appIdentity is what each official SDK sends to name the app's account
// besides its key, with a session cookie the app's HTTP client holds.
var appIdentity = map[rewrite.Shape]map[string]string{
	rewrite.OpenAI: {
		"Cookie":              "session=app-cookie",
		"OpenAI-Organization": "org-app",
		"OpenAI-Project":      "proj_app",
	},
	rewrite.Anthropic: {
		"Cookie":                    "session=app-cookie",
		"Anthropic-Workspace-Id":    "wrkspc_app",
		"Anthropic-User-Profile-Id": "uprof_app",
	},
	rewrite.Gemini: {
		"Cookie":              "session=app-cookie",
		"X-Goog-User-Project": "app-quota-project",
	},
}

// identityPolicy chains, for the app's vendor host: the primary with the
// app's own key, a backup of the app's shape with detour's key from a file,
// and a backup of another shape, also with detour's key. The keys are files
// rather than environment variables so that the test can run in parallel.
func identityPolicy(t *testing.T, app rewrite.Shape, primary, same, other *detourtest.Vendor) string {
	t.Helper()
	dir := t.TempDir()
	sameKey, otherKey := filepath.Join(dir, "same.key"), filepath.Join(dir, "other.key")
	for file, key := range map[string]string{sameKey: "detour-same-key", otherKey: "detour-other-key"} {
		if err := os.WriteFile(file, []byte(key+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	path := map[rewrite.Shape]string{rewrite.OpenAI: "/v1/chat/completions", rewrite.Anthropic: "/v1/messages", rewrite.Gemini: "/v1beta/models/*"}[app]
	up := other.Vendor.Shape()
	return fmt.Sprintf(`{
  "upstreams": {
    "primary": {"shape": %q, "base_url": %q, "ca_file": %q, "auth": {"from": "client"}},
    "same":    {"shape": %q, "base_url": %q, "ca_file": %q, "auth": {"file": %q}},
    "other":   {"shape": %q, "base_url": %q, "ca_file": %q, "auth": {"file": %q}, "models": {"*": %q}}
  },
  "routes": [{"name": "r", "match": {"host": %q, "path": %q}, "chain": ["primary", "same", "other"]}]
}`, app, primary.BaseURL(), primary.CAFile,
		app, same.BaseURL(), same.CAFile, sameKey,
		up, other.BaseURL(), other.CAFile, otherKey, upstreamModel[up],
		app.DefaultHost(), path)
}

// TestAppIdentityGoesOnlyWithTheAppKey: the cookie and the org, project
// and workspace headers each official SDK sends reach the upstream that
// takes the app's own key, and neither a backup of the app's shape with
// detour's key nor one of another shape.
func TestAppIdentityGoesOnlyWithTheAppKey(t *testing.T) {
	t.Parallel()
	for _, app := range rewrite.Shapes {
		t.Run(string(app), func(t *testing.T) {
			t.Parallel()
			primary := detourtest.NewVendor(t, app, "primary")
			same := detourtest.NewVendor(t, app, "same")
			other := detourtest.NewVendor(t, otherShape(app), "other")
			primary.Script(fv.Fault{Kind: fv.Status, Status: 503, Class: fv.ClassOverloaded})
			same.Script(fv.Fault{Kind: fv.Status, Status: 503, Class: fv.ClassOverloaded})
			h := detourtest.Start(t, identityPolicy(t, app, primary, same, other))

			if text := askWithIdentity(t, app, h); text != "Hello from other." {
				t.Fatalf("answer %q; want the last backup's", text)
			}
			for _, v := range []*detourtest.Vendor{primary, same, other} {
				if n := len(v.Requests()); n != 1 {
					t.Fatalf("%s got %d requests; want 1", v.Name(), n)
				}
			}
			for k, want := range appIdentity[app] {
				if got := primary.Requests()[0].Header.Get(k); got != want {
					t.Errorf("primary (auth from client) %s = %q; want the app's %q", k, got, want)
				}
				for _, v := range []*detourtest.Vendor{same, other} {
					if got := v.Requests()[0].Header.Get(k); got != "" {
						t.Errorf("%s (detour's key) got %s %q; want none", v.Name(), k, got)
					}
				}
			}
		})
	}
}

// askWithIdentity asks a question with the app's SDK, sending
// appIdentity[app] the way that SDK sends each header, and returns the
// answer's text.
func askWithIdentity(t *testing.T, app rewrite.Shape, h *detourtest.Harness) string {
	t.Helper()
	id := appIdentity[app]
	switch app {
	case rewrite.OpenAI:
		got, err := openaiThrough(h).Chat.Completions.New(detourtest.TestContext(t), chatParams(),
			option.WithOrganization(id["OpenAI-Organization"]),
			option.WithProject(id["OpenAI-Project"]),
			option.WithHeader("Cookie", id["Cookie"]))
		if err != nil {
			t.Fatal(err)
		}
		return got.Choices[0].Message.Content
	case rewrite.Anthropic:
		p := messageParams()
		p.WorkspaceID = anthropic.String(id["Anthropic-Workspace-Id"])
		p.UserProfileID = anthropic.String(id["Anthropic-User-Profile-Id"])
		got, err := anthropicThrough(h).Messages.New(detourtest.TestContext(t), p, aoption.WithHeader("Cookie", id["Cookie"]))
		if err != nil {
			t.Fatal(err)
		}
		return got.Content[0].Text
	}
	c, err := genai.NewClient(context.Background(), &genai.ClientConfig{
		APIKey: "gemini-app-key", Backend: genai.BackendGeminiAPI, HTTPClient: h.Client(),
		HTTPOptions: genai.HTTPOptions{
			BaseURL: "https://generativelanguage.googleapis.com/",
			Headers: http.Header{"Cookie": {id["Cookie"]}, "X-Goog-User-Project": {id["X-Goog-User-Project"]}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.Models.GenerateContent(detourtest.TestContext(t), "gemini-2.5-pro", genai.Text("Say hello."), nil)
	if err != nil {
		t.Fatal(err)
	}
	return got.Text()
}
