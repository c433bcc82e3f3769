package policy

import (
	"math"
	"strings"
	"time"
)

// Priority is a request's priority: realtime work first, batch work waits.
// It comes from the app's x-detour-priority header, or from its tier
// (priority_by_tier); a request with neither is PriorityNormal.
type Priority string

// The priorities.
const (
	PriorityHigh   Priority = "high"
	PriorityNormal Priority = "normal"
	PriorityLow    Priority = "low"
)

// ParsePriority reads a priority name (case and surrounding space
// ignored); ok is false for anything else.
func ParsePriority(s string) (Priority, bool) {
	switch p := Priority(strings.ToLower(strings.TrimSpace(s))); p {
	case PriorityHigh, PriorityNormal, PriorityLow:
		return p, true
	}
	return "", false
}

// PriorityPolicy is what the priorities change. Always filled.
type PriorityPolicy struct {
	// HedgeAfter is hedge_after per priority, hedge_after_by_priority
	// applied over hedge_after; zero: no hedging for that priority.
	HedgeAfter map[Priority]time.Duration
	// ByTier is priority_by_tier; nil when the policy has none.
	ByTier map[string]Priority
}

// HedgeAfterFor is the hedge delay of a request of priority p (0: no
// hedging); an unknown priority is normal.
func (c *Compiled) HedgeAfterFor(p Priority) time.Duration {
	if d, ok := c.Priorities.HedgeAfter[p]; ok {
		return d
	}
	if d, ok := c.Priorities.HedgeAfter[PriorityNormal]; ok {
		return d
	}
	return c.HedgeAfter
}

// shedLowAt compiles limits.shed_low_at into the in-flight count at which
// low-priority requests skip the upstream; p is the limits' field path.
func (k *compiler) shedLowAt(p string, lf *LimitsFile, l Limits) int {
	if lf == nil || lf.ShedLowAt == 0 {
		return 0
	}
	if lf.ShedLowAt < 0 || lf.ShedLowAt > 1 {
		k.errorf(p+".shed_low_at", "must be a fraction above 0 and at most 1 of limits.concurrency, e.g. 0.5; got %g", lf.ShedLowAt)
		return 0
	}
	if l.Concurrency <= 0 {
		k.errorf(p+".shed_low_at", "has no effect without limits.concurrency, of which it is a fraction")
		return 0
	}
	// Rounded up, so that a fraction never sheds low requests with the
	// upstream idle: 0.1 of 4 is 1 in flight.
	return int(math.Ceil(lf.ShedLowAt * float64(l.Concurrency)))
}

// priorities compiles hedge_after_by_priority and priority_by_tier. It
// runs after hedge_after and the deadline.
func (k *compiler) priorities(f *File) {
	c := k.c
	pp := PriorityPolicy{HedgeAfter: map[Priority]time.Duration{
		PriorityHigh: c.HedgeAfter, PriorityNormal: c.HedgeAfter, PriorityLow: c.HedgeAfter,
	}}
	defer func() { c.Priorities = pp }()
	if h := f.HedgeAfterByPriority; h != nil {
		for _, e := range []struct {
			p Priority
			d Duration
		}{{PriorityHigh, h.High}, {PriorityNormal, h.Normal}, {PriorityLow, h.Low}} {
			if e.d == "" {
				continue
			}
			path := "hedge_after_by_priority." + string(e.p)
			d, err := e.d.Parse()
			switch {
			case err != nil:
				k.errorf(path, "%v", err)
			case d > 0 && d >= c.Deadline:
				k.errorf(path, "%s is not shorter than deadline (%s): no hedge would ever start", d, c.Deadline)
			default:
				pp.HedgeAfter[e.p] = d
			}
		}
	}
	for _, tier := range sortedKeys(f.PriorityByTier) {
		path := "priority_by_tier." + tier
		if !tierName.MatchString(tier) {
			k.errorf(path, "tier names use lowercase letters, digits, '_' and '-'")
			continue
		}
		pr, ok := ParsePriority(f.PriorityByTier[tier])
		if !ok || pr != Priority(f.PriorityByTier[tier]) {
			k.errorf(path, "must be one of high, normal, low; got %q", f.PriorityByTier[tier])
			continue
		}
		if pp.ByTier == nil {
			pp.ByTier = map[string]Priority{}
		}
		pp.ByTier[tier] = pr
	}
}
