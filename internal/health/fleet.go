package health

import (
	"strconv"
	"sync"
	"time"
)

// A Registry is one process's view of its upstreams. With a Fleet attached
// (SetFleet), the state that must hold across a deployment — cooldowns,
// breaker trips, half-open probes, limits.rpm, limits.fleet_concurrency and
// the shared counters below — is also kept in a shared store, and what other
// members decide arrives back through the Apply methods.
//
// The split keeps the healthy path local: CoolingDown, a closed breaker's
// BreakerAllow and an Acquire without rpm or fleet_concurrency read this
// process's memory only, as with no Fleet. The Registry tells the Fleet
// about changes after they are made locally (the Fleet sends them on
// without making the caller wait), and asks it synchronously only where a
// fleet-wide answer is the point: a half-open probe slot, an rpm token, a
// fleet concurrency slot. When the Fleet cannot answer (ErrFleetDown, or
// any error), the Registry decides alone, as a memory backend would.

// Fleet is a store shared by the members of a deployment; internal/fleet
// implements it on Redis. Methods named after an event are notifications:
// they must not block on the network. The others may, up to the store's
// timeout, and return an error when the store did not answer; the Registry
// then judges locally.
type Fleet interface {
	// CooldownStarted: this member started (or extended) c for name.
	CooldownStarted(name string, c Cooldown)
	// CooldownCleared: an operator ended name's cooldown here.
	CooldownCleared(name string)
	// BreakerOpened: name's breaker opened here for [since, until).
	BreakerOpened(name string, since, until time.Time, reason string)
	// BreakerReset: an operator reset name's breaker here.
	BreakerReset(name string)
	// ClaimProbe asks for one of k probe slots of the half-open period
	// that began at period (the end of the open period before it): false
	// when k probes of it are already out or succeeded fleet-wide.
	ClaimProbe(name string, period time.Time, k int) (bool, error)
	// ProbeDone reports a probe admitted by ClaimProbe: a neutral result
	// gives the slot back; the k-th success fleet-wide closes the breaker
	// everywhere (through ApplyBreakerClosed).
	ProbeDone(name string, period time.Time, res BreakerResult, k int)
	// TakeRPM takes one request's token from name's fleet-wide bucket of
	// l.RPM and l.Burst at now.
	TakeRPM(name string, l Limits, now time.Time) (bool, error)
	// AcquireSlot takes one of limit fleet-wide concurrency slots of name;
	// release gives it back and is idempotent.
	AcquireSlot(name string, limit int, now time.Time) (release func(), ok bool, err error)
	// AddShared adds delta to the fleet counter key, which expires ttl
	// after its first add; Shared is the counter as this member last saw
	// it, its own unsent adds included. Neither may block.
	AddShared(key string, delta float64, ttl time.Duration)
	Shared(key string) float64
	// Status is the store's state for /status and metrics.
	Status() FleetStatus
}

// FleetStatus is a Fleet's health.
type FleetStatus struct {
	// Backend is the policy's state.backend: "memory" or "redis".
	Backend string
	// Up is whether the store answered its last command in time.
	Up bool
	// Fallbacks counts the decisions taken locally because the store did
	// not answer, and the notifications it could not be sent.
	Fallbacks uint64
}

// ErrFleetDown is what a Fleet returns without trying while its store is
// known to be unreachable, so that a request does not pay a timeout per
// call during an outage.
var ErrFleetDown = fleetError("fleet state store is unreachable")

type fleetError string

func (e fleetError) Error() string { return string(e) }

// Sources of a cooldown or breaker state, for /status.
const (
	SourceLocal = "local"
	SourceFleet = "fleet"
)

// SetFleet attaches f; nil detaches. Call before the Registry is used.
func (r *Registry) SetFleet(f Fleet) { r.fleet = f }

// FleetStatus is the attached Fleet's status; a memory backend's, always
// up, without one.
func (r *Registry) FleetStatus() FleetStatus {
	if r.fleet == nil {
		return FleetStatus{Backend: "memory", Up: true}
	}
	return r.fleet.Status()
}

// ApplyCooldown records a cooldown another member started, without telling
// the Fleet again. Like StartCooldownClass it never shortens a running one.
func (r *Registry) ApplyCooldown(name string, c Cooldown, now time.Time) {
	if !now.Before(c.Until) {
		return
	}
	c.Fleet = true
	r.mu.Lock()
	defer r.mu.Unlock()
	if old, ok := r.cool[name]; ok && !c.Until.After(old.Until) {
		return
	}
	r.cool[name] = c
}

