package chain

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"

	"github.com/detour-proxy/detour/policy"
	"github.com/detour-proxy/detour/rewrite"
)

// buildRequest rewrites the app's request for one upstream: its URL, its
// model, and its credential. Every credential the app sent is removed first;
// the app's own key goes back only to an upstream with auth "client".
// The URL and the body's reader are p's, which the attempt holds.
func (s *session) buildRequest(ctx context.Context, u *policy.Upstream, model string, conv *conversion, p *upstreamParts) (*http.Request, error) {
	if conv != nil {
		return s.buildTranslated(ctx, u, conv, p)
	}
	rel := strings.TrimPrefix(s.req.URL.Path, s.app.APIRoot())
	if u.Shape == rewrite.Gemini && model != s.model {
		if p, ok := rewrite.SetGeminiModelInPath(rel, model); ok {
			rel = p
		}
	}
	target := &p.url
	*target = *u.BaseURL
	target.Path = joinPath(u.BaseURL.Path, rel, s.req.URL.Path)
	target.RawPath = ""
	target.RawQuery = ""
	var clientQueryKey string
	if s.req.URL.RawQuery != "" {
		q := s.req.URL.Query()
		clientQueryKey = q.Get("key")
		q.Del("key")
		target.RawQuery = q.Encode()
	}

	body := s.body
	if model != s.model && u.Shape != rewrite.Gemini {
		b, err := rewrite.SetModel(body, model)
		if err != nil {
			return nil, fmt.Errorf("cannot set model for upstream %s: %w", u.Name, err)
		}
		body = b
	}

	// The app's identity (org, project, cookie) goes back only with the
	// app's own key: see identityHeaders and copyClientCredential.
	h := upstreamHeader(s.req.Header, len(u.Headers)+2)
	for k, vs := range u.Headers {
		h[k] = append([]string(nil), vs...)
	}
	switch u.Auth {
	case policy.AuthClient:
		copyClientCredential(h, s.req.Header, clientQueryKey, u.Shape.Vendor())
	case policy.AuthKey:
		setKey(h, u.Shape.Vendor(), string(u.Key))
	}
	if u.Shape == rewrite.Anthropic && h.Get("Anthropic-Version") == "" {
		h.Set("Anthropic-Version", "2023-06-01")
	}

	return newUpstreamRequest(ctx, target, h, body, &p.body)
}

// joinPath is base + rel, or app (the app's own path) when that is what
// they join to, as for an upstream whose base path is the API root the app
// addressed: the common case, and then no string is built.
func joinPath(base, rel, app string) string {
	if len(base)+len(rel) == len(app) && app[:len(base)] == base && app[len(base):] == rel {
		return app
	}
	return base + rel
}

// upstreamParts are the parts of an attempt's upstream request that live
// in the attempt, which is on the heap anyway, rather than in allocations
// of their own: the URL and the body's reader. An attempt sends one
// request, so neither is reused while the transport may still read it.
type upstreamParts struct {
	url  url.URL
	body bytes.Reader
}

// newUpstreamRequest is http.NewRequestWithContext for a URL and a header
// already built: it spares the URL's String and Parse round trip and the
// empty header NewRequest makes only for it to be replaced, several
// allocations per attempt. The body stays an io.NopCloser around a
// *bytes.Reader, which the transport knows to be in memory (it then sends
// the headers and the body in one write), and GetBody replays it, as
// NewRequest would, for the transport's retry on a kept-alive connection
// the upstream closed. target must not be shared; rd becomes the body's
// reader (over body).
func newUpstreamRequest(ctx context.Context, target *url.URL, h http.Header, body []byte, rd *bytes.Reader) (*http.Request, error) {
	if target.Path != "" && target.Path[0] != '/' {
		// What String would have done for a URL with a host.
		target.Path = "/" + target.Path
	}
	// As NewRequest does: "host:" is "host".
	target.Host = strings.TrimSuffix(target.Host, ":")
	r := http.Request{
		Method:     http.MethodPost,
		URL:        target,
		Proto:      "HTTP/1.1",
		ProtoMajor: 1,
		ProtoMinor: 1,
		Header:     h,
		Host:       target.Host,
		Body:       http.NoBody,
		GetBody:    func() (io.ReadCloser, error) { return http.NoBody, nil },
	}
	if len(body) > 0 {
		// A zero length with a body other than NoBody would be sent as
		// a body of unknown length (chunked).
		r.ContentLength = int64(len(body))
		rd.Reset(body)
		r.Body = io.NopCloser(rd)
		r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	}
	return r.WithContext(ctx), nil
}

