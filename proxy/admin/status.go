package admin

import (
	"net/http"
	"strconv"
	"time"

	"github.com/detour-proxy/detour/policy"
)

// BreakerNone is the breaker state /status reports for every upstream until
// circuit breakers land (a later issue): "none", not "closed", so that no
// one reads a breaker that does not exist as one that is healthy.
const BreakerNone = "none"

// maxErrorLen bounds a history entry's error: a policy with many problems
// lists them all, and /policy/history is for a glance.
const maxErrorLen = 4 << 10

// StatusJSON is GET /status's body.
type StatusJSON struct {
	Policy    PolicyJSON              `json:"policy"`
	Upstreams map[string]UpstreamJSON `json:"upstreams"`
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
	// Breaker is BreakerNone until circuit breakers land.
	Breaker string `json:"breaker"`
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
	cooling := h.opts.Health.Cooldowns(now)
	for name := range c.Upstreams {
		s := h.opts.Health.Stats(name, now)
		u := UpstreamJSON{Breaker: BreakerNone, Samples: s.Samples, InFlight: s.InFlight, Requests: s.Requests}
		if cd, ok := cooling[name]; ok {
			until := cd.Until.UTC()
			u.CooldownUntil, u.CooldownReason = &until, cd.Reason
		}
		if s.Samples > 0 {
			u.SuccessRate = &s.SuccessRate
		}
		if s.Successes > 0 {
			u.P50Ms, u.P95Ms = msPtr(s.P50), msPtr(s.P95)
		}
		st.Upstreams[name] = u
	}
	return st
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
