package sdkcheck

import (
	"fmt"
	"testing"
	"time"

	"github.com/detour-proxy/detour/internal/detourtest"
	fv "github.com/detour-proxy/detour/internal/fakevendor"
	"github.com/detour-proxy/detour/internal/testsupport"
	"github.com/detour-proxy/detour/rewrite"
)

// lastResortPolicy chains the app's vendor, then (with static) a static
// answer; extra adds top-level members.
func lastResortPolicy(app rewrite.Shape, primary *detourtest.Vendor, static bool, extra string) string {
	path := map[rewrite.Shape]string{rewrite.OpenAI: "/v1/chat/completions", rewrite.Anthropic: "/v1/messages", rewrite.Gemini: "/v1beta/models/*"}[app]
	chainNames := `["primary"]`
	if static {
		chainNames = `["primary", "sorry"]`
	}
	return fmt.Sprintf(`{
  "upstreams": {
    "primary": {"shape": %q, "base_url": %q, "ca_file": %q, "auth": {"from": "client"}},
    "sorry":   {"shape": "static", "text": "The assistant is busy. Please try again in a minute."}
  },
  "routes": [{"name": "r", "match": {"host": %q, "path": %q}, "chain": %s}]%s
}`, app, primary.BaseURL(), primary.CAFile, app.DefaultHost(), path, chainNames, extra)
}

// TestStaticAndCacheAnswersParseInEverySDK: the last resorts answer in the
// app's own shape, streamed or whole, and each official SDK reads them as
// it reads its vendor: text, a finish reason, no error.
func TestStaticAndCacheAnswersParseInEverySDK(t *testing.T) {
	t.Parallel()
	for _, app := range rewrite.Shapes {
		for _, stream := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s stream %v", app, stream), func(t *testing.T) {
				t.Parallel()
				primary := detourtest.NewVendor(t, app, "primary")
				primary.SetDefault(fv.Fault{Kind: fv.Status, Status: 503, Class: fv.ClassOverloaded})
				h := detourtest.Start(t, lastResortPolicy(app, primary, true, ""))
				got := newAppClient(t, app, h).ask(t, stream, false)
				if got.text != "The assistant is busy. Please try again in a minute." || got.finish == "" {
					t.Errorf("static: text %q finish %q", got.text, got.finish)
				}
				if rec := h.WaitRecord(t, h.LastRequestID(t)); rec.AnsweredBy != "sorry" {
					t.Errorf("answered by %q", rec.AnsweredBy)
				}

				// The cache: answered once (the other way: whole if this
				// run streams), then served from the cache when the
				// vendor is down.
				primary.SetDefault(fv.Fault{})
				h2 := detourtest.Start(t, lastResortPolicy(app, primary, false, `, "cache": {"allow_temperature": true}`))
				c := newAppClient(t, app, h2)
				if got := c.ask(t, !stream, false); got.text != "Hello from primary." {
					t.Fatalf("first answer %q", got.text)
				}
				// The app has the whole answer before its record is written
				// (a stream's last event is flushed first), and the cache is
				// filled before the record: wait for it, so that the next
				// request finds the answer in the cache.
				if rec := h2.WaitRecord(t, h2.LastRequestID(t)); rec.AnsweredBy != "primary" || rec.Cache != "stored" {
					t.Fatalf("first request answered by %q, cache %q; want primary, stored", rec.AnsweredBy, rec.Cache)
				}
				primary.SetDefault(fv.Fault{Kind: fv.Status, Status: 503, Class: fv.ClassOverloaded})
				got = newAppClient(t, app, h2).ask(t, stream, false)
				if got.text != "Hello from primary." || got.finish == "" {
					t.Errorf("from the cache: text %q finish %q", got.text, got.finish)
				}
				if rec := h2.WaitRecord(t, h2.LastRequestID(t)); rec.AnsweredBy != "cache" || rec.Cache != "hit" {
					t.Errorf("answered by %q, cache %q; want cache, hit", rec.AnsweredBy, rec.Cache)
				}
			})
		}
	}
}

// TestHedgingAndRetriesWithEverySDK: through the real proxy (CONNECT, TLS
// interception), a primary that hangs is hedged by a translated backup and
// a primary that is overloaded once is retried; each official SDK, streaming
// or not, sees one clean answer.
func TestHedgingAndRetriesWithEverySDK(t *testing.T) {
	t.Parallel()
	for _, app := range rewrite.Shapes {
		for _, stream := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s stream %v", app, stream), func(t *testing.T) {
				t.Parallel()
				primary := detourtest.NewVendor(t, app, "primary")
				backup := detourtest.NewVendor(t, otherShape(app), "backup")
				pol := crossPolicy(t, app, primary, backup)
				pol = pol[:len(pol)-2] + `, "hedge_after": "100ms", "retry": {"base": "1ms", "max": "2ms"}, "errors": {"classes": {"overloaded": {"retries": 1}}}}`
				h := detourtest.Start(t, pol)

				primary.Script(fv.Fault{Kind: fv.Hang, Delay: 20 * time.Second})
				got := newAppClient(t, app, h).ask(t, stream, false)
				if got.text != "Hello from backup." || got.finish == "" {
					t.Fatalf("hedged: text %q finish %q; want the backup's", got.text, got.finish)
				}
				rec := h.WaitRecord(t, h.LastRequestID(t))
				if detourtest.Outcomes(rec) != "primary:hedge_lost,backup:ok" {
					t.Errorf("hedged attempts %s", detourtest.Outcomes(rec))
				}
				waitIdle(t, primary)
				// The hedge may win before the primary has read the request's
				// body (HTTP/2 sends it after the headers); the cancelled call
				// then never took the scripted Hang, which would be left to the
				// next request. Start the retry half from a fresh script.
				primary.Reset()

				primary.Script(fv.Fault{Kind: fv.Status, Status: 503, Class: fv.ClassOverloaded})
				got = newAppClient(t, app, h).ask(t, stream, false)
				if got.text != "Hello from primary." {
					t.Fatalf("retried: text %q; want the primary's after one retry", got.text)
				}
				if got := detourtest.Outcomes(h.WaitRecord(t, h.LastRequestID(t))); got != "primary:retry:overloaded,primary:ok" {
					t.Errorf("retried attempts %s", got)
				}
			})
		}
	}
}

func otherShape(s rewrite.Shape) rewrite.Shape {
	if s == rewrite.Anthropic {
		return rewrite.OpenAI
	}
	return rewrite.Anthropic
}

// waitIdle waits for a fake vendor's requests to end (a cancelled hang).
func waitIdle(t *testing.T, v *detourtest.Vendor) {
	t.Helper()
	if !testsupport.Poll(5*time.Second, func() bool { return v.InFlight() == 0 }) {
		t.Fatal("the losing upstream's request is still in flight: not cancelled")
	}
}
