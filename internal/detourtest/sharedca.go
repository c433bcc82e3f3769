package detourtest

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/detour-proxy/detour/internal/mitm"
)

// sharedCA is the CA every harness of a test binary starts with when its
// policy names none: generated once, PEM-encoded, and written into each
// harness's directory before detour starts, so detour loads it instead of
// generating its own. A new CA costs a key, a signature and four fsyncs
// (mitm writes it atomically and durably) per harness, and the end-to-end
// tests start dozens of harnesses; what an app must do to trust detour is
// the same either way (be given ca.pem). Creating a CA is mitm's and the
// CLI's tests' to check.
var sharedCA = sync.OnceValues(func() (caFiles, error) {
	ca, err := mitm.Generate()
	if err != nil {
		return caFiles{}, err
	}
	der, err := x509.MarshalPKCS8PrivateKey(ca.Key)
	if err != nil {
		return caFiles{}, err
	}
	return caFiles{cert: ca.CertPEM, key: pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})}, nil
})

// caFiles is a CA as the PEM files of a policy's "ca".
type caFiles struct{ cert, key []byte }

// seedCA writes sharedCA as dir's ca.pem and ca-key.pem, where WritePolicy
// points a policy without "ca".
func seedCA(tb testing.TB, dir, policyJSON string) {
	tb.Helper()
	var probe map[string]json.RawMessage
	if json.Unmarshal([]byte(policyJSON), &probe) != nil {
		return
	}
	if _, ok := probe["ca"]; ok {
		return
	}
	ca, err := sharedCA()
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ca-key.pem"), ca.key, 0o600); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ca.pem"), ca.cert, 0o644); err != nil {
		tb.Fatal(err)
	}
}

// testCurves is the key exchange of the TLS connections the harness's own
// clients and fake vendors make: X25519 alone. Go's default also offers
// the post-quantum X25519MLKEM768, whose keys and encapsulation make a
// handshake under -race about a third dearer; none of these tests is about
// the key exchange, and detour's own TLS configurations are left as they
// are.
var testCurves = []tls.CurveID{tls.X25519}
