package fleet_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/detour-proxy/detour/internal/detourtest"
	"github.com/detour-proxy/detour/internal/testsupport"
	"github.com/detour-proxy/detour/rewrite"
)

// BenchmarkStateBackend measures what the redis backend adds to a request
// to a healthy chain, against the memory backend in the same run: three
// detours on one fake vendor (memory; redis; redis with limits.rpm, which
// takes its tokens from the fleet in leases of 1,000), requests interleaved so that they
// share the machine's noise. It reports each one's p50 and p99 in µs and
// the Redis commands per request (the members' once-a-second background
// check, EXISTS, left out).
//
//	go test ./internal/fleet -run '^$' -bench StateBackend -benchtime 2000x -count 5
func BenchmarkStateBackend(b *testing.B) {
	r := testsupport.StartRedis(b)
	v := detourtest.NewVendor(b, rewrite.OpenAI, "primary")
	up := func(limits string) string {
		return fmt.Sprintf(`"primary": {"shape": "openai", "base_url": %q, "ca_file": %q, "auth": {"none": true}%s}`, v.BaseURL(), v.CAFile, limits)
	}
	route := `"routes": [{"name": "chat", "match": {"host": "api.openai.com", "path": "/v1/chat/completions"}, "chain": ["primary"]}]`
	state := func(prefix string) string {
		return fmt.Sprintf(`"state": {"backend": "redis", "redis": {"url": %q, "key_prefix": %q}},`, r.URL(), prefix)
	}
	hs := map[string]*detourtest.Harness{
		"memory":    detourtest.Start(b, `{"upstreams": {`+up("")+`}, `+route+`}`),
		"redis":     detourtest.Start(b, `{`+state("bench-a:")+`"upstreams": {`+up("")+`}, `+route+`}`),
		"redis+rpm": detourtest.Start(b, `{`+state("bench-b:")+`"upstreams": {`+up(`, "limits": {"rpm": 600000}`)+`}, `+route+`}`),
	}
	fns := map[string]func() error{}
	for name, h := range hs {
		c := &http.Client{}
		fns[name] = func() error {
			st, _, err := ask(c, h)
			if err == nil && st != 200 {
				err = fmt.Errorf("status %d", st)
			}
			return err
		}
	}
	if _, err := detourtest.Interleave(50, fns); err != nil { // warm connections and pools
		b.Fatal(err)
	}
	before, err := r.Commands()
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	lat, err := detourtest.Interleave(b.N, fns)
	if err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	after, err := r.Commands()
	if err != nil {
		b.Fatal(err)
	}
	cmds := 0
	for name, n := range after {
		if name != "exists" {
			cmds += n - before[name]
		}
	}
	for _, name := range []string{"memory", "redis", "redis+rpm"} {
		l := lat[name]
		key := strings.ReplaceAll(name, "+", "_")
		b.ReportMetric(float64(l.Percentile(50).Nanoseconds())/1e3, key+"_p50_µs")
		b.ReportMetric(float64(l.Percentile(99).Nanoseconds())/1e3, key+"_p99_µs")
	}
	// Every command counted comes from redis+rpm (plain redis makes none;
	// TestFleetSurvivesRedis asserts it).
	b.ReportMetric(float64(cmds)/float64(b.N), "redis_cmds/rpm_req")
}
