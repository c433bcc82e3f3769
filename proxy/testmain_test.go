//go:debug tlsmlkem=0
package proxy

import (
	"testing"

	"github.com/detour-proxy/detour/internal/testsupport"
)

// The go:debug line above: the test binary's TLS handshakes (the app's
// to detour's MITM listener, detour's to the fake vendors, all on
// loopback) agree on X25519 alone, without the post-quantum X25519MLKEM768
// share the runtime adds by default, as in internal/chain's tests: no test
// here is about the key exchange, and the sidecar's own default is
// untouched (the directive applies to this test binary only).

// TestMain ends the binary without the race runtime's idle second at exit
// (testsupport.Main says when that is safe).
func TestMain(m *testing.M) { testsupport.Main(m) }
