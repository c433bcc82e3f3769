package health

import "time"

// An active probe (internal/probe) is evidence about an upstream that no app
// request paid for. It acts on the same breaker the chain consults, so that
// there is one answer to "may this upstream be tried", whoever learned it.

// ProbeFailed records a probe that failed in a way that counts against the
// breaker (hard or soft), at now. It opens a closed or half-open breaker at
// once, without waiting for the closed-state thresholds: those are tuned to
// app traffic, where one failure among many successes is noise, while a
// probe is the only request an idle upstream gets, and the point is to keep
// the next app request away from it. An open breaker stays open, for
// another cfg.OpenFor from now if that is later, so that a still-failing
// upstream does not turn half-open and fail an app's request as the
// period's first probe.
func (r *Registry) ProbeFailed(name string, cfg BreakerConfig, now time.Time, why string) {
	b := r.breaker(name)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.configure(cfg)
	why = "probe failed: " + why
	if b.state == BreakerOpen && now.Before(b.until) {
		if until := now.Add(b.cfg.OpenFor); until.After(b.until) {
			b.until = until
			b.reason = why
			b.openMsg = "breaker open until " + b.until.UTC().Format(time.RFC3339) + " (" + why + ")"
		}
		return
	}
	b.open(now, why)
}

// ProbePassed records a probe the upstream answered, at now. A closed
// breaker is left alone: app traffic judges a working upstream. An open
// breaker turns half-open at once (its upstream answers again, so waiting
// out the open period only keeps traffic from it), and in a half-open one
// the probe counts as one succeeded probe of the period: cfg.HalfOpenProbes
// of them, from probes and app requests together, close it. It reports
// whether the breaker closed.
func (r *Registry) ProbePassed(name string, cfg BreakerConfig, now time.Time) (closed bool) {
	b := r.breaker(name)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.configure(cfg)
	switch b.state {
	case BreakerClosed:
		return false
	case BreakerOpen:
		// Since is when the breaker entered half-open: now, not the
		// planned end of the open period.
		b.until = now
		b.halfOpen()
	}
	b.probeOK++
	if b.probeOK >= b.cfg.HalfOpenProbes {
		b.close(now)
		return true
	}
	return false
}
