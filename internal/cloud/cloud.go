package cloud

import (
	"net/http"
	"sync"

	"github.com/detour-proxy/detour/policy"
)

// Registry holds the credential sources of every cloud upstream, for the
// life of the process. The zero value is ready to use; safe for concurrent
// use.
type Registry struct {
	mu     sync.Mutex
	files  map[string]*tokenFile
	aws    map[string]*awsCredentials
	google map[string]*googleTokens
}

// RoundTripper returns next wrapped for a cloud upstream, or next itself
// for any other.
func (r *Registry) RoundTripper(u *policy.Upstream, next http.RoundTripper) http.RoundTripper {
	if u.Cloud == nil {
		return next
	}
	switch u.Cloud.Kind {
	case policy.CloudAzure:
		return &azure{u: u, next: next, token: r.tokenFile(u.Cloud.TokenFile)}
	case policy.CloudBedrock:
		return r.bedrock(u, next)
	case policy.CloudVertex:
		return r.vertex(u, next)
	}
	return next
}

func (r *Registry) tokenFile(path string) *tokenFile {
	if path == "" {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if t, ok := r.files[path]; ok {
		return t
	}
	if r.files == nil {
		r.files = map[string]*tokenFile{}
	}
	t := &tokenFile{path: path}
	r.files[path] = t
	return t
}

// cloneRequest returns a copy of req that the cloud wrapper may change:
// a RoundTripper must not modify the request it is given, and the chain
// replays its requests' bodies through GetBody.
func cloneRequest(req *http.Request) *http.Request {
	r := req.Clone(req.Context())
	r.Body, r.GetBody, r.ContentLength = req.Body, req.GetBody, req.ContentLength
	return r
}