// ApplyCooldownCleared ends a cooldown an operator ended on another member.
func (r *Registry) ApplyCooldownCleared(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.cool, name)
}

// LocalCooldowns are the cooldowns running at now that this member
// started, for a Fleet to write back into a store that lost them.
func (r *Registry) LocalCooldowns(now time.Time) map[string]Cooldown {
	out := map[string]Cooldown{}
	for n, c := range r.Cooldowns(now) {
		if !c.Fleet {
			out[n] = c
		}
	}
	return out
}

// ApplyBreakerOpen makes name's breaker open for [since, until), as the
// fleet decided: set exactly, even shorter than a local open period, so
// that every member's half-open period starts at the same instant and
// their probes are counted together. An ended period, or one already in
// effect, changes nothing.
func (r *Registry) ApplyBreakerOpen(name string, since, until time.Time, reason string, now time.Time) {
	if !now.Before(until) {
		return
	}
	b := r.breaker(name)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state == BreakerOpen && b.until.Equal(until) {
		return
	}
	if b.cfg.Window == 0 {
		// Never asked yet: a window of one, replaced by the policy's at
		// its first BreakerAllow.
		b.configure(BreakerConfig{})
	}
	b.gen++
	b.state = BreakerOpen
	b.since, b.until = since, until
	b.reason = reason
	b.openMsg = "breaker open until " + until.UTC().Format(time.RFC3339) + " (" + reason + ", fleet)"
	b.opens++
	b.fleet = true
	b.clear()
}

// ApplyBreakerClosed closes name's breaker if it is in the half-open
// period that began at period (or still open until then): the fleet's
// probes of that period succeeded.
func (r *Registry) ApplyBreakerClosed(name string, period, now time.Time) {
	v, ok := r.breakers.Load(name)
	if !ok {
		return
	}
	b := v.(*breaker)
	b.mu.Lock()
	defer b.mu.Unlock()
	inPeriod := (b.state == BreakerHalfOpen && b.since.Equal(period)) || (b.state == BreakerOpen && b.until.Equal(period))
	if !inPeriod {
		return
	}
	b.close(now)
	b.fleet = true
}

// ApplyBreakerReset resets name's breaker as an operator did on another
// member.
func (r *Registry) ApplyBreakerReset(name string) { r.resetBreaker(name) }

// LocalOpenBreakers are the breakers open at now that this member opened,
// by name, for a Fleet to write back into a store that lost them.
func (r *Registry) LocalOpenBreakers(now time.Time) map[string]BreakerSnapshot {
	out := map[string]BreakerSnapshot{}
	for n, s := range r.Breakers(now) {
		if s.State == BreakerOpen && !s.Fleet {
			out[n] = s
		}
	}
	return out
}

// AddShared adds delta to the counter key, shared by the fleet when a Fleet
// is attached, which expires ttl after it was first added to (a period's
// budget: name the key after the period, e.g. "spend:openai:2026-12-01").
// It never blocks; Shared reads the counter from memory. This is the seam
// for counters every member adds to, such as spend budgets: the fleet's
// total may lag by the Fleet's flush interval, never by a lost add.
func (r *Registry) AddShared(key string, delta float64, ttl time.Duration, now time.Time) {
	if r.fleet != nil {
		r.fleet.AddShared(key, delta, ttl)
		return
	}
	r.sharedMu.Lock()
	defer r.sharedMu.Unlock()
	if r.shared == nil {
		r.shared = map[string]sharedCounter{}
	}
	c, ok := r.shared[key]
	if !ok || !now.Before(c.expires) {
		c = sharedCounter{expires: now.Add(ttl)}
	}
	c.v += delta
	r.shared[key] = c
}

// Shared is the counter key at now (0 for one never added to or expired).
func (r *Registry) Shared(key string, now time.Time) float64 {
	if r.fleet != nil {
		return r.fleet.Shared(key)
	}
	r.sharedMu.Lock()
	defer r.sharedMu.Unlock()
	c, ok := r.shared[key]
	if !ok || !now.Before(c.expires) {
		return 0
	}
	return c.v
}

// sharedCounter is a memory backend's shared counter.
type sharedCounter struct {
	v       float64
	expires time.Time
}

// sharedState is the Registry's part for the shared counters of a memory
// backend, embedded so that health.go's struct keeps its fields.
type sharedState struct {
	sharedMu sync.Mutex
	shared   map[string]sharedCounter
}

// fleetHalfOpenRefusal is the refusal when the fleet's probes of a
// half-open period are all out.
func fleetHalfOpenRefusal(k int) string {
	return "breaker half-open: " + strconv.Itoa(k) + " probes out across the fleet"
}
