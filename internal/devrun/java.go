package devrun

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"

	"software.sslmate.com/src/go-pkcs12"
)

// javaNonProxyHosts is noProxy in Java's syntax (http.nonProxyHosts, which
// Java also applies to https): "|" between entries, "*" as a wildcard, and
// IPv6 addresses in brackets as java.net.URI gives them. A CIDR has no
// spelling there; link-local is its 169.254.* prefix.
const javaNonProxyHosts = "localhost|127.*|[::1]|169.254.*"

// encodeJavaTrustStore encodes the certificates of the PEM bundle (the
// system roots and detour's CA, as written for SSL_CERT_FILE) as a PKCS12
// trust store, the format Java reads without a conversion step: a PEM file
// is not a trust store to Java.
//
// The store is passwordless (no MAC, no encryption): it holds only public
// certificates, so a password would protect nothing, and without one the JVM
// needs no javax.net.ssl.trustStorePassword, which would otherwise sit in
// JAVA_TOOL_OPTIONS for every process to read. Java 17 reads such a file (it
// was checked with keytool and java.net.http.HttpClient). Each entry has an
// alias of its own: the library's default, the subject, is not unique across
// a distribution's roots, and Java would keep only one of the duplicates.
func encodeJavaTrustStore(bundle []byte) ([]byte, error) {
	var entries []pkcs12.TrustStoreEntry
	for rest := bundle; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			// A root Go cannot parse is one Java would not get either way;
			// the others still make a usable store.
			continue
		}
		entries = append(entries, pkcs12.TrustStoreEntry{Cert: cert, FriendlyName: fmt.Sprintf("root-%03d", len(entries))})
	}
	if len(entries) == 0 {
		return nil, fmt.Errorf("detour run: Java trust store: no certificates in the bundle")
	}
	// The bundle ends with detour's CA: name it so that keytool -list shows
	// which entry it is.
	entries[len(entries)-1].FriendlyName = "detour-ca"
	data, err := pkcs12.Passwordless.EncodeTrustStoreEntries(entries, "")
	if err != nil {
		return nil, fmt.Errorf("detour run: Java trust store: %w", err)
	}
	return data, nil
}

// javaStoreMemo is the trust store last encoded and the digest of the
// bundle it was encoded from. A process that runs commands one after
// another with one CA and one set of system roots (a caller embedding Run,
// detour's own tests) parses the roots and encodes the store once: the
// store is a function of the bundle's bytes alone, and another bundle (a
// new CA, changed roots) is encoded afresh.
var javaStoreMemo struct {
	sync.Mutex
	sum     [sha256.Size]byte
	data    []byte
	encodes int // stores encoded, for the test of the memo
}

// writeJavaTrustStore writes the Java trust store of bundle (see
// encodeJavaTrustStore) to path, encoding it only when the last store
// encoded was of another bundle.
func writeJavaTrustStore(path string, bundle []byte) error {
	sum := sha256.Sum256(bundle)
	m := &javaStoreMemo
	m.Lock()
	data := m.data
	if data == nil || m.sum != sum {
		var err error
		if data, err = encodeJavaTrustStore(bundle); err != nil {
			m.Unlock()
			return err
		}
		m.sum, m.data = sum, data
		m.encodes++
	}
	m.Unlock()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return fmt.Errorf("detour run: Java trust store: %w", err)
	}
	return nil
}

// javaToolOptions returns the JAVA_TOOL_OPTIONS CMD gets: the user's own
// value (user, "" when unset) kept first, then detour's system properties.
// Java ignores HTTPS_PROXY and cannot use a PEM bundle, so these are the
// only way to reach an unmodified JVM: every JVM reads JAVA_TOOL_OPTIONS
// before the command line (and says so on stderr with "Picked up
// JAVA_TOOL_OPTIONS", which is the JVM's own line). Properties given later
// win, so detour's override any the user's value sets for the same names,
// as HTTPS_PROXY replaces an inherited proxy; a -D on the java command line
// still wins over both. java.net.http.HttpClient and HttpURLConnection both
// take the proxy from ProxySelector.getDefault(), which reads these
// properties.
func javaToolOptions(user, proxyHostPort, trustStore string) string {
	host, port, _ := net.SplitHostPort(proxyHostPort)
	props := []string{
		"-Dhttps.proxyHost=" + host, "-Dhttps.proxyPort=" + port,
		"-Dhttp.proxyHost=" + host, "-Dhttp.proxyPort=" + port,
		"-Dhttp.nonProxyHosts=" + javaNonProxyHosts,
		javaOption("-Djavax.net.ssl.trustStore=" + trustStore),
		"-Djavax.net.ssl.trustStoreType=PKCS12",
	}
	opts := strings.Join(props, " ")
	if strings.TrimSpace(user) != "" {
		opts = user + " " + opts
	}
	return opts
}

// javaOption quotes an option that contains white space: the JVM splits
// JAVA_TOOL_OPTIONS at white space except inside quotes (a temporary
// directory may have a space in its name).
func javaOption(s string) string {
	if strings.ContainsAny(s, " \t\n") {
		return `"` + s + `"`
	}
	return s
}
