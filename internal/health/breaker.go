package health

import (
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/detour-proxy/detour/policy"
)

// A circuit breaker per upstream name keeps a failing upstream out of chains
// for a while, so that requests stop paying its timeouts, then lets a few
// probes through to learn whether it is back.
//
// Every method takes now and none reads the clock: a simulation drives the
// breakers with a virtual clock, and tests step time exactly.

// BreakerConfig is how a breaker judges its upstream: the policy's own
// breaker section, one type for both (policy.BreakerPolicy documents what
// the zero value of each field means here). Enabled is the chain's switch;
// a breaker that is asked judges whatever it says.
type BreakerConfig = policy.BreakerPolicy

// FallbackOpenFor is how long a breaker stays open when its config says 0:
// short enough to be harmless, long enough not to spin.
const FallbackOpenFor = time.Second

// normalized applies the zero-value meanings documented on BreakerConfig.
func normalized(c BreakerConfig) BreakerConfig {
	if c.Window <= 0 {
		c.Window = 1
	}
	if c.MinRequests <= 0 || c.MinRequests > c.Window {
		c.MinRequests = c.Window
	}
	if c.HalfOpenProbes <= 0 {
		c.HalfOpenProbes = 1
	}
	if c.OpenFor <= 0 {
		c.OpenFor = FallbackOpenFor
	}
	return c
}

// BreakerState is where a breaker is in its cycle.
type BreakerState int

// The states of a breaker.
const (
	// BreakerClosed: attempts go through and their results are counted.
	BreakerClosed BreakerState = iota
	// BreakerOpen: no attempt goes through until the open period ends.
	BreakerOpen
	// BreakerHalfOpen: up to HalfOpenProbes probes go through; they decide
	// whether the breaker closes or opens again.
	BreakerHalfOpen
)

// String is the state's name in /status and metrics.
func (s BreakerState) String() string {
	switch s {
	case BreakerClosed:
		return "closed"
	case BreakerOpen:
		return "open"
	case BreakerHalfOpen:
		return "half_open"
	}
	return "BreakerState(" + strconv.Itoa(int(s)) + ")"
}

// BreakerResult is how a finished attempt counts towards its upstream's
// breaker.
type BreakerResult int

// The results an attempt can have for a breaker.
const (
	// BreakerNeutral is not counted anywhere: client errors, rate limits,
	// quota (a cooldown's business), hedge losers, a client gone. None of
	// them says the upstream is broken.
	BreakerNeutral BreakerResult = iota
	// BreakerSuccess: the upstream answered.
	BreakerSuccess
	// BreakerHard: the upstream failed (5xx, overloaded, connection
	// refused, a body that is not its wire format).
	BreakerHard
	// BreakerSoft: the upstream timed out. Counted apart from hard failures
	// so that a slow upstream can have its own, usually more patient,
	// thresholds.
	BreakerSoft
)

// String is the result's name in logs.
func (r BreakerResult) String() string {
	switch r {
	case BreakerNeutral:
		return "neutral"
	case BreakerSuccess:
		return "success"
	case BreakerHard:
		return "hard"
	case BreakerSoft:
		return "soft"
	}
	return "BreakerResult(" + strconv.Itoa(int(r)) + ")"
}

// Ticket is one attempt admitted by BreakerAllow. Done must be called exactly
// once with the attempt's result; calling it on the zero Ticket (what a
// refusal returns) does nothing, so a caller that sends anyway (the last
// upstream of a chain is never skipped) may call Done unconditionally.
//
// A Ticket remembers the breaker's generation when it was admitted, which
// changes on every state change and on ResetBreaker. A result counts only in
// the generation that admitted it: a slow request sent while closed that
// fails after the breaker opened says nothing new (the breaker already knows
// the upstream was failing then) and must not extend the open period, reset
// the next closed window, or fail a half-open period whose probes were sent
// after the upstream had time to recover. A success from an earlier
// generation is ignored for the same reason: only probes sent in this
// half-open period may close it.
type Ticket struct {
	b     *breaker
	gen   uint64
	probe uint64 // the probe's id in a half-open period; 0 when closed
	// fleetProbe is set when the Fleet granted this probe a slot of the
	// half-open period that began at period, out of k.
	fleetProbe bool
	period     time.Time
	k          int
}

