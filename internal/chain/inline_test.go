package chain_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/detour-proxy/detour/internal/chain"
)

// inlineVendors is memVendors answered on the caller's goroutine: the
// vendor writes its whole answer into a recorder before RoundTrip returns.
// For tests of many short non-streaming requests whose subject is which
// upstream answers, not how an answer travels: a goroutine and a pipe per
// request were most of such a test's CPU under -race. Nothing can wait on
// a vendor's answer half written, so it serves no delayed or streamed
// fault.
type inlineVendors memVendors

func (m inlineVendors) RoundTrip(req *http.Request) (*http.Response, error) {
	v := m[strings.TrimSuffix(req.URL.Hostname(), ".test")]
	rec := httptest.NewRecorder()
	v.ServeHTTP(rec, req)
	resp := rec.Result()
	resp.Request = req
	return resp, nil
}

// newInlineVendorRunner is newMemVendorRunner over inlineVendors.
func newInlineVendorRunner(t *testing.T, vendors memVendors, policyJSON string, tune func(*chain.Runner)) *runner {
	t.Helper()
	return newMemRunner(t, "api.openai.com", policyJSON, func(cr *chain.Runner) {
		cr.Transports = &chain.Transports{Override: inlineVendors(vendors)}
		if tune != nil {
			tune(cr)
		}
	})
}

// postInline is postAs served on the test's goroutine into a recorder: the
// answer is whole when it returns (its body already read, as postAs reads
// it).
func (r *runner) postInline(t *testing.T, key, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, "http://api.openai.com/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	r.handler.ServeHTTP(rec, req)
	resp := rec.Result()
	resp.Body = http.NoBody
	return resp
}
