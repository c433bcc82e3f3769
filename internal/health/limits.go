package health

import (
	"strconv"
	"sync"
	"time"

	"github.com/detour-proxy/detour/policy"
)

// Client-side limits keep detour itself from pushing an upstream over the
// rate or concurrency its account allows: an attempt over the limit is not
// sent (the chain falls over to the next upstream at once) rather than sent
// to earn a 429. Acquire never blocks and never queues, so a limit costs a
// request nothing but the fall-over.

// Limits are one upstream's client-side limits: the policy's own limits
// section, one type for both (policy.Limits documents each field; 0 or less
// means unlimited).
type Limits = policy.Limits

// burst is the bucket size for l, which has RPM > 0.
func burst(l Limits) float64 {
	if l.Burst > 0 {
		return float64(l.Burst)
	}
	return float64(max(1, l.RPM/60))
}

// LimitSnapshot is one upstream's limiter state, for /status and metrics.
type LimitSnapshot struct {
	// Tokens in the bucket at now; 0 when the upstream has no RPM limit.
	Tokens float64
	// InFlight is how many acquired concurrency slots are not released yet.
	// Only attempts acquired under a Concurrency limit are counted (an
	// unlimited acquire has nothing to release); Stats.InFlight counts all.
	InFlight int
	// Limited is how many acquires were refused since start.
	Limited uint64
	// Limits are the limits the last Acquire applied (an addition to the
	// brief's API: /status can then show "12/64 in flight, 4000 rpm").
	Limits Limits
}

// noRelease is what Acquire returns when there is no slot to give back: a
// refusal, or no concurrency limit. Shared, so those paths do not allocate.
var noRelease = func() {}

// limiter is one upstream's token bucket and concurrency slots.
type limiter struct {
	mu  sync.Mutex
	lim Limits // as last applied

	// The bucket, refilled lazily from last to the now of each call.
	bucket bool // an RPM limit applies (and tokens, last mean something)
	tokens float64
	last   time.Time

	// Slots: holders[i] is the id of the acquire holding slot i, 0 when
	// free; free lists the free slots. A release carries its slot and id, so
	// a second call finds another id there (or 0) and does nothing: release
	// is idempotent even after the slot went to another request. Slots are
	// only ever added, up to the highest concurrency ever in use.
	inFlight int
	holders  []uint64
	free     []int
	nextID   uint64

	limited uint64

	// The refusal messages, and the limit each was built for, so that
	// refusing does not allocate.
	rpmMsg, concMsg           string
	rpmFor, concFor, concIn   int
	fleetRPMMsg, fleetConcMsg string
	fleetRPMFor, fleetConcFor int
}

// limiter returns the named upstream's limiter, creating it on first use.
func (r *Registry) limiter(name string) *limiter {
	if v, ok := r.limiters.Load(name); ok {
		return v.(*limiter)
	}
	v, _ := r.limiters.LoadOrStore(name, &limiter{})
	return v.(*limiter)
}

// Acquire takes, at now, a token from the named upstream's bucket and a
// concurrency slot, as l allows (the policy's current limits: a reload
// applies from the next call). Neither is taken unless both are available.
// When !ok, reason says which limit was reached: "limit: 600 rpm reached" or
// "limit: 8 in flight (concurrency 8)" (more in flight than the limit after
// a reload lowered it). release gives the slot back; it is
// never nil, idempotent, and a no-op when !ok or when l has no concurrency
// limit. Acquire never blocks.
//
// Under a concurrency limit, release is a closure (one small allocation per
// acquire): idempotence needs something that tells this acquire apart from
// a later one given the same slot.
//
// With a Fleet, l.RPM is the fleet's rate: the token comes from the Fleet
// (its local bucket is not used), and l.FleetConcurrency slots are the
// fleet's; l.Concurrency stays this process's. A Fleet that does not answer
// leaves rpm to the local bucket and fleet_concurrency unenforced.
func (r *Registry) Acquire(name string, l Limits, now time.Time) (release func(), ok bool, reason string) {
	lm := r.limiter(name)
	if r.fleet == nil || (l.RPM <= 0 && l.FleetConcurrency <= 0) {
		return lm.acquire(l, now, false)
	}
	fleetRPM := false
	if l.RPM > 0 {
		ok, err := r.fleet.TakeRPM(name, l, now)
		switch {
		case err == nil && !ok:
			return noRelease, false, lm.refuseFleetRPM(l)
		case err == nil:
			fleetRPM = true
		}
	}
	release, ok, reason = lm.acquire(l, now, fleetRPM)
	if !ok || l.FleetConcurrency <= 0 {
		return release, ok, reason
	}
	fr, ok, err := r.fleet.AcquireSlot(name, l.FleetConcurrency, now)
	switch {
	case err != nil:
		return release, true, ""
	case !ok:
		release()
		return noRelease, false, lm.refuseFleetConcurrency(l.FleetConcurrency)
	}
	local := release // not the named result: the closure below becomes it
	return func() { local(); fr() }, true, ""
}

