package proxy_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/detour-proxy/detour/internal/detourtest"
	fv "github.com/detour-proxy/detour/internal/fakevendor"
	"github.com/detour-proxy/detour/internal/testsupport"
	"github.com/detour-proxy/detour/rewrite"
)

// cloudProbe is the probe section every cloud test gives its upstream:
// the shortest interval the policy takes, one-token completions.
const cloudProbe = `"probe": {"interval": "1s", "timeout": "900ms", "request": "completion"}`

// probeState is the backup's breaker and probe as /status shows them.
type probeState struct {
	breaker, last string
	passed        int
}

func backupProbe(t *testing.T, h *detourtest.Harness) probeState {
	t.Helper()
	resp, err := http.Get(h.AdminURL.String() + "/status")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var st struct {
		Upstreams map[string]struct {
			Breaker struct{ State string }
			Probe   *struct {
				LastResult string `json:"last_result"`
				Passed     int
			}
		}
	}
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatalf("/status: %v\n%s", err, b)
	}
	u := st.Upstreams["backup"]
	if u.Probe == nil {
		return probeState{breaker: u.Breaker.State}
	}
	return probeState{breaker: u.Breaker.State, last: u.Probe.LastResult, passed: u.Probe.Passed}
}

// failThenPass waits for the backup's first probe to fail (the fake was
// told to fail it) and open its breaker, then for a later probe to pass.
func failThenPass(t *testing.T, h *detourtest.Harness) {
	t.Helper()
	var s probeState
	if !testsupport.Poll(10*time.Second, func() bool {
		s = backupProbe(t, h)
		return s.breaker == "open" && (s.last == "server_error" || s.last == "overloaded")
	}) {
		t.Fatalf("the failed probe did not open the breaker: %+v\n%s", s, h.Log())
	}
	if !testsupport.Poll(10*time.Second, func() bool {
		s = backupProbe(t, h)
		return s.last == "ok" && s.passed >= 1 && s.breaker != "open"
	}) {
		t.Fatalf("no passing probe after the failure: %+v\n%s", s, h.Log())
	}
}

// An Azure OpenAI upstream is probed with a one-token completion at its
// deployment, with its api-key: a 503 opens its breaker, the next probe
// lets it recover.
func TestAzureOpenAIUpstreamIsProbed(t *testing.T) {
	t.Parallel()
	primary := detourtest.NewVendor(t, rewrite.OpenAI, "primary")
	az := fv.NewAzure("azure-SECRET-key", "", []string{"prod-4o"}, fv.Options{Name: "backup"})
	az.Script(fv.Fault{Kind: fv.Status, Status: 503, Class: fv.ClassOverloaded})
	url, ca := detourtest.CloudServer(t, az)
	keyFile := filepath.Join(t.TempDir(), "azure.key")
	if err := os.WriteFile(keyFile, []byte("azure-SECRET-key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	h := detourtest.Start(t, detourtest.CloudPolicy(rewrite.OpenAI, primary, fmt.Sprintf(
		`{"shape": "azure-openai", "base_url": %q, "ca_file": %q, "auth": {"file": %q}, %s,
		  "models": {"*": "gpt-4o"}, "azure": {"api_version": "2024-10-21", "deployments": {"gpt-4o": "prod-4o"}}}`,
		url, ca, keyFile, cloudProbe)))
	failThenPass(t, h)
	for _, s := range az.Seen() {
		if s.Deployment != "prod-4o" || s.APIVersion != "2024-10-21" || s.Auth != "api-key" {
			t.Errorf("azure saw %+v; want deployment prod-4o, api-version 2024-10-21, api-key", s)
		}
	}
	for _, r := range az.Requests() {
		if r.Header.Get("User-Agent") != "detour-probe" || r.Header.Get("Authorization") != "" {
			t.Errorf("probe: User-Agent %q, Authorization %q; want detour-probe and api-key alone",
				r.Header.Get("User-Agent"), r.Header.Get("Authorization"))
		}
	}
	if primary.Calls() != 0 {
		t.Errorf("the unprobed primary got %d calls", primary.Calls())
	}
}

