package admin

import (
	"net/http"
	"time"

	"github.com/detour-proxy/detour/internal/chain"
	"github.com/detour-proxy/detour/internal/health"
	"github.com/detour-proxy/detour/internal/metrics"
	"github.com/detour-proxy/detour/policy"
)

// Namespace prefixes every detour metric.
const Namespace = "detour"

// Histogram buckets. Upstream latency spans a fast 429 (tens of ms) to a
// long non-streamed completion (the 120 s default deadline); detour's own
// overhead should stay in the low milliseconds, and the buckets are there
// to show when it does not.
var (
	latencyBuckets  = []float64{0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120}
	overheadBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1}
)

// Latency phases of upstream_latency_seconds.
const (
	PhaseHeaders = "headers" // request sent → response headers
	PhaseCommit  = "commit"  // request sent → commit point (whole body, or a stream's first content)
)

// Metrics are detour's Prometheus metrics (docs/architecture.md#admin-listener-and-metrics), on a registry of
// their own (internal/metrics) with the go_* and process_* families.
//
// Every label value comes from the policy (route and upstream names, tiers),
// from the fixed set of failure classes, or from a fixed set of outcomes;
// never from the model string, the path or the host, so that cardinality
// stays bounded by the policy.
type Metrics struct {
	reg *metrics.Registry

	requests  *metrics.CounterVec
	attempts  *metrics.CounterVec
	failovers *metrics.CounterVec
	latency   *metrics.HistogramVec
	overhead  *metrics.Histogram
	cache     *metrics.CounterVec
	tokens    *metrics.CounterVec
	probes    *metrics.CounterVec
	cost      *metrics.CounterVec

	// The children every request may touch whatever the policy, resolved
	// once.
	cacheResult map[string]*metrics.Counter
}

// NewMetrics returns detour's metrics. breaker_state, cooldown_active and
// policy_reloads_total are read from store and health when scraped; the rest
// are fed by Observe.
func NewMetrics(store *policy.Store, h *health.Registry) *Metrics {
	m := &Metrics{reg: metrics.NewRegistry()}
	m.requests = metrics.NewCounterVec(Namespace+"_requests_total",
		"App requests by route, tier and outcome (answered, failed, stopped, client_gone, passthrough, drained).",
		"route", "tier", "outcome")
	m.attempts = metrics.NewCounterVec(Namespace+"_attempts_total",
		`Upstream attempts by upstream and class: "ok", a failure class, "skipped", or "client_gone".`,
		"upstream", "class")
	m.failovers = metrics.NewCounterVec(Namespace+"_failovers_total",
		"Fall-overs from one upstream to the next one tried, by route.",
		"route", "from", "to")
	m.latency = metrics.NewHistogramVec(Namespace+"_upstream_latency_seconds",
		"Upstream attempt latency from sending the request: to response headers (phase headers), to the commit point of an answer (phase commit).",
		latencyBuckets, "upstream", "phase")
	overhead := metrics.NewHistogramVec(Namespace+"_overhead_seconds",
		"Time detour adds to an answered request: time to first byte minus the upstream attempts' own time.",
		overheadBuckets)
	m.overhead = overhead.WithLabelValues()
	m.cache = metrics.NewCounterVec(Namespace+"_cache_total",
		"Response cache use per eligible request by result: stored (an upstream answered and the answer was kept), hit (every upstream failed; a stored answer was served), miss (nothing stored or served), bypass (not eligible: temperature).",
		"result")
	m.tokens = metrics.NewCounterVec(Namespace+"_tokens_total",
		"Tokens reported by the answering upstream, by direction (input, output).",
		"upstream", "direction")
	m.probes = metrics.NewCounterVec(Namespace+"_probe_total",
		`Active health probes (upstreams.NAME.probe) by upstream and result: "ok" or the failure class.`,
		"upstream", "result")
	m.cost = metrics.NewCounterVec(Namespace+"_cost_usd_total",
		"USD spent on answers, at the answering upstream's prices (upstreams.NAME.prices).",
		"upstream")
	// Present from the start, so that dashboards and alerts find the series
	// before the cache exists.
	m.cacheResult = map[string]*metrics.Counter{}
	for _, r := range []string{chain.CacheHit, chain.CacheMiss, chain.CacheStored, chain.CacheBypass} {
		m.cacheResult[r] = m.cache.WithLabelValues(r)
	}

	m.reg.Register(
		metrics.NewGoCollector(),
		metrics.NewProcessCollector(),
		m.requests, m.attempts, m.failovers, m.latency, overhead, m.cache, m.tokens, m.probes, m.cost,
		&stateCollector{store: store, health: h, now: time.Now},
		&budgetCollector{store: store, health: h, now: time.Now},
	)
	m.reg.Register(stateMetrics(h)...)
	return m
}

// BufferedBytes adds the gauge detour_buffered_bytes, read from bytes when
// scraped: the request body bytes held by requests in flight, against the
// policy's limits.buffered_bytes.
func (m *Metrics) BufferedBytes(bytes func() int64) {
	m.reg.Register(metrics.NewGaugeFunc(Namespace+"_buffered_bytes",
		"Request body bytes buffered by requests in flight (bounded by limits.buffered_bytes).",
		func() float64 { return float64(bytes()) }))
}

