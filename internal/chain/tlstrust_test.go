package chain_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/detour-proxy/detour/internal/detourtest"
	"github.com/detour-proxy/detour/internal/mitm"
	"github.com/detour-proxy/detour/rewrite"
)

// An upstream refused at the TLS handshake says why and what to change:
// which roots did not know its certificate (the system roots, or those and
// ca_file PATH) and that ca_file is the fix — in the attempt's reason (so
// in the log line) and in the error message the app gets.
func TestUntrustedUpstreamNamesTheRootsAndCAFile(t *testing.T) {
	t.Parallel()
	v := detourtest.NewVendor(t, rewrite.OpenAI, "a")
	// A CA that did not sign the fake vendor's certificate.
	dir := t.TempDir()
	otherCA := filepath.Join(dir, "other-ca.pem")
	if _, _, _, err := mitm.LoadOrCreate(otherCA, filepath.Join(dir, "other-ca-key.pem")); err != nil {
		t.Fatal(err)
	}
	plain := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(plain.Close)
	port := v.Server.URL[strings.LastIndex(v.Server.URL, ":")+1:]

	for _, tc := range []struct {
		name, baseURL, caFile string
		want                  []string
	}{
		{"no ca_file", v.BaseURL(), "", []string{
			"unreachable tls: the certificate of " + v.Server.Listener.Addr().String() + " is signed by an authority the system roots do not know",
			"set upstreams.a.ca_file to a PEM file of the CA that signed it",
		}},
		{"a ca_file of another CA", v.BaseURL(), otherCA, []string{
			"neither the system roots nor ca_file " + otherCA + " hold",
			"fix upstreams.a.ca_file",
		}},
		{"a name the certificate is not for", "https://localhost:" + port + "/v1", v.CAFile, []string{
			"the certificate of localhost:" + port + " is not valid for that name",
			"upstreams.a.base_url",
		}},
		{"plain HTTP behind https://", "https://" + plain.Listener.Addr().String() + "/v1", "", []string{
			"did not answer in TLS", "start with http://",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			up := fmt.Sprintf(`"a": {"shape": "openai", "base_url": %q, "auth": {"from": "client"}}`, tc.baseURL)
			if tc.caFile != "" {
				up = fmt.Sprintf(`"a": {"shape": "openai", "base_url": %q, "ca_file": %q, "auth": {"from": "client"}}`, tc.baseURL, tc.caFile)
			}
			r := newRunner(t, "api.openai.com", openaiPolicy([]string{up}, `["a"]`, ""))
			resp := post(t, r.srv.URL+"/v1/chat/completions", `{"model":"gpt-4o","messages":[]}`)
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusBadGateway {
				t.Errorf("status %d; want 502", resp.StatusCode)
			}
			at := r.record(t).Attempts[0]
			if at.Class != "unreachable" {
				t.Errorf("class %q; want unreachable", at.Class)
			}
			for _, w := range tc.want {
				if !strings.Contains(at.Reason, w) {
					t.Errorf("attempt reason lacks %q:\n%s", w, at.Reason)
				}
				// The app's message is JSON: its quotes and slashes are as
				// written here, none in the wanted text needs escaping.
				if !strings.Contains(string(body), w) {
					t.Errorf("the app's error lacks %q:\n%s", w, body)
				}
			}
			if v.Calls() != 0 {
				t.Errorf("the fake vendor was called %d times; the handshake must fail first", v.Calls())
			}
		})
	}
}
