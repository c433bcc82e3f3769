package mitm

import (
	"bytes"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// ErrNoSystemRoots is returned by WriteBundle when system roots were asked for
// but no system CA bundle was found.
var ErrNoSystemRoots = errors.New("mitm: no system CA bundle found (set SSL_CERT_FILE to one)")

// systemBundlePaths are where Linux distributions keep their PEM root bundle,
// in the order Go's crypto/x509 tries them. A variable so tests can replace it.
var systemBundlePaths = []string{
	"/etc/ssl/certs/ca-certificates.crt",                // Debian, Ubuntu, Gentoo, Alpine
	"/etc/pki/tls/certs/ca-bundle.crt",                  // Fedora, RHEL 6
	"/etc/ssl/ca-bundle.pem",                            // openSUSE
	"/etc/pki/tls/cacert.pem",                           // OpenELEC
	"/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem", // CentOS, RHEL 7+
	"/etc/ssl/cert.pem",                                 // Alpine, macOS
}

// WriteBundle writes a PEM trust bundle to w: the system roots when
// systemRoots is true, then detour's CA.
//
// The system roots are there because the variables apps read a bundle from
// (SSL_CERT_FILE, REQUESTS_CA_BUNDLE, CURL_CA_BUNDLE, ...) replace the trust
// store rather than add to it, and detour intercepts only a few hosts: every
// other host must still verify against the usual roots. They are read from
// SSL_CERT_FILE when set (an unreadable SSL_CERT_FILE is an error), else from
// the first of the usual distribution paths that exists; if none exists the
// error is ErrNoSystemRoots. Only CERTIFICATE blocks are copied, and a copy of
// detour's CA already present (SSL_CERT_FILE pointing at an earlier detour
// bundle) is not repeated. The caller must not write the bundle over the file
// SSL_CERT_FILE names.
//
// With systemRoots false only the CA is written, for variables that append,
// such as NODE_EXTRA_CA_CERTS.
func WriteBundle(w io.Writer, ca *CA, systemRoots bool) error {
	if !systemRoots {
		return writeBundle(w, ca, nil, "")
	}
	roots, from, err := readSystemRoots(os.Getenv("SSL_CERT_FILE"), systemBundlePaths)
	if err != nil {
		return err
	}
	return writeBundle(w, ca, roots, from)
}

// readSystemRoots returns the contents of envFile if set, else of the first
// path in paths that exists, and the file it read.
func readSystemRoots(envFile string, paths []string) ([]byte, string, error) {
	if envFile != "" {
		data, err := os.ReadFile(envFile)
		if err != nil {
			return nil, "", fmt.Errorf("mitm: reading system roots from SSL_CERT_FILE: %w", err)
		}
		return data, envFile, nil
	}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, "", fmt.Errorf("mitm: reading system roots: %w", err)
		}
		return data, p, nil
	}
	return nil, "", ErrNoSystemRoots
}

// writeBundle writes the CERTIFICATE blocks of roots (read from file from),
// then ca, to w in one Write.
func writeBundle(w io.Writer, ca *CA, roots []byte, from string) error {
	if ca == nil || ca.Cert == nil {
		return errors.New("mitm: WriteBundle needs a CA")
	}
	var buf bytes.Buffer
	if from != "" {
		n := 0
		for rest := roots; ; {
			var block *pem.Block
			block, rest = pem.Decode(rest)
			if block == nil {
				break
			}
			if block.Type != "CERTIFICATE" || bytes.Equal(block.Bytes, ca.Cert.Raw) {
				continue
			}
			// Drop headers: a CERTIFICATE block has none that matter, and
			// some parsers reject them.
			if err := pem.Encode(&buf, &pem.Block{Type: block.Type, Bytes: block.Bytes}); err != nil {
				return fmt.Errorf("mitm: encoding system roots: %w", err)
			}
			n++
		}
		if n == 0 {
			return fmt.Errorf("mitm: system roots file %s has no PEM certificates", from)
		}
	}
	// A comment line so a person can find detour's CA in a long bundle;
	// quoted, because a loaded CA's subject is not ours to trust.
	fmt.Fprintf(&buf, "# detour CA %q\n", ca.Cert.Subject.CommonName)
	buf.Write(certPEM(ca.Cert))
	if _, err := w.Write(buf.Bytes()); err != nil {
		return fmt.Errorf("mitm: writing CA bundle: %w", err)
	}
	return nil
}
