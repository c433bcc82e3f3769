package detourtest

import (
	"net/http"
	"testing"
	"time"

	"github.com/detour-proxy/detour/internal/chain"
)

// A request's record is written when its handler returns, which can be
// after the app has read the whole answer (a stream's last event is flushed
// before the handler ends). Two requests in a row can therefore finish in
// either order: tests find a request's record by the x-detour-request-id
// detour put on its answer, never by its position in Records().

// idRecorder is the app-side transport of Client(): it remembers the
// request id of every answer detour sent back, in the order they came.
type idRecorder struct {
	base http.RoundTripper
	h    *Harness
}

func (r idRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.base.RoundTrip(req)
	if err == nil {
		if id := resp.Header.Get(chain.HeaderRequestID); id != "" {
			r.h.mu.Lock()
			r.h.ids = append(r.h.ids, id)
			r.h.mu.Unlock()
		}
	}
	return resp, err
}

// RequestIDs returns the x-detour-request-id of every answer a Client()
// has received so far, in the order their headers arrived.
func (h *Harness) RequestIDs() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.ids...)
}

// LastRequestID returns the request id of the last answer a Client()
// received: in a test that sends one request at a time, the one just sent.
func (h *Harness) LastRequestID(tb testing.TB) string {
	tb.Helper()
	ids := h.RequestIDs()
	if len(ids) == 0 {
		tb.Fatalf("no answer through Client() carried %s", chain.HeaderRequestID)
	}
	return ids[len(ids)-1]
}

// WaitRecord waits for the record of the request whose answer carried
// x-detour-request-id id, and returns it.
func (h *Harness) WaitRecord(tb testing.TB, id string) *chain.Record {
	tb.Helper()
	deadline := time.After(10 * time.Second)
	for {
		for _, r := range h.Records() {
			if r.ID == id {
				return r
			}
		}
		select {
		case <-h.notify:
		case <-time.After(20 * time.Millisecond):
		case <-deadline:
			tb.Fatalf("no record of request %s after 10s (%d records)\nlog:\n%s", id, len(h.Records()), h.log.String())
		}
	}
}
