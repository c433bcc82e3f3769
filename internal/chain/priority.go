package chain

import (
	"strconv"
	"time"

	"github.com/detour-proxy/detour/policy"
)

// HeaderPriority lets an app say how much a request matters: high, normal
// or low. Like every X-Detour-* header it is read by detour and never
// forwarded (dropRequestHeader).
const HeaderPriority = "X-Detour-Priority"

// pickPriority sets the request's priority — the x-detour-priority header
// when it names one, else the priority_by_tier entry of its tier, else
// normal — and the hedge_after that goes with it. A header that names no
// priority is noted among the record's reasons and ignored.
func (s *session) pickPriority() {
	h := s.req.Header.Get(HeaderPriority)
	p, fromHeader := policy.ParsePriority(h)
	if !fromHeader {
		if h != "" {
			s.rec.Reasons = append(s.rec.Reasons, "header:x-detour-priority names no priority (high, normal, low): "+truncate(h, 40))
		}
		p = policy.PriorityNormal
		if tp, ok := s.pol.Priorities.ByTier[s.rec.Tier]; ok && s.rec.Tier != "" {
			p = tp
		}
	}
	s.priority = p
	s.rec.Priority = string(p)
	s.hedge = s.pol.HedgeAfterFor(p)
}

// shed reports whether a low-priority request must leave u alone because
// u already has limits.shed_low_at of its concurrency in flight, and then
// records the skip as detour's own limit (class local_limit): the request
// goes on to the next upstream, and when every one sheds or limits it the
// app gets 429 with retry-after, which its SDK backs off and retries —
// batch work waits, realtime work keeps the slots.
func (s *session) shed(u *policy.Upstream, now time.Time) bool {
	if s.priority != policy.PriorityLow || u.ShedLowAt <= 0 {
		return false
	}
	n := s.r.Health.Limit(u.Name, now).InFlight
	if n < u.ShedLowAt {
		return false
	}
	s.skipClass(u.Name, policy.ClassLocalLimit, "low priority shed: "+strconv.Itoa(n)+" in flight, limits.shed_low_at allows low requests below "+
		strconv.Itoa(u.ShedLowAt)+" of concurrency "+strconv.Itoa(u.Limits.Concurrency))
	s.mu.Lock()
	s.limited = true
	s.mu.Unlock()
	return true
}
