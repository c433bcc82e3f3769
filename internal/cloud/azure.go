package cloud

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/detour-proxy/detour/policy"
	"github.com/detour-proxy/detour/rewrite"
)

// azure addresses Azure OpenAI: the chain builds an OpenAI-shaped request
// for base_url + "/chat/completions"; Azure wants it at
// /openai/deployments/DEPLOYMENT/chat/completions?api-version=V, with the
// key in api-key (or an Entra ID token as a bearer), and ignores the body's
// model (docs/vendors.md#azure-openai-upstream).
type azure struct {
	u     *policy.Upstream
	next  http.RoundTripper
	token *tokenFile
}

func (a *azure) RoundTrip(req *http.Request) (*http.Response, error) {
	body, err := readBody(req)
	if err != nil {
		return nil, err
	}
	facts, err := rewrite.PeekRequest(body)
	if err != nil || facts.Model == "" {
		return nil, errors.New("azure-openai: the request names no model, so no deployment can be chosen")
	}
	r := cloneRequest(req)
	c := a.u.Cloud
	rel := strings.TrimPrefix(req.URL.Path, a.u.BaseURL.Path)
	u := *req.URL
	u.Path = a.u.BaseURL.Path + "/openai/deployments/" + c.Deployment(facts.Model) + rel
	u.RawPath = ""
	q := u.Query()
	q.Set("api-version", c.APIVersion)
	u.RawQuery = q.Encode()
	r.URL = &u
	switch {
	case a.token != nil:
		tok, err := a.token.get()
		if err != nil {
			return nil, err
		}
		r.Header.Del("Api-Key")
		r.Header.Set("Authorization", "Bearer "+tok)
	case a.u.Auth == policy.AuthKey:
		// setKey wrote OpenAI's bearer; Azure's key header is api-key.
		r.Header.Del("Authorization")
		r.Header.Set("Api-Key", string(a.u.Key))
	}
	return a.next.RoundTrip(r)
}

// readBody returns the request's body without consuming it: the chain's
// bodies are in memory and replayable through GetBody.
func readBody(req *http.Request) ([]byte, error) {
	if req.GetBody == nil {
		return nil, errors.New("cloud: request body is not replayable")
	}
	rc, err := req.GetBody()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

// setBody replaces a cloned request's body.
func setBody(r *http.Request, b []byte) {
	r.ContentLength = int64(len(b))
	r.Body = io.NopCloser(bytes.NewReader(b))
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
}

// tokenFile is a bearer token kept in a file that something else refreshes
// (Azure's workload identity webhook, a sidecar running az): read again
// whenever the file's modification time or size changes. One stat per
// request costs about a microsecond and means a rotated token is used by
// the very next request.
type tokenFile struct {
	path string

	mu    sync.Mutex
	mod   time.Time
	size  int64
	token string
}

func (t *tokenFile) get() (string, error) {
	fi, err := os.Stat(t.path)
	if err != nil {
		return "", fmt.Errorf("azure-openai: token file: %w", err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.token != "" && fi.ModTime().Equal(t.mod) && fi.Size() == t.size {
		return t.token, nil
	}
	b, err := os.ReadFile(t.path)
	if err != nil {
		return "", fmt.Errorf("azure-openai: token file: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("azure-openai: token file %s is empty", t.path)
	}
	t.token, t.mod, t.size = tok, fi.ModTime(), fi.Size()
	return tok, nil
}
