package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/detour-proxy/detour/internal/detourtest"
	"github.com/detour-proxy/detour/rewrite"
)

// readmeProxyExample returns the shell block of the README's "As
// HTTPS_PROXY" section, with its continuation lines joined.
func readmeProxyExample(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(data), "**As HTTPS_PROXY**")
	if !ok {
		t.Fatal(`README.md has no "**As HTTPS_PROXY**" section`)
	}
	_, block, ok := strings.Cut(section, "```sh\n")
	if ok {
		block, _, ok = strings.Cut(block, "```")
	}
	if !ok {
		t.Fatal("the README's HTTPS_PROXY section has no sh block")
	}
	block = regexp.MustCompile(`\\\n\s*`).ReplaceAllString(block, "")
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(block), "\n") {
		// A comment after the command is the reader's, not the shell's
		// business here.
		cmd, _, _ := strings.Cut(l, "#")
		lines = append(lines, strings.Join(strings.Fields(cmd), " "))
	}
	return lines
}

// The README's HTTPS_PROXY example works as written, with curl as the app:
// the CA and the bundle its commands make, and exactly its environment,
// make curl call api.openai.com through detour and trust the answer.
// detourtest's harness stands for `go run . serve &` (same server, on a free
// port instead of 8787) and the built-in CA location is replaced by the
// harness's; everything else is the README's text.
func TestReadmeHTTPSProxyExampleWorksWithCurl(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		if os.Getenv("CI") == "" {
			t.Skip("curl is not installed")
		}
		t.Fatal("curl is not installed; .ci/run must install it")
	}
	t.Parallel()
	lines := readmeProxyExample(t)
	const (
		readmeBundle = "/tmp/detour-bundle.pem"
		readmeCA     = "~/.config/detour/ca.pem"
		readmeProxy  = "http://127.0.0.1:8787"
	)
	want := []string{"go run . ca init", "go run . ca bundle --out " + readmeBundle, "go run . serve &"}
	if len(lines) != len(want)+1 {
		t.Fatalf("the example is %q; want %q and then the app's line", lines, want)
	}
	for i, w := range want {
		if lines[i] != w {
			t.Fatalf("line %d of the example is %q; want %q (this test runs it)", i+1, lines[i], w)
		}
	}
	words := strings.Fields(lines[len(lines)-1])
	if words[len(words)-1] != "your-app" {
		t.Fatalf("the app's line %q does not end with your-app", lines[len(lines)-1])
	}

	vendor := detourtest.NewVendor(t, rewrite.OpenAI, "readme")
	h := detourtest.Start(t, `{"upstreams": {"openai": {"shape": "openai", "base_url": "`+vendor.BaseURL()+`", "ca_file": "`+vendor.CAFile+`", "auth": {"from": "client"}}},
  "routes": [{"name": "chat", "match": {"host": "api.openai.com", "path": "/v1/chat/completions"}, "chain": ["openai"]}]}`)
	caFile := filepath.Join(h.Dir, "ca.pem")
	bundle := filepath.Join(t.TempDir(), "detour-bundle.pem")
	// go run . ca bundle --out /tmp/detour-bundle.pem, for the harness's CA.
	if err := run(context.Background(), []string{"ca", "bundle", "--cert", caFile, "--out", bundle}, &bytes.Buffer{}, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}

	// Only the README's variables say where the proxy and the trust are:
	// none of the test machine's own.
	var base []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch strings.ToUpper(name) {
		case "HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "NO_PROXY", "SSL_CERT_FILE", "SSL_CERT_DIR",
			"CURL_CA_BUNDLE", "REQUESTS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS":
			continue
		}
		base = append(base, kv)
	}
	var readmeEnv []string
	for _, w := range words[:len(words)-1] {
		name, value, ok := strings.Cut(w, "=")
		if !ok {
			t.Fatalf("%q in the app's line is not NAME=VALUE", w)
		}
		value = strings.ReplaceAll(value, readmeProxy, h.ProxyURL.String())
		value = strings.ReplaceAll(value, readmeBundle, bundle)
		value = strings.ReplaceAll(value, readmeCA, caFile)
		readmeEnv = append(readmeEnv, name+"="+value)
	}

	for _, tc := range []struct {
		name string
		drop string
	}{
		{"as written", ""},
		// This machine's curl (OpenSSL) reads SSL_CERT_FILE too; curl on
		// macOS (SecureTransport) or Windows (Schannel) reads only
		// CURL_CA_BUNDLE, and must trust detour's CA all the same.
		{"by a curl that ignores SSL_CERT_FILE", "SSL_CERT_FILE="},
	} {
		env := slices.Clone(base)
		for _, kv := range readmeEnv {
			if tc.drop == "" || !strings.HasPrefix(kv, tc.drop) {
				env = append(env, kv)
			}
		}
		// -q first: no ~/.curlrc.
		cmd := exec.Command("curl", "-q", "-sS", "-i", "--max-time", "30",
			"-H", "Authorization: Bearer sk-test-not-a-real-key",
			"-H", "Content-Type: application/json",
			"-d", `{"model":"gpt-4o","messages":[{"role":"user","content":"Say hello."}]}`,
			"https://api.openai.com/v1/chat/completions")
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("curl with the README's environment %s: %v\n%s\nenvironment from the README: %q", tc.name, err, out, words[:len(words)-1])
			continue
		}
		if !bytes.Contains(out, []byte("Hello from readme.")) || !bytes.Contains(bytes.ToLower(out), []byte("x-detour-answered-by: openai")) {
			t.Errorf("curl with the README's environment %s did not get the vendor's answer through detour:\n%s", tc.name, out)
		}
	}
}