// A Bedrock upstream is probed with a signed one-token Converse call: a
// ServiceUnavailableException opens its breaker, the next probe lets it
// recover. Not parallel: the AWS credential chain reads the environment.
func TestBedrockUpstreamIsProbed(t *testing.T) {
	detourtest.AWSSharedCredentials(t, "AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYSECRETKEY")
	primary := detourtest.NewVendor(t, rewrite.Anthropic, "primary")
	br := fv.NewBedrock("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYSECRETKEY", "us-west-2", fv.Options{Name: "backup"})
	br.Fail(fv.BedrockUnavailable)
	url, ca := detourtest.CloudServer(t, br)
	h := detourtest.Start(t, detourtest.CloudPolicy(rewrite.Anthropic, primary, fmt.Sprintf(
		`{"shape": "bedrock", "base_url": %q, "ca_file": %q, "bedrock": {"region": "us-west-2"}, "models": {"*": %q}, %s}`,
		url, ca, detourtest.BedrockModel, cloudProbe)))
	failThenPass(t, h)
	seen := br.Seen()
	if len(seen) < 2 {
		t.Fatalf("bedrock saw %d requests; want the failed probe and a passing one", len(seen))
	}
	for _, s := range seen {
		var body struct {
			Messages        []json.RawMessage
			InferenceConfig struct{ MaxTokens int }
		}
		if err := json.Unmarshal(s.Body, &body); err != nil || len(body.Messages) != 1 || body.InferenceConfig.MaxTokens != 1 {
			t.Errorf("probe body %s (%v); want one message and maxTokens 1", s.Body, err)
		}
		if !s.Signed || s.Model != detourtest.BedrockModel || s.Stream || s.Header.Get("User-Agent") != "detour-probe" {
			t.Errorf("bedrock saw model %q stream %v signed %v, User-Agent %q; want a signed Converse call to %q by detour-probe",
				s.Model, s.Stream, s.Signed, s.Header.Get("User-Agent"), detourtest.BedrockModel)
		}
	}
	if strings.Contains(h.Log(), "SECRETKEY") {
		t.Error("the log shows the AWS secret")
	}
}

// Gemini and Claude on Vertex are probed with a one-token completion and a
// service account's access token.
func TestVertexUpstreamsAreProbed(t *testing.T) {
	t.Parallel()
	key := detourtest.ServiceAccountKey(t, 0)
	const email = "detour@proj-1.iam.gserviceaccount.com"
	for _, pub := range []rewrite.Shape{rewrite.Gemini, rewrite.Anthropic} {
		t.Run(string(pub), func(t *testing.T) {
			t.Parallel()
			primary := detourtest.NewVendor(t, pub, "primary")
			vx := fv.NewVertex("proj-1", "us-east5", email, &key.PublicKey, fv.Options{Name: "backup"})
			inner := map[rewrite.Shape]*fv.Vendor{rewrite.Gemini: vx.Gemini, rewrite.Anthropic: vx.Anthropic}[pub]
			inner.Script(fv.Fault{Kind: fv.Status, Status: 503, Class: fv.ClassOverloaded})
			url, ca := detourtest.CloudServer(t, vx)
			saFile := detourtest.ServiceAccountFile(t, vx, email, key)
			model := map[rewrite.Shape]string{rewrite.Gemini: "gemini-2.5-flash", rewrite.Anthropic: "claude-sonnet-4-5@20250929"}[pub]
			h := detourtest.Start(t, detourtest.CloudPolicy(pub, primary, fmt.Sprintf(
				`{"shape": %q, "base_url": %q, "ca_file": %q, "models": {"*": %q}, %s,
				  "vertex": {"project": "proj-1", "region": "us-east5", "credentials_file": %q}}`,
				pub, url, ca, model, cloudProbe, saFile)))
			failThenPass(t, h)
			wantPub := map[rewrite.Shape]string{rewrite.Gemini: "google", rewrite.Anthropic: "anthropic"}[pub]
			wantMethod := map[rewrite.Shape]string{rewrite.Gemini: "generateContent", rewrite.Anthropic: "rawPredict"}[pub]
			for _, s := range vx.Seen() {
				if !s.Valid || s.Model != model || s.Publisher != wantPub || s.Method != wantMethod {
					t.Errorf("vertex saw %+v; want a valid token, %s/%s:%s", s, wantPub, model, wantMethod)
				}
			}
		})
	}
}