// Done records the attempt's result at now.
func (t Ticket) Done(res BreakerResult, now time.Time) {
	if t.b == nil {
		return
	}
	ev := t.b.done(t, res, now)
	if t.b.reg == nil || t.b.reg.fleet == nil {
		return
	}
	f := t.b.reg.fleet
	if t.fleetProbe {
		f.ProbeDone(t.b.name, t.period, res, t.k)
	}
	if ev.opened {
		f.BreakerOpened(t.b.name, ev.since, ev.until, ev.reason)
	}
}

// openEvent is what a Done changed that the fleet must hear of.
type openEvent struct {
	opened       bool
	since, until time.Time
	reason       string
}

// BreakerSnapshot is one breaker's state, for /status and metrics.
type BreakerSnapshot struct {
	State BreakerState
	// Since is when the breaker entered State; zero for a breaker that has
	// never changed state or was reset by ResetBreaker (which takes no
	// time). A half-open breaker entered that state when its open period
	// ended, even if no request came to notice until later.
	Since time.Time
	// Until is, when open, when the breaker turns half-open; zero otherwise.
	Until time.Time
	// Reason is why the breaker last opened (kept after it closes).
	Reason string
	// ConsecutiveFailures and ConsecutiveTimeouts are the runs of hard and
	// soft failures so far (closed only; opening clears them).
	ConsecutiveFailures int
	ConsecutiveTimeouts int
	// WindowCount is how many counted attempts the window holds, of which
	// WindowFailures were hard and WindowTimeouts soft failures.
	WindowCount, WindowFailures, WindowTimeouts int
	// Probes is, when half-open, how many probes of this period are in
	// flight or have succeeded (a neutral probe gives its slot back).
	Probes int
	// Opens is how many times the breaker opened since start (re-opening
	// after a failed probe included).
	Opens uint64
	// Fleet is true when State was set by another member of the fleet
	// (an open period it started, or a half-open period its probes
	// closed); false for this process's own doing.
	Fleet bool
}

// breaker is one upstream's breaker. Its mutex is per upstream, so requests
// to different upstreams never contend, and it is held only for a few
// counter updates.
type breaker struct {
	// name and reg are for telling the Registry's Fleet what changed.
	name string
	reg  *Registry
	// fleet: the current state was set by another member (Fleet).
	fleet bool

	mu  sync.Mutex
	raw BreakerConfig // as last passed in: an unchanged config is not normalized again
	cfg BreakerConfig // raw, normalized

	state        BreakerState
	gen          uint64 // bumped on every state change and reset; see Ticket
	since, until time.Time
	reason       string
	// openMsg is the refusal while open, built once per open period so that
	// refusing the many requests of an outage does not allocate.
	openMsg string
	opens   uint64

	// Closed: the runs, and a ring of the last cfg.Window counted results
	// with the number of hard and soft ones in it.
	consecFail, consecSoft int
	ring                   []BreakerResult
	n, next                int
	fails, soft            int

	// Half-open: the ids of probes in flight (at most K, so a scan is
	// cheap; it makes a second Done of the same probe harmless), and how
	// many succeeded.
	probeSeq uint64
	probing  []uint64
	probeOK  int
	// halfMsg is the last half-open refusal and the counts it was built for.
	halfMsg        string
	halfIn, halfOK int
}

// breaker returns the named upstream's breaker, creating it on first use.
func (r *Registry) breaker(name string) *breaker {
	if v, ok := r.breakers.Load(name); ok {
		return v.(*breaker)
	}
	v, _ := r.breakers.LoadOrStore(name, &breaker{name: name, reg: r})
	return v.(*breaker)
}

