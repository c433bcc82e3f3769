package cloud

import (
	"net/http"

	"github.com/detour-proxy/detour/policy"
)

type awsCredentials struct{}

func (r *Registry) bedrock(u *policy.Upstream, next http.RoundTripper) http.RoundTripper {
	return next
}
