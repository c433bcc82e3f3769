package chain

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/detour-proxy/detour/internal/health"
	"github.com/detour-proxy/detour/policy"
)

// stepKind says what happens after one attempt.
type stepKind int

const (
	// kindDone: the request is finished (answered, stopped, the app went
	// away, or — for a hedged lane — another lane answered).
	kindDone stepKind = iota
	// kindNext: this upstream failed; the chain goes on.
	kindNext
	// kindRetry: try the same upstream again after step.wait.
	kindRetry
)

type step struct {
	kind stepKind
	wait time.Duration
	// fail is a retried attempt's failure: it becomes the chain's failure
	// if the retry never happens (the deadline passes during the wait, a
	// gate refuses it), so the app hears what the upstream said.
	fail *failure
}

// The two steps without a wait, as values, so that call sites read as words.
var (
	stepDone = step{kind: kindDone}
	stepNext = step{kind: kindNext}
)

// lane is one upstream's turn in a request: its attempts (the first and its
// retries) share a context that is cancelled when another lane wins the
// race to answer. Without hedging there is one lane at a time.
type lane struct {
	ctx    context.Context
	cancel context.CancelFunc
	// hedge marks a lane started because the one before it was slow.
	hedge bool
	// headers is closed when an attempt of this lane got response headers
	// or the lane ended: from then on no hedge is started on its account.
	headers chan struct{}
	once    sync.Once
}

func (s *session) newLane(hedge bool) *lane {
	ctx, cancel := context.WithCancel(s.req.Context())
	ln := &lane{ctx: ctx, cancel: cancel, hedge: hedge, headers: make(chan struct{})}
	s.mu.Lock()
	s.lanes = append(s.lanes, ln)
	if s.winner != nil {
		// Another lane answered between the caller's check and here.
		cancel()
	}
	s.mu.Unlock()
	return ln
}

func (ln *lane) gotHeaders() {
	if ln.headers != nil {
		ln.once.Do(func() { close(ln.headers) })
	}
}

// soloLane is the one lane of a chain walked one upstream at a time:
// nothing races it, so it needs no context, cancel or headers signal of its
// own, and the common path pays for none.
func (s *session) soloLane() *lane {
	// In the session, which is on the heap anyway: one allocation less.
	s.solo = lane{ctx: s.req.Context(), cancel: noCancel}
	return &s.solo
}

// noCancel is the solo lane's cancel: nothing races it.
func noCancel() {}

// claim makes ln the lane that answers the app. The first lane to claim
// wins and every other lane is cancelled; later claims by other lanes
// fail. Everything written to the app's ResponseWriter happens after a
// successful claim, so that two hedged upstreams never both write.
func (s *session) claim(ln *lane) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.winner == nil {
		if contextDone(s.req.Context()) && !s.drained() {
			// Nobody is left to answer: the lanes record the app going
			// away instead. (At the drain the app is still there, and is
			// answered.)
			return false
		}
		s.winner = ln
		for _, o := range s.lanes {
			if o != ln {
				o.cancel()
			}
		}
		if s.decided != nil {
			close(s.decided)
		}
	}
	return s.winner == ln
}

// isDecided reports whether a lane has claimed the app's response.
func (s *session) isDecided() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.winner != nil
}

// lost reports whether a lane other than ln has answered (ln nil: any
// lane).
func (s *session) lost(ln *lane) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.winner != nil && s.winner != ln
}

func (s *session) addFailure(f *failure) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failures = append(s.failures, f)
}

// breakerResult says how an attempt counts for its upstream's breaker.
// Timeouts are soft (one slow answer must not open it), server-side
// failures hard; the app's own errors, rate limits and quota (which have
// retries and cooldowns of their own), hedge losers and abandoned attempts
// do not count.
func breakerResult(a AttemptRecord, recorded bool) health.BreakerResult {
	if !recorded {
		return health.BreakerNeutral
	}
	switch a.Outcome {
	case OutcomeOK:
		return health.BreakerSuccess
	case OutcomeClientGone, OutcomeSkipped, OutcomeHedgeLost, OutcomeDrained:
		return health.BreakerNeutral
	}
	switch policy.Class(a.Class) {
	case policy.ClassTimeout:
		return health.BreakerSoft
	case policy.ClassServerError, policy.ClassOverloaded, policy.ClassUnreachable, policy.ClassBadResponse:
		return health.BreakerHard
	}
	return health.BreakerNeutral
}

