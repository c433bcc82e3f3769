package admin

import (
	"net/http"
	"strconv"
	"time"

	"github.com/detour-proxy/detour/internal/health"
	"github.com/detour-proxy/detour/policy"
)

// BreakerOff is the breaker state /status reports when the policy turns
// breakers off (breaker.enabled false): "off", not "closed", so that no one
// reads a breaker that does not act as one that is healthy.
const BreakerOff = "off"

// maxErrorLen bounds a history entry's error: a policy with many problems
// lists them all, and /policy/history is for a glance.
const maxErrorLen = 4 << 10

// StatusJSON is GET /status's body.
type StatusJSON struct {
	Policy    PolicyJSON              `json:"policy"`
	Upstreams map[string]UpstreamJSON `json:"upstreams"`
	// Cache is the response cache; null when the policy has none.
	Cache *CacheJSON `json:"cache"`
	// Resilience is the policy's retry, breaker and hedging settings in
	// effect, defaults filled in.
	Resilience ResilienceJSON `json:"resilience"`
	// Routes are the policy's routes with their chains (or tier chains).
	Routes []RouteJSON `json:"routes"`
	// Budgets are the policy's spend budgets, in file order, with what
	// each has spent in its current periods (budget.go).
	Budgets []BudgetJSON `json:"budgets"`
}

// ResilienceJSON is the retry, breaker and hedging settings in effect.
type ResilienceJSON struct {
	// Retries is the retries per class, for the classes that have some.
	Retries             map[string]int `json:"retries"`
	RetryBase           string         `json:"retry_base"`
	RetryMax            string         `json:"retry_max"`
	HonorRetryAfterUpTo string         `json:"honor_retry_after_up_to"`
	// Cooldowns is the cooldown and its cap per class, for the classes
	// that have one.
	Cooldowns map[string]CooldownJSON `json:"cooldowns"`
	// Classifier is the request tier classifier's settings.
	Classifier ClassifierJSON `json:"classifier"`
	// HedgeAfter is "0s" when hedging is off.
	HedgeAfter    string `json:"hedge_after"`
	NeverSkipLast bool   `json:"never_skip_last"`
	Breaker       struct {
		Enabled             bool    `json:"enabled"`
		ConsecutiveFailures int     `json:"consecutive_failures"`
		FailureRate         float64 `json:"failure_rate"`
		ConsecutiveTimeouts int     `json:"consecutive_timeouts"`
		TimeoutRate         float64 `json:"timeout_rate"`
		Window              int     `json:"window"`
		MinRequests         int     `json:"min_requests"`
		OpenFor             string  `json:"open_for"`
		HalfOpenProbes      int     `json:"half_open_probes"`
		// Recovery is breaker.recovery, "0s" when traffic does not ramp.
		Recovery string `json:"recovery"`
	} `json:"breaker"`
}

// CooldownJSON is one class's cooldown setting.
type CooldownJSON struct {
	Cooldown    string `json:"cooldown"`
	MaxCooldown string `json:"max_cooldown"`
}

// ClassifierJSON is the tier classifier's thresholds (its patterns stay
// in the policy file).
type ClassifierJSON struct {
	LongInputChars int    `json:"long_input_chars"`
	CodeBlocks     int    `json:"code_blocks"`
	Files          int    `json:"files"`
	Undecided      string `json:"undecided"`
}

// RouteJSON is one route: its chain, or its chain per tier.
type RouteJSON struct {
	Name  string              `json:"name"`
	Chain []string            `json:"chain,omitempty"`
	Tiers map[string][]string `json:"tiers,omitempty"`
}

// CacheJSON describes the response cache.
type CacheJSON struct {
	Entries    int    `json:"entries"`
	MaxEntries int    `json:"max_entries"`
	TTL        string `json:"ttl"`
	// ServeStale is cache.serve_stale_on_failure.
	ServeStale       bool `json:"serve_stale_on_failure"`
	AllowTemperature bool `json:"allow_temperature"`
}