// BreakerAllow asks whether an attempt may go to the named upstream at now,
// judged by cfg (the policy's current config: a reload applies from the next
// call, see configure). Closed: yes. Open: no, until OpenFor has passed since
// it opened; then it turns half-open. Half-open: yes while fewer than K
// probes of this period are in flight or have succeeded; otherwise no.
// When !ok, reason says why, e.g. "breaker open until
// 2026-11-30T10:00:00Z (5 consecutive failures)" or "breaker half-open: 3
// probes in flight", and t is the zero Ticket.
//
// With a Fleet, a half-open probe also needs one of the K slots of the
// fleet's half-open period (the local K still bounds this process); a
// Fleet that does not answer leaves the decision to the local count.
func (r *Registry) BreakerAllow(name string, cfg BreakerConfig, now time.Time) (t Ticket, ok bool, reason string) {
	b := r.breaker(name)
	t, ok, reason = b.allow(cfg, now)
	if !ok || t.probe == 0 || r.fleet == nil {
		return t, ok, reason
	}
	granted, err := r.fleet.ClaimProbe(name, t.period, t.k)
	if err != nil {
		return t, true, ""
	}
	if !granted {
		b.done(t, BreakerNeutral, now) // the local slot goes back
		return Ticket{}, false, fleetHalfOpenRefusal(t.k)
	}
	t.fleetProbe = true
	return t, true, ""
}

func (b *breaker) allow(cfg BreakerConfig, now time.Time) (Ticket, bool, string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.configure(cfg)
	if b.state == BreakerOpen {
		if now.Before(b.until) {
			return Ticket{}, false, b.openMsg
		}
		b.halfOpen()
	}
	if b.state == BreakerHalfOpen {
		k := b.cfg.HalfOpenProbes
		if b.probeOK >= k { // K lowered by a reload below what already succeeded
			b.close(now)
			return Ticket{b: b, gen: b.gen}, true, ""
		}
		if len(b.probing)+b.probeOK >= k {
			return Ticket{}, false, b.halfOpenRefusal()
		}
		b.probeSeq++
		b.probing = append(b.probing, b.probeSeq)
		return Ticket{b: b, gen: b.gen, probe: b.probeSeq, period: b.since, k: k}, true, ""
	}
	return Ticket{b: b, gen: b.gen}, true, ""
}

// configure applies cfg if it differs from the last one. A new window size
// keeps the most recent results that fit, so a reload neither forgets the
// current trend nor judges it over results it no longer has room for.
func (b *breaker) configure(cfg BreakerConfig) {
	if cfg == b.raw && b.ring != nil {
		return
	}
	b.raw = cfg
	b.cfg = normalized(cfg)
	if len(b.ring) == b.cfg.Window {
		return
	}
	ring := make([]BreakerResult, b.cfg.Window)
	keep := min(b.n, len(ring))
	// The oldest of the kept results is keep places behind next.
	for i := range keep {
		ring[i] = b.ring[(b.next-keep+i+len(b.ring))%len(b.ring)]
	}
	b.ring, b.n, b.next = ring, keep, keep%len(ring)
	b.fails, b.soft = 0, 0
	for _, res := range ring[:keep] {
		b.count(res, 1)
	}
}

// count adds d to the window's tally of res.
func (b *breaker) count(res BreakerResult, d int) {
	switch res {
	case BreakerHard:
		b.fails += d
	case BreakerSoft:
		b.soft += d
	}
}

func (b *breaker) done(t Ticket, res BreakerResult, now time.Time) openEvent {
	b.mu.Lock()
	defer b.mu.Unlock()
	if t.gen != b.gen {
		return openEvent{} // admitted in an earlier state or period; see Ticket
	}
	switch b.state {
	case BreakerClosed:
		b.record(res, now)
	case BreakerHalfOpen:
		b.probeDone(t.probe, res, now)
	}
	// Open: no ticket of an open generation exists (open refuses, and its
	// end bumps the generation).
	if b.state == BreakerOpen && b.gen != t.gen {
		return openEvent{opened: true, since: b.since, until: b.until, reason: b.reason}
	}
	return openEvent{}
}