// admit decides whether an attempt may go to u now: its cooldown, its
// breaker, and detour's own limits for it. A refusal is recorded as a
// skipped attempt. The last upstream of a chain passes cooldowns and an
// open breaker when never_skip_last is on; limits are never waived — they
// exist to protect exactly the upstream a failover storm lands on.
func (s *session) admit(u *policy.Upstream, last bool) (gate, bool) {
	now := s.r.now()
	// A spent budget is never waived, like limits: it is the operator's
	// word on the bill (spend.go).
	if s.overBudget(u, now) {
		return gate{}, false
	}
	force := last && s.pol.NeverSkipLast
	if cd, cooling := s.r.Health.CoolingDown(u.Name, now); cooling && !force {
		s.skip(u.Name, "cooling down until "+cd.Until.UTC().Format(time.RFC3339)+" ("+cd.Reason+")")
		s.comesBack(cd.Until, policy.Class(cd.Class) == policy.ClassQuotaExhausted)
		return gate{}, false
	}
	var g gate
	if s.pol.Breaker.Enabled {
		if s.rampedAway(u, last, now) {
			return gate{}, false
		}
		t, ok, why := s.r.Health.BreakerAllow(u.Name, s.pol.Breaker, now)
		switch {
		case ok:
			g.ticket = t
		case !force:
			s.skip(u.Name, why)
			if b := s.r.Health.Breaker(u.Name, now); !b.Until.IsZero() {
				s.comesBack(b.Until, false)
			} else {
				s.comesBack(now.Add(time.Second), false)
			}
			return gate{}, false
		}
	}
	if s.shed(u, now) {
		g.ticket.Done(health.BreakerNeutral, now)
		return gate{}, false
	}
	if u.Limits != (policy.Limits{}) {
		release, ok, why := s.r.Health.Acquire(u.Name, u.Limits, now)
		if !ok {
			g.ticket.Done(health.BreakerNeutral, now)
			s.skipClass(u.Name, policy.ClassLocalLimit, why)
			s.mu.Lock()
			s.limited = true
			s.mu.Unlock()
			return gate{}, false
		}
		g.release = release
	}
	return g, true
}

// comesBack notes when a skipped upstream may be tried again, for the
// app's retry-after when nothing answers.
func (s *session) comesBack(t time.Time, quota bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.soonest.IsZero() || t.Before(s.soonest) {
		s.soonest = t
	}
	if quota {
		s.outOfQuota++
	} else {
		s.unavailable++
	}
}

// retryPlan decides whether a failed attempt is tried again on the same
// upstream, and after how long: the vendor's own retry hint when it gave
// one and it fits both honor_retry_after_up_to and the deadline (else no
// retry: waiting longer than that is worse than the next upstream);
// otherwise exponential backoff with full jitter, uniform in
// [0, min(max, base·2^n)), so that many clients retrying after the same
// 429 do not arrive together. why explains a retry not taken.
func (s *session) retryPlan(v policy.Verdict, retry int, cooling bool) (wait time.Duration, why string, again bool) {
	act := s.pol.Action(v.Class)
	if act.Then != policy.Fallback || retry >= act.Retries || cooling {
		return 0, "", false
	}
	left := s.r.until(s.deadline)
	if v.RetryAfter > 0 {
		if limit := s.pol.Retry.HonorRetryAfterUpTo; v.RetryAfter > limit {
			return 0, fmt.Sprintf("; no retry: retry-after %s exceeds honor_retry_after_up_to %s", v.RetryAfter, limit), false
		}
		if v.RetryAfter >= left {
			return 0, fmt.Sprintf("; no retry: retry-after %s exceeds the %s left of the deadline", v.RetryAfter, left.Round(time.Millisecond)), false
		}
		return v.RetryAfter, " (retry-after)", true
	}
	ceil := s.pol.Retry.Base << retry
	if ceil > s.pol.Retry.Max || ceil <= 0 {
		ceil = s.pol.Retry.Max
	}
	if ceil > 0 {
		wait = time.Duration(rand.Int64N(int64(ceil)))
	}
	if wait >= left {
		return 0, "; no retry: the deadline is too close", false
	}
	return wait, " (backoff)", true
}