// BreakerJSON is one upstream's circuit breaker.
type BreakerJSON struct {
	// State is closed, open, half_open, or off (breakers disabled).
	State string    `json:"state"`
	Since time.Time `json:"since,omitzero"`
	// Until is when an open breaker turns half-open.
	Until  *time.Time `json:"until,omitempty"`
	Reason string     `json:"reason,omitempty"`
	// ConsecutiveFailures and ConsecutiveTimeouts are the current runs of
	// hard and soft failures; Window* count the sliding window.
	ConsecutiveFailures int `json:"consecutive_failures"`
	ConsecutiveTimeouts int `json:"consecutive_timeouts"`
	WindowCount         int `json:"window_count"`
	WindowFailures      int `json:"window_failures"`
	WindowTimeouts      int `json:"window_timeouts"`
	// Probes admitted in the current half-open period.
	Probes int `json:"probes,omitempty"`
	// Opens counts the times it opened since start.
	Opens uint64 `json:"opens"`
	// Source is, when not closed (or closed by the fleet's probes),
	// "local" or "fleet": who set State.
	Source string `json:"source,omitempty"`
}

// LimitsJSON is one upstream's client-side limits (limits in the policy).
type LimitsJSON struct {
	RPM         int `json:"rpm,omitempty"`
	Burst       int `json:"burst,omitempty"`
	Concurrency int `json:"concurrency,omitempty"`
	// Tokens left in the rpm bucket now.
	Tokens float64 `json:"tokens"`
	// InFlight requests holding a concurrency slot.
	InFlight int `json:"in_flight"`
	// Limited counts requests that skipped this upstream (class
	// local_limit) since start.
	Limited uint64 `json:"limited"`
}

// PolicyJSON describes the policy in effect.
type PolicyJSON struct {
	Version     string `json:"version"`
	Hash        string `json:"hash"`
	Fingerprint string `json:"fingerprint"`
	// LoadedAt is when this policy was published: at start, by a reload or
	// by a rollback (Trigger says which).
	LoadedAt time.Time `json:"loaded_at"`
	Trigger  string    `json:"trigger"`
	// Source is the policy file's path (never its contents).
	Source string `json:"source"`
}

// UpstreamJSON is one upstream of the policy in effect.
type UpstreamJSON struct {
	// CooldownUntil is null when the upstream is not cooling down.
	CooldownUntil  *time.Time `json:"cooldown_until"`
	CooldownReason string     `json:"cooldown_reason,omitempty"`
	// CooldownSource is, while cooling down, "local" (this process
	// started it) or "fleet" (another member sharing state did).
	CooldownSource string `json:"cooldown_source,omitempty"`
	// Breaker is the upstream's circuit breaker; a static upstream has
	// none (null).
	Breaker *BreakerJSON `json:"breaker"`
	// Limits is null when the upstream has no limits.
	Limits *LimitsJSON `json:"limits"`
	// SuccessRate (0 to 1) over Samples recent attempts (the last
	// health.WindowSize within health.WindowAge); null when there are none.
	SuccessRate *float64 `json:"success_rate"`
	Samples     int      `json:"samples"`
	// P50Ms and P95Ms are the latency percentiles of the recent successful
	// attempts, from sending the request to the commit point; null when
	// there are none.
	P50Ms    *float64 `json:"p50_ms"`
	P95Ms    *float64 `json:"p95_ms"`
	InFlight int64    `json:"in_flight"`
	// Requests is how many attempts were sent to the upstream since start.
	Requests uint64 `json:"requests"`
	// Probe is the upstream's active probe; null when it is not probed.
	Probe *ProbeJSON `json:"probe"`
	// Window is the window a scored selection judges the upstream by;
	// null when the admin listener has none (Options.Windows).
	Window *WindowJSON `json:"window"`
}

// WindowJSON is one upstream's selection window (health.Window): the last
// health.WindowSize counted attempts within health.WindowAge.
type WindowJSON struct {
	// Samples is how many counted attempts it holds; Successes how many of
	// them succeeded.
	Samples   int `json:"samples"`
	Successes int `json:"successes"`
	// SuccessRate and FailureRate are over Samples; SuccessRate is null
	// when there are none.
	SuccessRate *float64 `json:"success_rate"`
	FailureRate float64  `json:"failure_rate"`
	// P95Ms is the 95th percentile latency of the successes to the commit
	// point; null when there is none. (The window keeps no p50: the
	// upstream's p50_ms above is from its recent stats.)
	P95Ms    *float64 `json:"p95_ms"`
	InFlight int      `json:"in_flight"`
}

