//go:debug tlsmlkem=0
package chain

import (
	"testing"

	"github.com/detour-proxy/detour/internal/testsupport"
)

// The go:debug line above: the test binary's TLS handshakes (the fake
// vendors', on loopback) agree on X25519 alone, without the post-quantum
// X25519MLKEM768 share the runtime adds by default. Under -race that share
// costs some 2 ms of CPU per handshake, a quarter of it, and hundreds of
// handshakes run here. No test here is about the key exchange; the
// sidecar's own default is untouched (the directive applies to this test
// binary only).

// TestMain ends the binary without the race runtime's idle second at exit
// (testsupport.Main says when that is safe).
func TestMain(m *testing.M) { testsupport.Main(m) }
