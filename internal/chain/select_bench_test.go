package chain

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/detour-proxy/detour/internal/health"
	"github.com/detour-proxy/detour/policy"
)

// benchSession is a session on a route of eight upstreams with sel as its
// select section, every upstream's window full (128 samples, a tenth of
// them failures): what a scored choice reads on a busy detour.
func benchSession(b testing.TB, sel string) *session {
	b.Helper()
	var ups, names []string
	for i := range selectInline {
		n := fmt.Sprintf("u%d", i)
		ups = append(ups, fmt.Sprintf(`%q: {"shape": "openai", "base_url": "https://%s.test/v1", "auth": {"from": "client"}}`, n, n))
		names = append(names, fmt.Sprintf("%q", n))
	}
	doc := fmt.Sprintf(`{"upstreams": {%s}, "routes": [{"name": "chat", "match": {"host": "api.openai.com"}, "chain": [%s], "select": %s}]}`,
		strings.Join(ups, ","), strings.Join(names, ","), sel)
	pol, err := policy.Compile("policy.json", []byte(doc), policy.Options{BaseDir: b.TempDir(), DefaultCADir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	r := &Runner{Health: health.New()}
	now := time.Now()
	r.Now = func() time.Time { return now }
	for i := range selectInline {
		n := fmt.Sprintf("u%d", i)
		for j := range health.WindowSize {
			res := health.Success
			if j%10 == 0 {
				res = health.Failure
			}
			r.windows.Begin(n)
			r.windows.Record(n, res, time.Duration(100+j+10*i)*time.Millisecond, now)
		}
	}
	body := []byte(`{"model":"gpt-4o","messages":[{"role":"system","content":"You help."},{"role":"user","content":"Say hello."}]}`)
	req, _ := http.NewRequest(http.MethodPost, "http://api.openai.com/v1/chat/completions", nil)
	req.Header.Set("Authorization", "Bearer sk-app")
	route := pol.Routes[0]
	return &session{r: r, pol: pol, route: route, rec: &Record{}, req: req, app: route.Shape, body: body, model: "gpt-4o"}
}

// BenchmarkSelect is the per-request cost of choosing the first of eight
// upstreams (target: at most 2 µs and no allocation for weighted and
// scored). ordered is the baseline: the chain as written, nothing done.
func BenchmarkSelect(b *testing.B) {
	for _, bc := range []struct{ name, sel string }{
		{"ordered", `{}`},
		{"weighted", `{"strategy": "weighted", "weights": {"u0": 50, "u1": 10, "u2": 10, "u3": 10, "u4": 5, "u5": 5, "u6": 5, "u7": 5}}`},
		{"weighted-sticky", `{"strategy": "weighted", "weights": {"u0": 50, "u1": 10, "u2": 10, "u3": 10, "u4": 5, "u5": 5, "u6": 5, "u7": 5}, "sticky": true}`},
		{"scored", `{"strategy": "scored", "score": {"latency": 1, "cost": 0.5, "errors": 2}}`},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s := benchSession(b, bc.sel)
			s.r.Price = func(*policy.Upstream, string) float64 { return 2.5 }
			b.ReportAllocs()
			for b.Loop() {
				if out, ok := s.selectChain(s.route.Chain); !ok || len(out) != selectInline {
					b.Fatalf("selected %d upstreams", len(out))
				}
				// As Runner.finish does once the log line is written.
				releaseSelection(s.rec)
			}
		})
	}
}
