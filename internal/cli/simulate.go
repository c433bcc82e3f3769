package cli

import (
	"context"
	"io"
	"strings"
	"time"

	"github.com/detour-proxy/detour/internal/sim"
)

// Simulate runs `detour simulate`: reproducible failover experiments through
// the real chain runner, printed as markdown tables (stdout) with timings on
// stderr.
func Simulate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("simulate", "detour simulate [--seed N] [--requests N] [--latency-requests N] [--only a,b,c,d,e,f,budget,routing]", stderr)
	seed := fs.Int64("seed", sim.DefaultSeed, "seed of the injected faults and of the invalid requests")
	requests := fs.Int("requests", sim.DefaultRequests, "requests per row of table (a)")
	latency := fs.Int("latency-requests", sim.DefaultLatencyRequests, "timed requests per chain of table (c)")
	only := fs.String("only", strings.Join(sim.Tables, ","), "the tables to print: (a) chain success, (b) quota cooldowns, (c) failover latency, (d) breaker, (routing) latency-aware routing, (e) cooldowns with a shared quota and random failures, (f) chain length against mixed failures")
	quotaRun := fs.Duration("quota-run", sim.DefaultQuotaRun, "virtual length of table (b)'s traffic")
	quotaAt := fs.Int("quota-at", sim.DefaultQuotaAt, "table (b): the primary's call that first finds its quota gone")
	breakerRun := fs.Duration("breaker-run", sim.DefaultBreakerRun, "virtual length of table (d)'s traffic")
	redisURL := fs.String("redis", "", "the fleet table, a fleet sharing state (--only fleet): the Redis to share it through, e.g. redis://127.0.0.1:6379")
	if help, err := parse(fs, args, stdout); help || err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError(fs, stderr, "unexpected argument %q", fs.Arg(0))
	}
	tables, err := sim.ParseOnly(*only)
	if err != nil {
		return usageError(fs, stderr, "--only: %v", err)
	}
	if len(tables) == 0 {
		return usageError(fs, stderr, "--only names no table")
	}
	switch {
	case *seed == 0:
		// Zero would silently mean the default seed.
		return usageError(fs, stderr, "--seed must not be 0")
	case *requests <= 0, *latency <= 0, *quotaAt <= 0:
		return usageError(fs, stderr, "--requests, --latency-requests and --quota-at must be positive")
	case *quotaRun < time.Second, *breakerRun < time.Second:
		return usageError(fs, stderr, "--quota-run and --breaker-run must be at least 1s")
	}
	return sim.Run(ctx, sim.Options{
		Seed: *seed, Requests: *requests, LatencyRequests: *latency, Only: tables,
		QuotaRun: *quotaRun, QuotaAt: *quotaAt, BreakerRun: *breakerRun,
		Out: stdout, Progress: stderr, RedisURL: *redisURL,
	})
}
