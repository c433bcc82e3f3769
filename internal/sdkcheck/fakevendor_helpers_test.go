package sdkcheck

import (
	"net/http/httptest"
	"testing"
	"time"

	fv "github.com/detour-proxy/detour/internal/fakevendor"
	"github.com/detour-proxy/detour/rewrite"
)

// The fake vendors' helpers, as internal/fakevendor's own tests have them.

// fixedNow pins created timestamps and the spend-limit reset date.
func fixedNow() time.Time { return time.Unix(1735689600, 0) } // 2025-01-01T00:00:00Z

// serve starts a fake vendor of shape on loopback.
func serve(t *testing.T, shape rewrite.Shape, opts fv.Options) (*fv.Vendor, *httptest.Server) {
	t.Helper()
	if opts.Now == nil {
		opts.Now = fixedNow
	}
	v := fv.New(shape, opts)
	srv := httptest.NewServer(v)
	t.Cleanup(srv.Close)
	return v, srv
}

// The arguments the fake vendors give the tools that the tests declare:
// get_weather(city required, days) and get_time(tz, utc; nothing required).
const (
	weatherArgs = `{"city":"Paris"}`
	timeArgs    = `{"tz":"test","utc":true}`
)
