package cloud

import (
	"net/http"

	"github.com/detour-proxy/detour/policy"
)

type googleTokens struct{}

func (r *Registry) vertex(u *policy.Upstream, next http.RoundTripper) http.RoundTripper {
	return next
}
