package chain

import (
	"net/http"

	"github.com/detour-proxy/detour/policy"
)

// ForUpstream returns what carries an attempt (or a probe) to u: its transport, wrapped
// by internal/cloud for an upstream at Azure, Bedrock or Vertex (the
// cloud's address and credential; Bedrock's event stream as SSE). The
// wrapper goes around Override too, so the simulation and benchmarks see
// the same requests as a real upstream would.
func (t *Transports) ForUpstream(u *policy.Upstream) http.RoundTripper {
	return t.cloud.RoundTripper(u, t.For(u))
}