// refuseFleetRPM counts and words a refusal by the fleet's bucket.
func (lm *limiter) refuseFleetRPM(l Limits) string {
	lm.mu.Lock()
	defer lm.mu.Unlock()
	lm.limited++
	if lm.fleetRPMMsg == "" || lm.fleetRPMFor != l.RPM {
		lm.fleetRPMMsg, lm.fleetRPMFor = "limit: "+strconv.Itoa(l.RPM)+" rpm reached across the fleet", l.RPM
	}
	return lm.fleetRPMMsg
}

// refuseFleetConcurrency counts and words a refusal by the fleet's slots.
func (lm *limiter) refuseFleetConcurrency(c int) string {
	lm.mu.Lock()
	defer lm.mu.Unlock()
	lm.limited++
	if lm.fleetConcMsg == "" || lm.fleetConcFor != c {
		lm.fleetConcMsg, lm.fleetConcFor = "limit: "+strconv.Itoa(c)+" in flight across the fleet (fleet_concurrency)", c
	}
	return lm.fleetConcMsg
}

// acquire is Acquire on this process's limiter. fleetRPM says the fleet
// already granted the rpm token, so the local bucket is left alone.
func (lm *limiter) acquire(l Limits, now time.Time, fleetRPM bool) (func(), bool, string) {
	lm.mu.Lock()
	defer lm.mu.Unlock()
	lm.configure(l, now)
	if lm.bucket && !fleetRPM {
		lm.refill(now)
		if lm.tokens < 1 {
			lm.limited++
			if lm.rpmMsg == "" || lm.rpmFor != l.RPM {
				lm.rpmMsg, lm.rpmFor = "limit: "+strconv.Itoa(l.RPM)+" rpm reached", l.RPM
			}
			return noRelease, false, lm.rpmMsg
		}
	}
	c := l.Concurrency
	if c > 0 && lm.inFlight >= c {
		lm.limited++
		if lm.concMsg == "" || lm.concFor != c || lm.concIn != lm.inFlight {
			lm.concMsg = "limit: " + strconv.Itoa(lm.inFlight) + " in flight (concurrency " + strconv.Itoa(c) + ")"
			lm.concFor, lm.concIn = c, lm.inFlight
		}
		return noRelease, false, lm.concMsg
	}
	if lm.bucket && !fleetRPM {
		lm.tokens--
	}
	if c <= 0 {
		return noRelease, true, ""
	}
	var slot int
	if k := len(lm.free); k > 0 {
		slot, lm.free = lm.free[k-1], lm.free[:k-1]
	} else {
		slot = len(lm.holders)
		lm.holders = append(lm.holders, 0)
	}
	lm.nextID++
	id := lm.nextID
	lm.holders[slot] = id
	lm.inFlight++
	return func() { lm.release(slot, id) }, true, ""
}

// release frees slot if acquire id still holds it.
func (lm *limiter) release(slot int, id uint64) {
	lm.mu.Lock()
	defer lm.mu.Unlock()
	if lm.holders[slot] != id {
		return
	}
	lm.holders[slot] = 0
	lm.free = append(lm.free, slot)
	lm.inFlight--
}

// configure applies l at now. A bucket that starts to apply starts full (a
// new limit does not refuse the first requests); a smaller Burst caps the
// tokens at once, a larger one fills at the refill rate. A lowered
// Concurrency refuses until enough in-flight attempts finish; none is cut.
func (lm *limiter) configure(l Limits, now time.Time) {
	if l == lm.lim {
		return
	}
	if l.RPM <= 0 {
		lm.lim, lm.bucket = l, false
		return
	}
	if !lm.bucket {
		lm.bucket, lm.tokens, lm.last = true, burst(l), now
	} else {
		lm.refill(now) // at the old rate, up to now
		lm.tokens = min(lm.tokens, burst(l))
	}
	lm.lim = l
}

// refill adds the tokens earned since last at lm.lim's rate, up to the
// burst. A now before last (a virtual clock reset, or a caller's clocks
// disagreeing) adds nothing and moves last back to now, so that refilling
// resumes from the reset clock instead of waiting for it to catch up with
// the old one.
func (lm *limiter) refill(now time.Time) {
	lm.tokens = lm.tokensAt(now)
	lm.last = now
}

// tokensAt is the bucket at now, without changing it. The rate is computed
// as nanoseconds × RPM / 60e9 so that whole tokens come out exact (100ms at
// 600 rpm is 1 token, not 0.99999…).
func (lm *limiter) tokensAt(now time.Time) float64 {
	if !lm.bucket {
		return 0
	}
	t := lm.tokens
	if d := now.Sub(lm.last); d > 0 {
		t += float64(d) * float64(lm.lim.RPM) / 60e9
	}
	return min(t, burst(lm.lim))
}

func (lm *limiter) snapshot(now time.Time) LimitSnapshot {
	lm.mu.Lock()
	defer lm.mu.Unlock()
	return LimitSnapshot{Tokens: lm.tokensAt(now), InFlight: lm.inFlight, Limited: lm.limited, Limits: lm.lim}
}

// Limit returns the named upstream's limiter at now; zero for a name never
// acquired.
func (r *Registry) Limit(name string, now time.Time) LimitSnapshot {
	v, ok := r.limiters.Load(name)
	if !ok {
		return LimitSnapshot{}
	}
	return v.(*limiter).snapshot(now)
}