// readAnswer reads a whole non-streaming answer, up to maxResponseBody.
// With a known length it reads in place into one buffer of that size (plus
// room to see EOF) instead of growing one. The bound is kept by the loop
// itself, not by trusting the declared length: a transport that delivers
// more than it declared still stops at maxResponseBody.
func readAnswer(r io.Reader, n int64) ([]byte, error) {
	if n < 0 || n > maxResponseBody {
		return io.ReadAll(io.LimitReader(r, maxResponseBody))
	}
	return readDeclared(make([]byte, 0, int(n)+bytes.MinRead), r)
}

// readDeclared is readAnswer's loop for an answer of known length, into b
// (empty, with room for the declared length and bytes.MinRead more).
func readDeclared(b []byte, r io.Reader) ([]byte, error) {
	for len(b) < maxResponseBody {
		if len(b) == cap(b) {
			// More than declared: double, up to the bound. Growing by
			// append's quarters, a body that never ends cost five times
			// the bound in copies before the loop stopped it.
			b = slices.Grow(b, min(len(b), maxResponseBody-len(b)))
		}
		m, err := r.Read(b[len(b):min(cap(b), maxResponseBody)])
		b = b[:len(b)+m]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
	return b, nil
}

// readPooledAnswer is readAnswer into a buffer from answerPools when the
// answer declares a length that fits one. The buffer is buf's; the caller
// gives it back with buf.release once nothing refers to the answer any
// more (an answer written to the app and read for its usage: a failure
// keeps its body, and then its buffer is simply not given back). buf is
// nil when the answer was read into memory of its own.
//
// Every non-stream answer is read whole before it is written, and at a
// few kilobytes each its buffer was the largest allocation of a request,
// which the collector then had to catch up with.
func readPooledAnswer(r io.Reader, n int64) (answer []byte, buf *answerBuf, err error) {
	size := n + bytes.MinRead
	if n < 0 || size > answerClasses[len(answerClasses)-1] {
		answer, err = readAnswer(r, n)
		return answer, nil, err
	}
	buf = getAnswerBuf(int(size))
	answer, err = readDeclared(buf.b[:0], r)
	return answer, buf, err
}

// answerBuf is a pooled answer buffer (a pointer, so that putting it back
// allocates nothing).
type answerBuf struct {
	b     []byte
	class int
}

// answerClasses are the sizes of the pooled answer buffers; a larger
// answer gets memory of its own.
var answerClasses = [...]int64{2 << 10, 4 << 10, 8 << 10, 16 << 10, 32 << 10, 64 << 10}

var answerPools [len(answerClasses)]sync.Pool

// getAnswerBuf returns a buffer of at least size bytes (at most the
// largest class).
func getAnswerBuf(size int) *answerBuf {
	c := 0
	for int64(size) > answerClasses[c] {
		c++
	}
	if v, ok := answerPools[c].Get().(*answerBuf); ok {
		return v
	}
	return &answerBuf{b: make([]byte, answerClasses[c]), class: c}
}

// release gives the buffer back; nil does nothing. Nothing may use the
// answer read into it afterwards.
func (a *answerBuf) release() {
	if a != nil {
		answerPools[a.class].Put(a)
	}
}

// copyClientCredential puts back the app's own credential for an upstream of
// the app's shape. Only the header that shape uses is copied.
func copyClientCredential(dst, src http.Header, queryKey string, shape rewrite.Shape) {
	for _, k := range identityHeaders {
		copyHeader(dst, src, k)
	}
	switch shape {
	case rewrite.OpenAI:
		copyHeader(dst, src, "Authorization")
		copyHeader(dst, src, "Api-Key") // Azure OpenAI
	case rewrite.Anthropic:
		copyHeader(dst, src, "X-Api-Key")
		copyHeader(dst, src, "Authorization") // Anthropic SDKs' auth-token mode
	case rewrite.Gemini:
		copyHeader(dst, src, "X-Goog-Api-Key")
		if dst.Get("X-Goog-Api-Key") == "" && queryKey != "" {
			// Moved from ?key= to the header so it cannot end up in an
			// access log on the way.
			dst.Set("X-Goog-Api-Key", queryKey)
		}
	}
}

// copyHeader shares the app's values rather than copying them: nothing in
// detour or net/http writes into a header's values in place, and the slice
// is capped at its length, so an Add on dst reallocates instead of writing
// into the app's array. k is canonical (every caller's is a constant, and
// perf_internal_test.go checks them), so it is looked up as it is rather than
// canonicalized again on every call.
func copyHeader(dst, src http.Header, k string) {
	if v := src[k]; len(v) > 0 {
		dst[k] = v[:len(v):len(v)]
	}
}

func setKey(h http.Header, shape rewrite.Shape, key string) {
	switch shape {
	case rewrite.OpenAI:
		h.Set("Authorization", "Bearer "+key)
	case rewrite.Anthropic:
		h.Set("X-Api-Key", key)
	case rewrite.Gemini:
		h.Set("X-Goog-Api-Key", key)
	}
}