// runUpstream gives one upstream its turn: the first attempt and the
// retries its failure class allows. It returns kindDone when the request is
// finished, kindNext when the chain should go on.
func (s *session) runUpstream(t turn) stepKind {
	u, model, ln := t.u, t.model, t.ln
	defer ln.gotHeaders()
	var pending *failure
	for retry := 0; ; retry++ {
		// Translated before the gates, so that an upstream that cannot
		// take this request spends none of its rpm tokens, concurrency
		// slots or half-open probes on it. Made afresh for every try: a
		// conversion holds one attempt's stream state.
		var conv *conversion
		if !s.sameWire(u) {
			var reason string
			if conv, reason = s.convert(u, model); conv == nil {
				s.skipUnconvertible(u, model, retry, reason)
				return kindNext
			}
		}
		g, ok := s.admit(u, t.last)
		if !ok {
			if pending != nil {
				s.addFailure(pending)
			}
			return kindNext
		}
		st := s.newAttempt(t, retry, g, conv).run()
		if st.kind != kindRetry {
			return st.kind
		}
		pending = st.fail
		if k, again := s.waitToRetry(u, ln, st.wait, pending); !again {
			return k
		}
	}
}

// skipUnconvertible records an upstream that cannot take this request in
// its shape. What it cannot take is not dropped silently: it is skipped,
// for this request only, and the chain goes on. (A method of its own, as
// are runUpstream's other rare paths: a stream is pumped from below
// runUpstream's frame, which it holds for its whole life.)
func (s *session) skipUnconvertible(u *policy.Upstream, model string, retry int, reason string) {
	s.mu.Lock()
	s.rec.addAttempt(AttemptRecord{Upstream: u.Name, Model: model, Class: string(policy.ClassInvalidRequest), Outcome: OutcomeSkipped, Reason: reason, Retry: retry, Routing: true, seq: s.nextSeq()})
	s.failures = append(s.failures, &failure{upstream: u.Name, verdict: policy.Verdict{Class: policy.ClassInvalidRequest, Reason: reason}})
	s.mu.Unlock()
}

// waitToRetry waits before u is tried again. again is false when it is not:
// the drain, the app going away or another lane ended the wait, or the
// deadline passed during it; k then says how the turn ends.
func (s *session) waitToRetry(u *policy.Upstream, ln *lane, wait time.Duration, pending *failure) (k stepKind, again bool) {
	ctx, undrain := s.r.drainable(ln.ctx, s)
	err := s.r.sleep(ctx, wait)
	undrain()
	if err != nil {
		if s.drained() && !s.lost(ln) {
			s.addFailure(pending)
			s.drainedBeforeAnswer(ln)
			return kindDone, false
		}
		if contextDone(s.req.Context()) && !s.lost(ln) {
			s.clientGone("while waiting to retry " + u.Name)
		}
		// Otherwise another lane answered during the wait.
		return kindDone, false
	}
	if !s.r.now().Before(s.deadline) {
		s.addFailure(pending)
		s.skipClass(u.Name, policy.ClassTimeout, "deadline "+s.pol.Deadline.String()+" passed while waiting to retry")
		return kindNext, false
	}
	return 0, true
}

// candidate prepares chain[i]: a static upstream answers at once; an
// upstream with no mapping for the model is skipped; after the deadline
// nothing more is tried. ok false with done true: the request is finished
// (static answer); ok false otherwise: skip this one (stop when halt).
func (s *session) candidate(u *policy.Upstream) (model string, ok, halt bool) {
	m, mapped := u.MapModel(s.model)
	if !mapped {
		s.skipRouting(u.Name, "", fmt.Sprintf("no models entry matches %q", s.model))
		return "", false, false
	}
	if why := s.embedSkip(u); why != "" {
		s.skipRouting(u.Name, "", why)
		return "", false, false
	}
	if !s.r.now().Before(s.deadline) {
		s.addFailure(&failure{upstream: u.Name, verdict: policy.Verdict{Class: policy.ClassTimeout, Reason: "deadline passed before this upstream"}})
		s.skipClass(u.Name, policy.ClassTimeout, "deadline "+s.pol.Deadline.String()+" passed")
		return "", false, true
	}
	return m, true, false
}

// staticAfter returns the static upstream after chain[i], if any (the
// policy allows one, last).
func staticAfter(chain []*policy.Upstream, i int) *policy.Upstream {
	if n := len(chain); i+1 < n && chain[n-1].Static {
		return chain[n-1]
	}
	return nil
}

