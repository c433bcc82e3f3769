package sdkcheck

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/detour-proxy/detour/internal/detourtest"
	fv "github.com/detour-proxy/detour/internal/fakevendor"
	"github.com/detour-proxy/detour/rewrite"
)

// TestAzureOpenAIBackupWithOfficialSDKs: apps of every shape fall over to
// an Azure OpenAI deployment, streamed and not, with a tool round trip; the
// fake checks the deployment path, api-version and api-key.
func TestAzureOpenAIBackupWithOfficialSDKs(t *testing.T) {
	t.Parallel()
	for _, app := range rewrite.Shapes {
		for _, stream := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s app, stream %v", app, stream), func(t *testing.T) {
				t.Parallel()
				primary := detourtest.NewVendor(t, app, "primary")
				primary.SetDefault(fv.Fault{Kind: fv.Status, Status: 503, Class: fv.ClassOverloaded})
				az := fv.NewAzure("azure-SECRET-key", "", []string{"prod-4o"}, fv.Options{Name: "backup"})
				url, ca := detourtest.CloudServer(t, az)
				keyFile := filepath.Join(t.TempDir(), "azure.key")
				os.WriteFile(keyFile, []byte("azure-SECRET-key\n"), 0o600)
				h := detourtest.Start(t, detourtest.CloudPolicy(app, primary, fmt.Sprintf(
					`{"shape": "azure-openai", "base_url": %q, "ca_file": %q, "auth": {"file": %q},
					  "models": {"*": "gpt-4o"}, "azure": {"api_version": "2024-10-21", "deployments": {"gpt-4o": "prod-4o"}}}`,
					url, ca, keyFile)))
				c := newAppClient(t, app, h)

				got := c.ask(t, stream, false)
				if got.text != "Hello from backup." {
					t.Fatalf("text = %q; want the Azure backup's answer", got.text)
				}
				got = c.ask(t, stream, true)
				if got.tool != "get_weather" || got.args["city"] != "Paris" {
					t.Fatalf("tool call = %q %v; want get_weather {city: Paris}", got.tool, got.args)
				}
				if final := c.answerTool(t, stream, "sunny"); final.text != fv.ToolResultPrefix+"sunny" {
					t.Errorf("final answer = %q", final.text)
				}
				seen := az.Seen()
				if len(seen) != 3 {
					t.Fatalf("azure saw %d requests; want 3", len(seen))
				}
				for _, s := range seen {
					if s.Deployment != "prod-4o" || s.APIVersion != "2024-10-21" || s.Auth != "api-key" {
						t.Errorf("azure saw %+v; want deployment prod-4o, api-version 2024-10-21, api-key", s)
					}
				}
				for _, r := range az.Requests() {
					if r.Header.Get("Authorization") != "" {
						t.Errorf("azure got an Authorization header %q besides api-key", r.Header.Get("Authorization"))
					}
				}
				rs := h.WaitRecords(t, 3)
				if rs[0].AnsweredBy != "backup" {
					t.Fatalf("answered by %q", rs[0].AnsweredBy)
				}
				if strings.Contains(h.Log(), "SECRET") {
					t.Errorf("the log shows the Azure key:\n%s", h.Log())
				}
			})
		}
	}
}