// windowOf is the window of the named upstream, or nil without windows.
func (h *handler) windowOf(name string, now time.Time) *WindowJSON {
	if h.opts.Windows == nil {
		return nil
	}
	w := h.opts.Windows.Read(name, now)
	j := &WindowJSON{Samples: w.Samples, Successes: w.Successes, FailureRate: w.FailureRate, InFlight: w.InFlight}
	if w.Samples > 0 {
		rate := 1 - w.FailureRate
		j.SuccessRate = &rate
	}
	if w.Successes > 0 {
		j.P95Ms = msPtr(w.P95)
	}
	return j
}

func (h *handler) status(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, h.statusOf(h.opts.Now()))
}

func (h *handler) statusOf(now time.Time) StatusJSON {
	c := h.opts.Store.Load()
	st := StatusJSON{
		Policy: PolicyJSON{
			Version: c.Version, Hash: c.Hash, Fingerprint: c.Fingerprint,
			LoadedAt: c.LoadedAt.UTC(), Source: c.Source,
		},
		Upstreams: make(map[string]UpstreamJSON, len(c.Upstreams)),
	}
	for _, e := range h.opts.Store.History() {
		if e.Active {
			st.Policy.LoadedAt, st.Policy.Trigger = e.At.UTC(), string(e.Trigger)
			break
		}
	}
	st.Resilience = resilienceOf(c)
	st.Budgets = budgetsOf(c, h.opts.Health, now)
	for _, r := range c.Routes {
		rj := RouteJSON{Name: r.Name}
		if r.Tiers == nil {
			rj.Chain = names(r.Chain)
		} else {
			rj.Tiers = map[string][]string{}
			for t, ch := range r.Tiers {
				rj.Tiers[t] = names(ch)
			}
		}
		st.Routes = append(st.Routes, rj)
	}
	if c.Cache.Enabled {
		st.Cache = &CacheJSON{MaxEntries: c.Cache.Entries, TTL: c.Cache.TTL.String(),
			ServeStale: c.Cache.ServeStaleOnFailure, AllowTemperature: c.Cache.AllowTemperature}
		if h.opts.CacheLen != nil {
			st.Cache.Entries = h.opts.CacheLen()
		}
	}
	cooling := h.opts.Health.Cooldowns(now)
	probes := h.probes()
	for name, up := range c.Upstreams {
		s := h.opts.Health.Stats(name, now)
		u := UpstreamJSON{Samples: s.Samples, InFlight: s.InFlight, Requests: s.Requests}
		if !up.Static {
			u.Breaker = breakerOf(h.opts.Health.Breaker(name, now), c.Breaker.Enabled)
		}
		if l := up.Limits; l != (policy.Limits{}) {
			ls := h.opts.Health.Limit(name, now)
			u.Limits = &LimitsJSON{RPM: l.RPM, Burst: l.Burst, Concurrency: l.Concurrency, Tokens: ls.Tokens, InFlight: ls.InFlight, Limited: ls.Limited}
		}
		if cd, ok := cooling[name]; ok {
			until := cd.Until.UTC()
			u.CooldownUntil, u.CooldownReason = &until, cd.Reason
			u.CooldownSource = sourceOf(cd.Fleet)
		}
		if s.Samples > 0 {
			u.SuccessRate = &s.SuccessRate
		}
		if s.Successes > 0 {
			u.P50Ms, u.P95Ms = msPtr(s.P50), msPtr(s.P95)
		}
		u.Probe = probeOf(probes, name)
		u.Window = h.windowOf(name, now)
		st.Upstreams[name] = u
	}
	return st
}

func names(ups []*policy.Upstream) []string {
	out := make([]string, len(ups))
	for i, u := range ups {
		out[i] = u.Name
	}
	return out
}

