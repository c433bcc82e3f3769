package devrun

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/detour-proxy/detour/internal/mitm"
)

// noProxy keeps loopback traffic off the proxy: an app's calls to its own
// local services (a database, a dev server, a local model) must not go
// through detour, whose egress policy refuses them by default. The cloud
// metadata address and link-local go direct too: a cloud SDK fetches its
// credentials there, which detour refuses to proxy.
const noProxy = "localhost,127.0.0.1,::1,169.254.169.254,169.254.0.0/16"

// vars are the values detour gives CMD.
type vars struct {
	Proxy  string // http://127.0.0.1:PORT
	Admin  string // http://127.0.0.1:PORT, or "" when the admin listener is off
	Bundle string // system roots + detour CA
	NodeCA string // detour CA (and any certificates NODE_EXTRA_CA_CERTS named before)
	// BaseURLs are the SDK base-URL variables to set (baseURLs), none
	// that the user had set.
	BaseURLs [][2]string
	// JavaOptions is the whole JAVA_TOOL_OPTIONS (the user's value and
	// detour's properties, javaToolOptions); "" sets none.
	JavaOptions string
}

// childEnv returns base with detour's variables set, replacing any value
// base had for them; everything else is inherited unchanged.
//
// Both spellings of the proxy variables are set because runtimes disagree:
// curl reads only the lowercase http_proxy, Go and Python read either, and
// some tools only the uppercase. The bundle goes into every variable that
// replaces a trust store (SSL_CERT_FILE: Go, OpenSSL, httpx; REQUESTS_CA_BUNDLE:
// requests; CURL_CA_BUNDLE: curl), and NODE_EXTRA_CA_CERTS gets detour's CA
// alone because Node adds it to its built-in roots. NODE_USE_ENV_PROXY=1
// makes Node (≥ 22.21 / 24.5) honour HTTPS_PROXY at all; older Node is
// reached through the SDK base-URL variables, and Java through
// JAVA_TOOL_OPTIONS (java.go).
func childEnv(base []string, v vars) []string {
	set := [][2]string{
		{"HTTPS_PROXY", v.Proxy}, {"https_proxy", v.Proxy},
		{"HTTP_PROXY", v.Proxy}, {"http_proxy", v.Proxy},
		{"NO_PROXY", noProxy}, {"no_proxy", noProxy},
		{"SSL_CERT_FILE", v.Bundle},
		{"REQUESTS_CA_BUNDLE", v.Bundle},
		{"CURL_CA_BUNDLE", v.Bundle},
		{"NODE_EXTRA_CA_CERTS", v.NodeCA},
		{"NODE_USE_ENV_PROXY", "1"},
		{"DETOUR_PROXY_URL", v.Proxy},
	}
	set = append(set, v.BaseURLs...)
	if v.JavaOptions != "" {
		set = append(set, [2]string{"JAVA_TOOL_OPTIONS", v.JavaOptions})
	}
	if v.Admin != "" {
		set = append(set, [2]string{"DETOUR_ADMIN_URL", v.Admin})
	}
	ours := make(map[string]bool, len(set)+1)
	for _, kv := range set {
		ours[kv[0]] = true
	}
	// A DETOUR_ADMIN_URL inherited from an outer run would point at the
	// wrong detour; drop it even when this run has no admin listener.
	ours["DETOUR_ADMIN_URL"] = true
	env := make([]string, 0, len(base)+len(set))
	for _, kv := range base {
		name, _, _ := strings.Cut(kv, "=")
		if !ours[name] {
			env = append(env, kv)
		}
	}
	for _, kv := range set {
		env = append(env, kv[0]+"="+kv[1])
	}
	return env
}

// trustFiles are the CA files written for CMD.
type trustFiles struct {
	bundle string // system roots + detour CA
	nodeCA string // for NODE_EXTRA_CA_CERTS
	java   string // the bundle as a PKCS12 trust store, for Java
}

// writeTrustFiles writes the trust bundle, Java's trust store (the same
// certificates) and Node's extra-CA file into dir.
// The system roots are read as mitm.WriteBundle reads them: from the
// process's SSL_CERT_FILE when set (a bundle a company already gave its
// developers keeps working), else from the distribution's bundle. Without
// any, the bundle holds detour's CA alone and warning says what that breaks.
// NODE_EXTRA_CA_CERTS is read from env, the environment CMD inherits.
func writeTrustFiles(dir string, ca *mitm.CA, env []string) (trustFiles, string, error) {
	files := trustFiles{bundle: filepath.Join(dir, "ca-bundle.pem"), nodeCA: filepath.Join(dir, "node-extra-ca.pem"), java: filepath.Join(dir, "java-truststore.p12")}
	var warning string
	var bundle bytes.Buffer
	err := mitm.WriteBundle(&bundle, ca, true)
	if errors.Is(err, mitm.ErrNoSystemRoots) {
		warning = "no system CA bundle found: CMD trusts only detour's CA, so HTTPS to hosts detour does not intercept will fail (set SSL_CERT_FILE to a bundle)"
		bundle.Reset()
		err = mitm.WriteBundle(&bundle, ca, false)
	}
	if err != nil {
		return files, "", fmt.Errorf("detour run: CA bundle: %w", err)
	}
	if err := os.WriteFile(files.bundle, bundle.Bytes(), 0o644); err != nil {
		return files, "", fmt.Errorf("detour run: CA bundle: %w", err)
	}
	if err := writeJavaTrustStore(files.java, bundle.Bytes()); err != nil {
		return files, "", err
	}

	// NODE_EXTRA_CA_CERTS holds one file: keep the certificates the user
	// already had there (a company proxy's CA) beside detour's.
	var node bytes.Buffer
	if prev := lookupEnv(env, "NODE_EXTRA_CA_CERTS"); prev != "" {
		if data, err := os.ReadFile(prev); err == nil {
			node.Write(data)
			if len(data) > 0 && data[len(data)-1] != '\n' {
				node.WriteByte('\n')
			}
		}
	}
	if err := mitm.WriteBundle(&node, ca, false); err != nil {
		return files, "", fmt.Errorf("detour run: CA file: %w", err)
	}
	if err := os.WriteFile(files.nodeCA, node.Bytes(), 0o644); err != nil {
		return files, "", fmt.Errorf("detour run: CA file: %w", err)
	}
	return files, warning, nil
}

// lookupEnv returns the last value of name in env ("" when absent): the
// one a child process sees.
func lookupEnv(env []string, name string) string {
	val := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, name+"="); ok {
			val = v
		}
	}
	return val
}
