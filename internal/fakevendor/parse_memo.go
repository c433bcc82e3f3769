package fakevendor

import "github.com/detour-proxy/detour/rewrite"

// maxMemoBody is the largest request body parseBodyMemo remembers: test
// clients resend a small body many times; a large one is rarely repeated and
// not worth a copy.
const maxMemoBody = 4 << 10

// parsedBody is what parseBody read from one body that declares no tools.
type parsedBody struct {
	body                             string
	ok                               bool
	model                            string
	stream, incomplete, includeUsage bool
}

// parseBodyMemo is parseBody with a one-entry memo per vendor: a body equal
// to the last tool-free one is not decoded again. Simulations and load tests
// send one body thousands of times, and two encoding/json decodes of it were
// a tenth of a simulated request's CPU.
//
// Outside Gemini and embeddings (whose parse also reads the URL's fields and
// the vendor's strictness) parseBody is a pure function of the shape, fixed
// per vendor, and the body, and it sets exactly the fields kept here; a body
// with any tool data is never remembered, so no slice is shared between
// calls.
func (v *Vendor) parseBodyMemo(body []byte, c *call) bool {
	if c.embed != nil || v.shape == rewrite.Gemini || len(body) > maxMemoBody {
		return v.parseBody(body, c)
	}
	if m := v.memo.Load(); m != nil && m.body == string(body) {
		if m.ok {
			c.model, c.stream, c.incomplete, c.includeUsage = m.model, m.stream, m.incomplete, m.includeUsage
		}
		return m.ok
	}
	ok := v.parseBody(body, c)
	if t := c.tools; t.tools == nil && t.choice == "" && t.allowed == nil && !t.noParallel && t.results == nil {
		v.memo.Store(&parsedBody{
			body: string(body), ok: ok,
			model: c.model, stream: c.stream, incomplete: c.incomplete, includeUsage: c.includeUsage,
		})
	}
	return ok
}