func resilienceOf(c *policy.Compiled) ResilienceJSON {
	r := ResilienceJSON{Retries: map[string]int{}, RetryBase: c.Retry.Base.String(), RetryMax: c.Retry.Max.String(),
		HonorRetryAfterUpTo: c.Retry.HonorRetryAfterUpTo.String(), HedgeAfter: c.HedgeAfter.String(), NeverSkipLast: c.NeverSkipLast}
	r.Cooldowns = map[string]CooldownJSON{}
	for _, cl := range policy.Classes {
		a := c.Action(cl)
		if a.Retries > 0 && a.Then == policy.Fallback {
			r.Retries[string(cl)] = a.Retries
		}
		if a.Cooldown > 0 {
			r.Cooldowns[string(cl)] = CooldownJSON{Cooldown: a.Cooldown.String(), MaxCooldown: a.MaxCooldown.String()}
		}
	}
	if k := c.Classifier; k != nil {
		r.Classifier = ClassifierJSON{LongInputChars: k.LongInputChars, CodeBlocks: k.CodeBlocks, Files: k.Files, Undecided: k.Undecided}
	}
	b := c.Breaker
	r.Breaker.Enabled, r.Breaker.ConsecutiveFailures, r.Breaker.FailureRate = b.Enabled, b.ConsecutiveFailures, b.FailureRate
	r.Breaker.ConsecutiveTimeouts, r.Breaker.TimeoutRate, r.Breaker.Window, r.Breaker.MinRequests = b.ConsecutiveTimeouts, b.TimeoutRate, b.Window, b.MinRequests
	r.Breaker.OpenFor, r.Breaker.HalfOpenProbes = b.OpenFor.String(), b.HalfOpenProbes
	r.Breaker.Recovery = b.Recovery.String()
	return r
}

func breakerOf(b health.BreakerSnapshot, enabled bool) *BreakerJSON {
	j := &BreakerJSON{State: b.State.String(), Reason: b.Reason,
		ConsecutiveFailures: b.ConsecutiveFailures, ConsecutiveTimeouts: b.ConsecutiveTimeouts,
		WindowCount: b.WindowCount, WindowFailures: b.WindowFailures, WindowTimeouts: b.WindowTimeouts,
		Probes: b.Probes, Opens: b.Opens}
	if b.State != health.BreakerClosed || b.Fleet {
		j.Source = sourceOf(b.Fleet)
	}
	if !enabled {
		j.State = BreakerOff
	}
	if !b.Since.IsZero() {
		j.Since = b.Since.UTC()
	}
	if !b.Until.IsZero() {
		u := b.Until.UTC()
		j.Until = &u
	}
	return j
}

func msPtr(d time.Duration) *float64 {
	ms := float64(d.Microseconds()) / 1000
	return &ms
}

// HistoryJSON is GET /policy/history's body.
type HistoryJSON struct {
	// Entries are the last policy.HistorySize load attempts, newest first.
	Entries []EntryJSON `json:"entries"`
}

// EntryJSON is one policy load attempt.
type EntryJSON struct {
	Version  string    `json:"version"`
	Hash     string    `json:"hash"`
	LoadedAt time.Time `json:"loaded_at"`
	// Result is "ok" or "refused".
	Result string `json:"result"`
	Error  string `json:"error,omitempty"`
	// Trigger is "start", "watch", "sighup" or "rollback".
	Trigger string `json:"trigger"`
	// Active marks the entry that published the policy in effect.
	Active bool `json:"active"`
}

func (h *handler) history(w http.ResponseWriter, _ *http.Request) {
	hist := h.opts.Store.History()
	out := HistoryJSON{Entries: make([]EntryJSON, 0, len(hist))}
	for _, e := range hist {
		out.Entries = append(out.Entries, entryOf(e))
	}
	writeJSON(w, http.StatusOK, out)
}

func entryOf(e policy.HistoryEntry) EntryJSON {
	msg := e.Err
	if len(msg) > maxErrorLen {
		msg = msg[:maxErrorLen] + "…"
	}
	return EntryJSON{
		Version: e.Version, Hash: e.Hash, LoadedAt: e.At.UTC(), Result: e.Result,
		Error: msg, Trigger: string(e.Trigger), Active: e.Active,
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// sourceOf is a state's source in /status: health.SourceFleet when
// another member of the fleet set it, else health.SourceLocal.
func sourceOf(fleet bool) string {
	if fleet {
		return health.SourceFleet
	}
	return health.SourceLocal
}
