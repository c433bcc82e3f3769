// Package sim runs `detour simulate`: reproducible experiments that drive the
// real chain.Runner against fake vendors (internal/fakevendor) and print what
// they measured as markdown tables (issue 4). It is not a model of detour:
// every request goes through chain.Runner.Serve, the policy is compiled by
// policy.Compile, and the upstreams answer with the vendors' exact error
// bodies.
//
// Every table but one runs in memory on a virtual clock (Runner.Now and
// Runner.Sleep; the fakes are reached through Transports.Override), one
// request after another, so the same seed prints the same bytes on any
// machine. The latency table (c) is the exception: it times real loopback
// HTTP and says so.
//
// sim imports policy, rewrite, internal/chain and internal/health; it must not
// import proxy (goproxy) or anything that listens on a real port, except the
// latency table's HTTP servers on loopback.
package sim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

// Defaults of Options.
const (
	DefaultSeed            = 1
	DefaultRequests        = 10000
	DefaultLatencyRequests = 2000
	DefaultQuotaRun        = time.Hour
	DefaultQuotaAt         = 300
	DefaultBreakerRun      = 10 * time.Minute
)

// Tables lists the tables in print order: (a) chain success against
// theory, (b) cooldowns after quota runs out, (c) time added by a failover,
// (d) the circuit breaker, (routing) latency-aware routing, (e) cooldowns
// with the seed's set-up (a shared quota and random failures), (f) chain
// length against mixed failures, and the budget cut-off.
var Tables = []string{"a", "b", "c", "d", "routing", "e", "f", TableBudget}

// Options configure a simulation. Zero values take the defaults.
type Options struct {
	// Seed makes the injected faults and the invalid requests
	// reproducible. Default DefaultSeed.
	Seed int64
	// Requests is the number of requests per cell of table (a). Default
	// DefaultRequests.
	Requests int
	// LatencyRequests is the number of timed requests per chain of table
	// (c). Default DefaultLatencyRequests.
	LatencyRequests int
	// Only lists the tables to run (Tables, and FleetTable). Default: Tables.
	Only []string
	// QuotaRun is the virtual length of table (b)'s traffic, one request
	// per virtual second. Default DefaultQuotaRun.
	QuotaRun time.Duration
	// QuotaAt is the primary's call of table (b) that first finds its quota
	// gone. Default DefaultQuotaAt.
	QuotaAt int
	// BreakerRun is the virtual length of table (d)'s traffic, ten requests
	// per virtual second. Default DefaultBreakerRun.
	BreakerRun time.Duration
	// RoutingRequests is the number of requests per row of the routing
	// table (latency_routing.go). Default DefaultRoutingRequests.
	RoutingRequests int
	// Out receives the tables: markdown, byte-identical for one set of
	// options (table (c) aside).
	Out io.Writer
	// Progress receives timings, which vary from run to run. Default:
	// discarded.
	Progress io.Writer
	// RedisURL is the Redis the fleet table shares state through (fleet.go);
	// without one its redis column is not run.
	RedisURL string

	// memo, set only by tests, shares tables (a) and (b) between runs with
	// the same options (memo.go); nil runs every table afresh.
	memo *tableMemo
}

// Command is the command line that reproduces a run with these options,
// printed at the top of the output.
func (o Options) Command() string {
	o = o.withDefaults()
	var b strings.Builder
	fmt.Fprintf(&b, "detour simulate --seed %d --requests %d --latency-requests %d", o.Seed, o.Requests, o.LatencyRequests)
	if o.QuotaRun != DefaultQuotaRun {
		fmt.Fprintf(&b, " --quota-run %s", shortDuration(o.QuotaRun))
	}
	if o.QuotaAt != DefaultQuotaAt {
		fmt.Fprintf(&b, " --quota-at %d", o.QuotaAt)
	}
	if o.BreakerRun != DefaultBreakerRun {
		fmt.Fprintf(&b, " --breaker-run %s", shortDuration(o.BreakerRun))
	}
	fmt.Fprintf(&b, " --only %s", strings.Join(o.Only, ","))
	return b.String()
}

