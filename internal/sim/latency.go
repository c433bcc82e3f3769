package sim

import (
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"time"

	"github.com/detour-proxy/detour/internal/fakevendor"
	"github.com/detour-proxy/detour/rewrite"
)

// Table (c): the time a failover adds when the first upstream fails fast.
// Real time over real loopback HTTP, so its numbers vary by machine and run.

// latencyWarmup is the number of untimed requests per chain before the
// timed ones: connection set-up and first-call costs are not failover.
const latencyWarmup = 50

type latencyResult struct {
	requests int
	// failover and direct are the sorted durations of each chain's
	// requests; failed counts the requests the app got no answer to.
	failover, direct []time.Duration
	failed           int
}

func runLatency(ctx context.Context, opts Options) (latencyResult, error) {
	res := latencyResult{requests: opts.LatencyRequests}
	primary := fakevendor.New(rewrite.OpenAI, fakevendor.Options{Name: "primary"})
	// OpenAI's 429 rate_limit_exceeded, without retry-after.
	primary.SetDefault(fakevendor.Fault{Kind: fakevendor.Status, Class: fakevendor.ClassRateLimit})
	backup := fakevendor.New(rewrite.OpenAI, fakevendor.Options{Name: "backup"})
	ps, err := serveLoopback(primary)
	if err != nil {
		return res, err
	}
	defer ps.Close()
	bs, err := serveLoopback(backup)
	if err != nil {
		return res, err
	}
	defer bs.Close()

	// rate_limited is retried once by default; here it falls over at once,
	// so that the table measures one failed attempt and the failover.
	extra := func() map[string]any {
		return map[string]any{
			"errors":  map[string]any{"classes": map[string]any{"rate_limited": class("0s")}},
			"breaker": breakerOff(),
		}
	}
	foPol, err := compile(policyDoc("sim-c-failover", []upstream{{"primary", ps.url + "/v1"}, {"backup", bs.url + "/v1"}}, extra()))
	if err != nil {
		return res, err
	}
	diPol, err := compile(policyDoc("sim-c-direct", []upstream{{"backup", bs.url + "/v1"}}, extra()))
	if err != nil {
		return res, err
	}
	fo, di := newApp(foPol, nil, nil), newApp(diPol, nil, nil)
	defer fo.runner.Transports.CloseIdle()
	defer di.runner.Transports.CloseIdle()

	timed := func(a *app) (time.Duration, bool) {
		start := time.Now()
		o := a.do(ctx, validBody)
		return time.Since(start), o.ok()
	}
	for range latencyWarmup {
		timed(fo)
		timed(di)
	}
	for i := range opts.LatencyRequests {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		// Interleaved, and each chain first on every other turn, so that
		// neither gets the other's warm caches or GC debt systematically.
		first, second := fo, di
		if i%2 == 1 {
			first, second = di, fo
		}
		for _, a := range []*app{first, second} {
			d, ok := timed(a)
			if !ok {
				res.failed++
			}
			if a == fo {
				res.failover = append(res.failover, d)
			} else {
				res.direct = append(res.direct, d)
			}
		}
	}
	slices.Sort(res.failover)
	slices.Sort(res.direct)
	return res, nil
}

// loopbackServer is a real HTTP server on a loopback port of the kernel's
// choosing.
type loopbackServer struct {
	srv *http.Server
	url string
}

func serveLoopback(h http.Handler) (*loopbackServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &loopbackServer{srv: &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}, url: "http://" + ln.Addr().String()}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// Close stops the server and its connections.
func (s *loopbackServer) Close() { _ = s.srv.Close() }

// quantile is the nearest-rank q-quantile of sorted durations.
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(float64(len(sorted))*q)) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func micros(d time.Duration) string {
	return strconv.FormatInt(d.Microseconds(), 10) + " µs"
}

func signedMicros(d time.Duration) string {
	return fmt.Sprintf("%+d µs", d.Microseconds())
}

func (r latencyResult) write(w io.Writer) {
	fmt.Fprintln(w, "## (c) Time added by a fast-error failover")
	fmt.Fprintln(w)
	fmt.Fprintf(w, "**Real time, not virtual:** these numbers vary by machine and run (this run: %s/%s, %d CPUs); the other tables are exact. "+
		"Chain [primary, backup], where the primary answers 429 `rate_limit_exceeded` at once (errors.classes.rate_limited: no retries, no cooldown; breaker off), "+
		"against chain [backup] alone: %d requests each, interleaved, after %d untimed ones, "+
		"through detour's chain runner and real transports to fake vendors on loopback HTTP servers. "+
		"Times run from the app's request to detour's whole answer.\n\n",
		runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), r.requests, latencyWarmup)
	t := newTable("chain", "requests", "p50", "p99")
	t.add("[primary, backup]", strconv.Itoa(len(r.failover)), micros(quantile(r.failover, 0.5)), micros(quantile(r.failover, 0.99)))
	t.add("[backup]", strconv.Itoa(len(r.direct)), micros(quantile(r.direct, 0.5)), micros(quantile(r.direct, 0.99)))
	t.add("added by the failover", "",
		signedMicros(quantile(r.failover, 0.5)-quantile(r.direct, 0.5)),
		signedMicros(quantile(r.failover, 0.99)-quantile(r.direct, 0.99)))
	t.write(w)
	if r.failed > 0 {
		writeNotes(w, []string{fmt.Sprintf("%d timed requests got no answer; expected none.", r.failed)})
	}
}