// record counts a closed-state result and opens the breaker if a trigger
// fired.
func (b *breaker) record(res BreakerResult, now time.Time) {
	switch res {
	case BreakerSuccess:
		b.consecFail, b.consecSoft = 0, 0
	case BreakerHard:
		b.consecFail++
	case BreakerSoft:
		b.consecSoft++
	default:
		return // neutral: not the upstream's doing, not counted
	}
	if b.n == len(b.ring) {
		b.count(b.ring[b.next], -1) // the oldest result leaves the window
	} else {
		b.n++
	}
	b.ring[b.next] = res
	b.next = (b.next + 1) % len(b.ring)
	b.count(res, 1)
	// A success never opens a breaker, even if a reload lowered a threshold
	// below what the window already shows: the next failure will.
	if res == BreakerSuccess {
		return
	}
	if why := b.tripped(); why != "" {
		b.open(now, why)
	}
}

// tripped returns why the breaker must open now, or "". It formats only when
// a trigger fired, so counting stays allocation-free.
func (b *breaker) tripped() string {
	c := b.cfg
	switch {
	case c.ConsecutiveFailures > 0 && b.consecFail >= c.ConsecutiveFailures:
		return plural(b.consecFail, "consecutive failure", "consecutive failures")
	case c.ConsecutiveTimeouts > 0 && b.consecSoft >= c.ConsecutiveTimeouts:
		return plural(b.consecSoft, "consecutive timeout", "consecutive timeouts")
	case b.n < c.MinRequests:
		return ""
	// Divide rather than multiply the rate by n: k/n rounds to the same
	// float as the decimal rate it equals (14/25 == 0.56), while 0.56*25 is
	// 14.000000000000002 and would miss the threshold.
	case c.FailureRate > 0 && float64(b.fails)/float64(b.n) >= c.FailureRate:
		return rateReason("failure", b.fails, b.n)
	case c.TimeoutRate > 0 && float64(b.soft)/float64(b.n) >= c.TimeoutRate:
		return rateReason("timeout", b.soft, b.n)
	}
	return ""
}

// rateReason is e.g. "failure rate 55% (11 of last 20 attempts)".
func rateReason(kind string, k, n int) string {
	return kind + " rate " + strconv.Itoa(k*100/n) + "% (" + strconv.Itoa(k) + " of last " + plural(n, "attempt", "attempts") + ")"
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}

// open starts an open period at now. The window and the runs are cleared so
// that, once the breaker closes again, the failures that opened it do not
// open it again at the first new failure.
func (b *breaker) open(now time.Time, why string) {
	b.gen++
	b.state = BreakerOpen
	b.since = now
	b.until = now.Add(b.cfg.OpenFor)
	b.reason = why
	b.openMsg = "breaker open until " + b.until.UTC().Format(time.RFC3339) + " (" + why + ")"
	b.opens++
	b.fleet = false
	b.clear()
}

// halfOpen ends an open period. The breaker entered half-open when the
// period ended, not when a request came to notice, so Since is the same
// whatever the traffic (and Breaker's read-only view agrees with it).
func (b *breaker) halfOpen() {
	b.gen++
	b.state = BreakerHalfOpen
	b.since = b.until
	b.until = time.Time{}
	b.clear()
}

// close ends a half-open period whose K probes succeeded, with a fresh
// window.
func (b *breaker) close(now time.Time) {
	b.gen++
	b.fleet = false
	b.state = BreakerClosed
	b.since = now
	b.until = time.Time{}
	b.clear()
}

