package admin

import (
	"time"

	"github.com/detour-proxy/detour/internal/probe"
)

// ProbeJSON is one upstream's active probe in /status.
type ProbeJSON struct {
	// Request is "models" or "completion"; Interval the mean gap between
	// probes.
	Request  string `json:"request"`
	Interval string `json:"interval"`
	// LastAt is when the latest probe was sent; null before the first.
	LastAt *time.Time `json:"last_at"`
	// LastResult is "ok" or the latest probe's failure class; "" before
	// the first. LastStatus is its HTTP status (0: none arrived).
	LastResult string   `json:"last_result"`
	LastReason string   `json:"last_reason,omitempty"`
	LastStatus int      `json:"last_status"`
	LastMs     *float64 `json:"last_ms"`
	// Passed and Failed count the probes since they started (a result that
	// does not count for the breaker is neither); ConsecutiveFailures is the
	// current run.
	Passed              uint64 `json:"passed"`
	Failed              uint64 `json:"failed"`
	ConsecutiveFailures int    `json:"consecutive_failures"`
}

// probes is the probes' status, or nil when there are no probes to ask.
func (h *handler) probes() map[string]probe.Status {
	if h.opts.Probes == nil {
		return nil
	}
	return h.opts.Probes()
}

// probeOf is name's probe in /status; nil when it is not probed.
func probeOf(all map[string]probe.Status, name string) *ProbeJSON {
	s, ok := all[name]
	if !ok {
		return nil
	}
	p := &ProbeJSON{
		Request: string(s.Request), Interval: s.Interval.String(),
		Passed: s.Passed, Failed: s.Failed, ConsecutiveFailures: s.ConsecutiveFailures,
	}
	if !s.Last.At.IsZero() {
		at := s.Last.At.UTC()
		p.LastAt = &at
		p.LastResult, p.LastReason, p.LastStatus = s.Last.Label(), s.Last.Reason, s.Last.Status
		p.LastMs = msPtr(s.Last.Latency)
	}
	return p
}