func (o Options) withDefaults() Options {
	if o.Seed == 0 {
		o.Seed = DefaultSeed
	}
	if o.Requests <= 0 {
		o.Requests = DefaultRequests
	}
	if o.LatencyRequests <= 0 {
		o.LatencyRequests = DefaultLatencyRequests
	}
	if len(o.Only) == 0 {
		o.Only = Tables
	}
	if o.QuotaRun <= 0 {
		o.QuotaRun = DefaultQuotaRun
	}
	if o.QuotaAt <= 0 {
		o.QuotaAt = DefaultQuotaAt
	}
	if o.BreakerRun <= 0 {
		o.BreakerRun = DefaultBreakerRun
	}
	if o.RoutingRequests <= 0 {
		o.RoutingRequests = DefaultRoutingRequests
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	return o
}

// ErrUnknownTable is returned for an Options.Only entry that names no table.
var ErrUnknownTable = errors.New("unknown table")

// ParseOnly parses a comma-separated list of tables, e.g. "a,c", into their
// print order, without duplicates.
func ParseOnly(s string) ([]string, error) {
	want := map[string]bool{}
	for _, f := range strings.Split(s, ",") {
		f = strings.ToLower(strings.TrimSpace(f))
		if f == "" {
			continue
		}
		if !isTable(f) {
			return nil, fmt.Errorf("%w %q (tables: %s)", ErrUnknownTable, f, strings.Join(Tables, ", "))
		}
		want[f] = true
	}
	var out []string
	for _, t := range append(Tables, FleetTable) {
		if want[t] {
			out = append(out, t)
		}
	}
	return out, nil
}

func isTable(s string) bool {
	if s == FleetTable {
		return true
	}
	for _, t := range Tables {
		if s == t {
			return true
		}
	}
	return false
}

// Run runs the tables opts asks for and writes them to opts.Out.
func Run(ctx context.Context, opts Options) error {
	opts = opts.withDefaults()
	for _, t := range opts.Only {
		if !isTable(t) {
			return fmt.Errorf("%w %q", ErrUnknownTable, t)
		}
	}
	out := opts.Out
	fmt.Fprintf(out, "# detour simulate: seed %d\n\n", opts.Seed)
	fmt.Fprintf(out, "Reproduce with `%s` (from a checkout: `go run . simulate …` with the same flags).\n", opts.Command())
	fmt.Fprintf(out, "Every request goes through detour's real chain runner; the upstreams are fake vendors that answer with the vendors' exact bodies.\n")
	start := time.Now()
	for _, t := range opts.Only {
		if err := ctx.Err(); err != nil {
			return err
		}
		fmt.Fprintln(out)
		began := time.Now()
		var err error
		switch t {
		case "a":
			var r chainsResult
			r, err = memoTable(opts.memo, opts, t, func() (chainsResult, error) { return runChains(ctx, opts) })
			if err == nil {
				r.write(out)
			}
		case "b":
			var r quotaResult
			r, err = memoTable(opts.memo, opts, t, func() (quotaResult, error) { return runQuota(ctx, opts) })
			if err == nil {
				r.write(out)
			}
		case "c":
			var r latencyResult
			r, err = runLatency(ctx, opts)
			if err == nil {
				r.write(out)
			}
		case TableBudget:
			var r budgetResult
			r, err = runBudget(ctx, opts)
			if err == nil {
				r.write(out)
			}
		case "d":
			var r breakerResult
			r, err = runBreaker(ctx, opts)
			if err == nil {
				r.write(out)
			}
		case "e":
			var r seedResult
			r, err = runSeedCooldown(ctx, opts)
			if err == nil {
				r.write(out)
			}
		case "f":
			var r lengthResult
			r, err = runChainLength(ctx, opts)
			if err == nil {
				r.write(out)
			}
		case "routing":
			var r routingResult
			r, err = runRouting(ctx, opts)
			if err == nil {
				r.write(out)
			}
		case FleetTable:
			var r fleetResult
			if r, err = runFleet(ctx, opts); err == nil {
				r.write(out)
			}
		}
		if err != nil {
			return fmt.Errorf("table (%s): %w", t, err)
		}
		fmt.Fprintf(opts.Progress, "detour simulate: table (%s) took %s\n", t, time.Since(began).Round(time.Millisecond))
	}
	fmt.Fprintf(opts.Progress, "detour simulate: %s in all\n", time.Since(start).Round(time.Millisecond))
	return nil
}