// clear forgets the window, the runs and the probes.
func (b *breaker) clear() {
	b.consecFail, b.consecSoft = 0, 0
	b.n, b.next, b.fails, b.soft = 0, 0, 0, 0
	b.probing = b.probing[:0]
	b.probeOK = 0
}

// probeDone counts a half-open probe's result: a success towards K, a hard or
// soft failure opens the breaker again, a neutral result gives the probe's
// slot back so that another request may probe.
func (b *breaker) probeDone(id uint64, res BreakerResult, now time.Time) {
	i := slices.Index(b.probing, id)
	if i < 0 {
		return // Done called twice for this probe
	}
	b.probing[i] = b.probing[len(b.probing)-1]
	b.probing = b.probing[:len(b.probing)-1]
	switch res {
	case BreakerSuccess:
		b.probeOK++
		if b.probeOK >= b.cfg.HalfOpenProbes {
			b.close(now)
		}
	case BreakerHard:
		b.open(now, "half-open probe failed")
	case BreakerSoft:
		b.open(now, "half-open probe timed out")
	}
}

// halfOpenRefusal is e.g. "breaker half-open: 3 probes in flight", rebuilt
// only when the counts change.
func (b *breaker) halfOpenRefusal() string {
	in, ok := len(b.probing), b.probeOK
	if b.halfMsg != "" && b.halfIn == in && b.halfOK == ok {
		return b.halfMsg
	}
	msg := "breaker half-open: " + plural(in, "probe in flight", "probes in flight")
	if ok > 0 {
		msg += ", " + strconv.Itoa(ok) + " succeeded"
	}
	b.halfMsg, b.halfIn, b.halfOK = msg, in, ok
	return msg
}

// snapshot is the breaker's state at now, read-only: an open period that has
// ended shows as half-open, as the next BreakerAllow will find it.
func (b *breaker) snapshot(now time.Time) BreakerSnapshot {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := BreakerSnapshot{
		State:               b.state,
		Since:               b.since,
		Until:               b.until,
		Reason:              b.reason,
		ConsecutiveFailures: b.consecFail,
		ConsecutiveTimeouts: b.consecSoft,
		WindowCount:         b.n,
		WindowFailures:      b.fails,
		WindowTimeouts:      b.soft,
		Opens:               b.opens,
		Fleet:               b.fleet,
	}
	switch {
	case b.state == BreakerHalfOpen:
		s.Probes = len(b.probing) + b.probeOK
	case b.state == BreakerOpen && !now.Before(b.until):
		s.State, s.Since, s.Until = BreakerHalfOpen, b.until, time.Time{}
	}
	return s
}

// Breaker returns the named upstream's breaker at now; a closed, zero
// snapshot for a name no breaker was asked about.
func (r *Registry) Breaker(name string, now time.Time) BreakerSnapshot {
	v, ok := r.breakers.Load(name)
	if !ok {
		return BreakerSnapshot{}
	}
	return v.(*breaker).snapshot(now)
}

// Breakers returns every breaker at now, by upstream name.
func (r *Registry) Breakers(now time.Time) map[string]BreakerSnapshot {
	out := map[string]BreakerSnapshot{}
	r.breakers.Range(func(k, v any) bool {
		out[k.(string)] = v.(*breaker).snapshot(now)
		return true
	})
	return out
}

// ResetBreaker closes the named upstream's breaker with a fresh window (an
// operator's override). Tickets admitted before the reset no longer count.
// Reason and Opens are kept: they are history. Since becomes zero, as the
// reset takes no time.
func (r *Registry) ResetBreaker(name string) {
	r.resetBreaker(name)
	if r.fleet != nil {
		r.fleet.BreakerReset(name)
	}
}

func (r *Registry) resetBreaker(name string) {
	v, ok := r.breakers.Load(name)
	if !ok {
		return
	}
	b := v.(*breaker)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.gen++
	b.state = BreakerClosed
	b.fleet = false
	b.since, b.until = time.Time{}, time.Time{}
	b.clear()
}