// TestAzureOpenAIFailureClasses: each of Azure's own error answers gets its
// class, and the class its action, for an openai-go app whose chain is the
// Azure deployment and then an OpenAI backup.
func TestAzureOpenAIFailureClasses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		fail       fv.AzureError
		key        string
		class      string
		answeredBy string
		status     int // the app's status when the chain stopped
	}{
		{fv.AzureContentFilter, "k", "content_filter", "", 400},
		{fv.AzureRateLimit, "k", "rate_limited", "backup", 0},
		{fv.AzureDailyQuota, "k", "quota_exhausted", "backup", 0},
		{"", "wrong-key", "auth", "", 401},
	} {
		t.Run(tc.class, func(t *testing.T) {
			t.Parallel()
			az := fv.NewAzure("k", "", []string{"gpt-4o"}, fv.Options{Name: "azure"})
			if tc.fail != "" {
				az.Fail(tc.fail)
			}
			url, ca := detourtest.CloudServer(t, az)
			backup := detourtest.NewVendor(t, rewrite.OpenAI, "backup")
			keyFile := filepath.Join(t.TempDir(), "azure.key")
			os.WriteFile(keyFile, []byte(tc.key), 0o600)
			backupKey := filepath.Join(t.TempDir(), "backup.key")
			os.WriteFile(backupKey, []byte("b"), 0o600)
			h := detourtest.Start(t, fmt.Sprintf(`{
  "upstreams": {
    "azure":  {"shape": "azure-openai", "base_url": %q, "ca_file": %q, "auth": {"file": %q}, "azure": {"api_version": "2024-10-21"}},
    "backup": {"shape": "openai", "base_url": %q, "ca_file": %q, "auth": {"file": %q}}
  },
  "errors": {"classes": {"rate_limited": {"retries": 0, "then": "fallback"}}},
  "routes": [{"name": "r", "match": {"host": "api.openai.com", "path": "/v1/chat/completions"}, "chain": ["azure", "backup"]}]
}`, url, ca, keyFile, backup.BaseURL(), backup.CAFile, backupKey))
			req, _ := http.NewRequest("POST", "https://api.openai.com/v1/chat/completions",
				strings.NewReader(`{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`))
			req.Header.Set("Authorization", "Bearer app-key")
			req.Header.Set("Content-Type", "application/json")
			resp, err := h.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			rec := h.WaitRecords(t, 1)[0]
			if got := rec.Attempts[0].Class; got != tc.class {
				t.Errorf("class = %q (%s); want %q", got, rec.Attempts[0].Reason, tc.class)
			}
			if rec.AnsweredBy != tc.answeredBy {
				t.Errorf("answered by %q; want %q", rec.AnsweredBy, tc.answeredBy)
			}
			if tc.status != 0 && resp.StatusCode != tc.status {
				t.Errorf("app got %d; want Azure's %d", resp.StatusCode, tc.status)
			}
		})
	}
}

// TestAzureOpenAIEntraTokenFile: with azure.token_file the token goes as a
// bearer (no api-key), and a rewritten file is read again without a policy
// reload.
func TestAzureOpenAIEntraTokenFile(t *testing.T) {
	t.Parallel()
	az := fv.NewAzure("", "entra-token-1", []string{"gpt-4o"}, fv.Options{Name: "azure"})
	url, ca := detourtest.CloudServer(t, az)
	tokenFile := filepath.Join(t.TempDir(), "token")
	os.WriteFile(tokenFile, []byte("entra-token-1\n"), 0o600)
	h := detourtest.Start(t, fmt.Sprintf(`{
  "upstreams": {"azure": {"shape": "azure-openai", "base_url": %q, "ca_file": %q, "azure": {"api_version": "2025-04-01-preview", "token_file": %q}}},
  "routes": [{"name": "r", "match": {"host": "api.openai.com", "path": "/v1/chat/completions"}, "chain": ["azure"]}]
}`, url, ca, tokenFile))
	c := openaiThrough(h)
	ask := func() {
		t.Helper()
		a := &openaiApp{c: c}
		if got := a.ask(t, false, false); got.text != "Hello from azure." {
			t.Fatalf("text = %q", got.text)
		}
	}
	ask()
	// The token expires and the refresher rewrites the file: the next
	// request carries the new one, with no policy reload.
	az.SetToken("entra-token-22")
	os.WriteFile(tokenFile, []byte("entra-token-22\n"), 0o600)
	ask()
	s := az.Seen()
	if len(s) != 2 || s[0].Auth != "bearer" || s[1].Auth != "bearer" {
		t.Fatalf("azure saw %+v; want two bearer requests", s)
	}
	if rs := az.Requests(); rs[1].Header.Get("Api-Key") != "" {
		t.Errorf("an api-key was sent with the token")
	}
	if strings.Contains(h.Log(), "entra-token") {
		t.Errorf("the log shows the token:\n%s", h.Log())
	}
}