// Tracing adds the counters of trace export, read when scraped:
// detour_trace_spans_dropped_total (spans the collector never took: the
// export queue was full, their export failed, or the collector refused them
// in a partial success) and
// detour_trace_export_failures_total (failed export calls). Both stay 0
// while tracing is off.
func (m *Metrics) Tracing(dropped, failures func() uint64) {
	m.reg.Register(
		metrics.NewCounterFunc(Namespace+"_trace_spans_dropped_total",
			"Trace spans the OTLP collector never took: dropped at a full export queue, lost in a failed export, or refused in a partial success.",
			func() float64 { return float64(dropped()) }),
		metrics.NewCounterFunc(Namespace+"_trace_export_failures_total",
			"OTLP trace export calls that failed (collector unreachable, refused, timed out).",
			func() float64 { return float64(failures()) }),
	)
}

// Registry returns the registry the metrics are on.
func (m *Metrics) Registry() *metrics.Registry { return m.reg }

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return m.reg.Handler()
}

// Observe counts one finished request. It is a chain.Runner OnRecord
// function and keeps nothing of r.
func (m *Metrics) Observe(r *chain.Record) {
	outcome := r.Outcome()
	m.requests.WithLabelValues(r.Route, r.Tier, outcome).Inc()
	if outcome == chain.RequestPassthrough {
		return
	}
	var upstreamTime time.Duration
	from := ""
	for _, a := range r.Attempts {
		if a.Outcome == chain.OutcomeSkipped {
			m.attempts.WithLabelValues(a.Upstream, chain.OutcomeSkipped).Inc()
			continue
		}
		// A fall-over is counted when the next upstream is actually tried:
		// skipped ones in between are not where the request went.
		if from != "" {
			m.failovers.WithLabelValues(r.Route, from, a.Upstream).Inc()
			from = ""
		}
		class := a.Class
		switch a.Outcome {
		case chain.OutcomeOK:
			class = "ok"
		case chain.OutcomeClientGone:
			class = chain.OutcomeClientGone
		case chain.OutcomeFallback:
			from = a.Upstream
		}
		m.attempts.WithLabelValues(a.Upstream, class).Inc()
		if a.Headers > 0 {
			m.latency.WithLabelValues(a.Upstream, PhaseHeaders).Observe(a.Headers.Seconds())
		}
		if a.Upstream == r.AnsweredBy {
			// The answering attempt, whatever happened to its stream later.
			m.latency.WithLabelValues(a.Upstream, PhaseCommit).Observe(a.Duration.Seconds())
		}
		upstreamTime += a.Duration
	}
	if outcome == chain.RequestAnswered && r.TTFB > 0 {
		m.overhead.Observe(max(r.TTFB-upstreamTime, 0).Seconds())
	}
	if r.AnsweredBy != "" {
		if r.Usage.Input > 0 {
			m.tokens.WithLabelValues(r.AnsweredBy, "input").Add(float64(r.Usage.Input))
		}
		if r.Usage.Output > 0 {
			m.tokens.WithLabelValues(r.AnsweredBy, "output").Add(float64(r.Usage.Output))
		}
		if r.CostUSD > 0 {
			m.cost.WithLabelValues(r.AnsweredBy).Add(r.CostUSD)
		}
	}
	if c := m.cacheResult[r.Cache]; c != nil {
		c.Inc()
	}
}

// ObserveProbe counts one active probe of upstream: result is "ok" or its
// failure class (probe.Result.Label), both bounded by the policy and the
// class list.
func (m *Metrics) ObserveProbe(upstream, result string) {
	m.probes.WithLabelValues(upstream, result).Inc()
}

// stateCollector reports, at scrape time, what lives in the store and the
// health registry rather than in counters detour increments: it is always
// current, and it costs nothing between scrapes.
type stateCollector struct {
	store  *policy.Store
	health *health.Registry
	now    func() time.Time
}

var (
	breakerDesc = metrics.NewDesc(Namespace+"_breaker_state",
		"Circuit breaker state per upstream of the policy in effect (0 closed, 1 open, 2 half-open; 0 when breakers are off).",
		metrics.KindGauge, "upstream")
	cooldownDesc = metrics.NewDesc(Namespace+"_cooldown_active",
		"1 while the upstream is cooling down (kept out of chains), else 0.",
		metrics.KindGauge, "upstream")
	reloadsDesc = metrics.NewDesc(Namespace+"_policy_reloads_total",
		"Policy reloads since start (file watcher, SIGHUP and rollback) by result (ok, refused).",
		metrics.KindCounter, "result")
	lastUpstreamDesc = metrics.NewDesc(Namespace+"_chain_last_upstream",
		"1 for the last upstream of each route's chain (and of each of its tier chains) in the policy in effect: a cooldown or open breaker there leaves the route no backup.",
		metrics.KindGauge, "route", "upstream")
)

func (c *stateCollector) Collect(s *metrics.Scrape) {
	ok, refused := c.store.Reloads()
	s.Add(reloadsDesc, float64(ok), policy.ResultOK)
	s.Add(reloadsDesc, float64(refused), policy.ResultRefused)
	pol := c.store.Load()
	if pol == nil {
		return
	}
	now := c.now()
	cooling := c.health.Cooldowns(now)
	for name := range pol.Upstreams {
		b := 0.0
		if pol.Breaker.Enabled {
			switch c.health.Breaker(name, now).State {
			case health.BreakerOpen:
				b = 1
			case health.BreakerHalfOpen:
				b = 2
			}
		}
		s.Add(breakerDesc, b, name)
		v := 0.0
		if _, ok := cooling[name]; ok {
			v = 1
		}
		s.Add(cooldownDesc, v, name)
	}
	collectLastUpstreams(s, pol)
}
