// Package health keeps the state that decides whether an upstream should be
// tried at all — cooldowns, circuit breakers (breaker.go), client-side
// limits (limits.go), budget spend (budget.go), the windows scored
// selection reads (window.go) — and the recent traffic an operator reads in
// /status (in flight, success rate, latency percentiles). State is
// keyed by upstream name and lives outside the policy, so it survives a
// policy reload (an upstream that ran out of quota stays cooling down when an
// unrelated route changes).
//
// health imports policy for two configuration types only (BreakerConfig
// and Limits are policy.BreakerPolicy and policy.Limits: one type each, so a
// new breaker or limit field cannot be forgotten in a copy), and must not
// import proxy or chain. It is memory-backed; a shared backend (Redis, in
// internal/fleet) attaches behind the same methods as a Fleet (fleet.go).
package health

import (
	"sync"
	"time"
)

// Registry holds per-upstream health state. Safe for concurrent use.
type Registry struct {
	mu   sync.Mutex
	cool map[string]Cooldown
	// counters holds each upstream's *upstreamStats (stats.go): a sync.Map
	// because the set of names is small and almost never grows, so every
	// request's lookup is a lock-free read.
	counters sync.Map
	// breakers holds each upstream's *breaker (breaker.go) and limiters its
	// *limiter (limits.go), looked up like counters: lock-free once created,
	// with a mutex per upstream so that upstreams never contend.
	breakers sync.Map
	limiters sync.Map

	// fleet is the shared backend; nil for memory (fleet.go).
	fleet Fleet
	sharedState
}

// Cooldown is an upstream kept out of chains until a time.
type Cooldown struct {
	Until  time.Time
	Reason string
	// Class is the failure class that started it (quota_exhausted, …), so
	// that an app told "nothing can answer" hears the real cause.
	Class string
	// Fleet is true for a cooldown another member of the fleet started
	// (ApplyCooldown); false for this process's own.
	Fleet bool
}

// New returns an empty registry.
func New() *Registry {
	return &Registry{cool: map[string]Cooldown{}}
}

// CoolingDown reports whether the named upstream is cooling down at now.
func (r *Registry) CoolingDown(name string, now time.Time) (Cooldown, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.cool[name]
	if !ok {
		return Cooldown{}, false
	}
	if !now.Before(c.Until) {
		delete(r.cool, name)
		return Cooldown{}, false
	}
	return c, true
}

// StartCooldown keeps the named upstream out until until. A cooldown never
// shortens one already running: two concurrent quota errors with different
// reset hints keep the later end.
func (r *Registry) StartCooldown(name string, until time.Time, reason string) Cooldown {
	return r.StartCooldownClass(name, until, "", reason)
}

// StartCooldownClass is StartCooldown for a cooldown started by a failure
// of class.
func (r *Registry) StartCooldownClass(name string, until time.Time, class, reason string) Cooldown {
	r.mu.Lock()
	if c, ok := r.cool[name]; ok && !until.After(c.Until) {
		r.mu.Unlock()
		return c
	}
	c := Cooldown{Until: until, Reason: reason, Class: class}
	r.cool[name] = c
	r.mu.Unlock()
	if r.fleet != nil {
		r.fleet.CooldownStarted(name, c)
	}
	return c
}

// Clear ends the named upstream's cooldown (an operator's override).
func (r *Registry) Clear(name string) {
	r.mu.Lock()
	delete(r.cool, name)
	r.mu.Unlock()
	if r.fleet != nil {
		r.fleet.CooldownCleared(name)
	}
}

// Cooldowns returns the cooldowns still running at now, by upstream name.
func (r *Registry) Cooldowns(now time.Time) map[string]Cooldown {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]Cooldown, len(r.cool))
	for n, c := range r.cool {
		if now.Before(c.Until) {
			out[n] = c
		}
	}
	return out
}