// runSequential walks the chain one upstream at a time.
func (s *session) runSequential(chain []*policy.Upstream) bool {
	var solo *lane
	for i, u := range chain {
		if u.Static {
			s.serveStatic(u)
			return true
		}
		model, ok, halt := s.candidate(u)
		if halt {
			// The deadline ends the real upstreams, not the last resort
			// that answers at once.
			if st := staticAfter(chain, i); st != nil {
				s.serveStatic(st)
				return true
			}
			break
		}
		if !ok {
			continue
		}
		if solo == nil {
			solo = s.soloLane()
		}
		k := s.runUpstream(turn{u: u, model: model, last: i == len(chain)-1, ln: solo})
		if k == kindDone {
			return true
		}
	}
	return false
}

// runHedged walks the chain like runSequential, but when the newest
// upstream has sent no response headers hedge_after after it started, the
// next upstream starts beside it. The first to commit answers the app; the
// others are cancelled and logged as hedge_lost. A lane that fails starts
// the next upstream at once, as without hedging.
func (s *session) runHedged(chain []*policy.Upstream) bool {
	type result struct {
		ln    *lane
		kind  stepKind
		panic any
	}
	s.decided = make(chan struct{})
	results := make(chan result, len(chain))
	running := 0
	next := 0
	var newest *lane
	var newestAt time.Time
	done := false
	staticAt := -1

	// start launches the next upstream that can be tried; false when none
	// is left.
	start := func(hedge bool) bool {
		if s.isDecided() {
			// A lane answered; its result may not be here yet (a stream
			// reports when it ends), but nothing new may start.
			next = len(chain)
			return false
		}
		for next < len(chain) {
			i := next
			u := chain[next]
			next++
			if u.Static {
				// A static answer is the end of the line: taken only
				// when nothing else is running (below), never as a hedge
				// against a real upstream.
				staticAt = i
				next = len(chain)
				return false
			}
			model, ok, halt := s.candidate(u)
			if halt {
				if st := staticAfter(chain, i); st != nil {
					staticAt = len(chain) - 1
				}
				next = len(chain)
				return false
			}
			if !ok {
				continue
			}
			// A lane started while another runs is a hedge, whether the
			// timer or a failure made room for it.
			ln := s.newLane(hedge || running > 0)
			newest, newestAt = ln, s.r.now()
			running++
			last := i == len(chain)-1
			go func() {
				// A panic in a lane must not kill the process: it is
				// handed to the request's goroutine, where net/http
				// recovers it as it does without hedging.
				defer func() {
					if p := recover(); p != nil {
						results <- result{ln: ln, kind: kindDone, panic: p}
					}
				}()
				results <- result{ln: ln, kind: s.runUpstream(turn{u: u, model: model, last: last, ln: ln})}
			}()
			return true
		}
		return false
	}

	var panicked any
	start(false)
	for running > 0 {
		var hedgeC <-chan time.Time
		var headersC <-chan struct{}
		var timer *time.Timer
		if !done && next < len(chain) && newest != nil {
			select {
			case <-newest.headers:
			default:
				timer = time.NewTimer(s.hedge - s.r.now().Sub(newestAt))
				hedgeC = timer.C
				headersC = newest.headers
			}
		}
		decidedC := s.decided
		if done {
			decidedC = nil
		}
		select {
		case <-decidedC:
			// A lane claimed the answer: stop arming hedges; wait for
			// the lanes to finish.
			done = true
		case r := <-results:
			running--
			r.ln.cancel()
			if r.panic != nil && panicked == nil {
				panicked = r.panic
				done = true
				for _, o := range s.lanes {
					o.cancel()
				}
			}
			if r.kind == kindDone && !done {
				done = true
				// The request is finished: a lane answered or stopped it
				// (its claim cancelled the others), or the app went away
				// (which cancels them all). Nothing new starts.
			}
			if !done && running == 0 {
				start(false)
			} else if !done && r.kind == kindNext {
				// A failed lane makes room for the next upstream at once.
				start(false)
			}
		case <-hedgeC:
			start(true)
		case <-headersC:
		}
		if timer != nil {
			timer.Stop()
		}
	}
	if panicked != nil {
		panic(panicked)
	}
	if done {
		return true
	}
	if staticAt >= 0 {
		s.serveStatic(chain[staticAt])
		return true
	}
	return false
}
