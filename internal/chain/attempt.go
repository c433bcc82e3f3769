package chain

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/detour-proxy/detour/internal/health"
	"github.com/detour-proxy/detour/internal/telemetry"
	"github.com/detour-proxy/detour/policy"
	"github.com/detour-proxy/detour/rewrite"
	"github.com/detour-proxy/detour/rewrite/sse"
	"github.com/detour-proxy/detour/rewrite/translate"
)

// Timeout phases, as reported in policy.Outcome.Timeout and the log.
const (
	phaseConnect   = "connect"
	phaseFirstByte = "first_byte"
	phaseIdle      = "idle"
	phaseDeadline  = "deadline"
)

// attemptTimer cancels an attempt when the phase it is armed for runs out.
// One timer per attempt, re-armed as the attempt moves from waiting for
// headers to reading the body, and on every read of the body. It runs on
// the runtime's timers, so that under testing/synctest it runs on the
// bubble's clock; the lengths it is armed with are computed from the
// Runner's clock (attempt.bounded).
type attemptTimer struct {
	mu     sync.Mutex
	t      *time.Timer
	cancel context.CancelFunc
	phase  string
	fired  string
}

func (a *attemptTimer) arm(d time.Duration, phase string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.fired != "" {
		return
	}
	a.phase = phase
	if d <= 0 {
		d = time.Nanosecond
	}
	if a.t == nil {
		a.t = time.AfterFunc(d, a.fire)
		return
	}
	a.t.Reset(d)
}

func (a *attemptTimer) fire() {
	a.mu.Lock()
	a.fired = a.phase
	a.mu.Unlock()
	a.cancel()
}

func (a *attemptTimer) stop() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.t != nil {
		a.t.Stop()
	}
}

// firedPhase is the phase whose timeout cancelled the attempt, or "".
func (a *attemptTimer) firedPhase() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.fired
}

// timedReader re-arms the attempt's timer on every read, so that the idle
// timeout measures silence between bytes, not the length of the stream.
type timedReader struct {
	r io.Reader
	a *attempt
}

func (t *timedReader) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if n > 0 {
		t.a.timer.arm(t.a.readTimeout())
	}
	return n, err
}

// attempt is one try of one upstream: the request sent once, its answer
// read and judged, its record and what it holds from the gates. Its
// methods are the attempt's steps; everything they share about the try
// lives here rather than in their parameters.
type attempt struct {
	s *session
	u *policy.Upstream
	// model is the model name this upstream is asked for.
	model string
	// last: u is the chain's last upstream (a failure is exhausted, not
	// fallback).
	last bool
	ln   *lane
	// conv carries the request across shapes; nil on the same-shape path.
	conv *conversion
	// gate is what the attempt holds from the health registry.
	gate gate
	// timer bounds the attempt's phases; body reads the answer through it.
	timer attemptTimer
	body  timedReader
	// start is when the attempt was sent, on the Runner's clock (phase
	// bounds); sent is the same on the wall clock (the record's durations).
	start time.Time
	sent  time.Time
	// doneAt is when the record was finished, on the Runner's clock.
	doneAt time.Time
	// commitBy is when a stream must have reached its commit point (zero:
	// not a stream); committed is set at the commit point.
	commitBy  time.Time
	committed bool
	// idx is where the record sits in rec.Attempts once written (-1
	// before); ar is the record.
	idx   int
	ar    AttemptRecord
	usage usageMerger
	// rd reads a streamed answer; out writes it to the app once
	// committed.
	rd  sse.Reader
	out streamOut
	// held is the pooled buffer of the events held back before the
	// commit point, while one is in use (heldBuffer).
	held *[firstHeld]byte
	// dn registers the attempt with the drain while it runs.
	dn drainNode
	// span is the attempt's trace span; nil when not traced.
	span *telemetry.Attempt
	// parts hold the upstream request's URL and body reader.
	parts upstreamParts
}

// gate is what an attempt holds from the health registry: a breaker
// ticket and a concurrency slot, both given back when it ends.
type gate struct {
	ticket  health.Ticket
	release func()
}

// newAttempt prepares try number retry of u on lane ln, holding g.
// The request's first attempt is the session's own (most requests make
// one): an allocation less.
func (s *session) newAttempt(t turn, retry int, g gate, conv *conversion) *attempt {
	var a *attempt
	if s.firstTaken.CompareAndSwap(false, true) {
		a = &s.first
	} else {
		a = new(attempt)
	}
	a.s, a.u, a.model, a.last, a.ln, a.conv, a.gate, a.idx = s, t.u, t.model, t.last, t.ln, conv, g, -1
	a.ar = AttemptRecord{Upstream: t.u.Name, Model: t.model, Retry: retry, Hedge: t.ln.hedge}
	a.body.a = a
	return a
}

// turn is one upstream's turn in a request: its first attempt and its
// retries share it.
type turn struct {
	u     *policy.Upstream
	model string
	last  bool
	ln    *lane
}

// finish fills in the attempt's record as it ends (for the answering
// attempt: at its commit point) and appends it to the request's.
func (a *attempt) finish(outcome, class, reason string, status int) {
	a.ar.Outcome, a.ar.Class, a.ar.Reason, a.ar.Status = outcome, class, reason, status
	a.ar.Duration = time.Since(a.sent)
	a.doneAt = a.s.r.now()
	a.record()
}

// record appends the attempt's record to the request's.
func (a *attempt) record() {
	s := a.s
	s.mu.Lock()
	defer s.mu.Unlock()
	a.idx = len(s.rec.Attempts)
	s.rec.addAttempt(a.ar)
}

// classify judges an outcome of this attempt by the policy.
func (a *attempt) classify(o policy.Outcome) policy.Verdict {
	o.Shape = a.u.Shape
	return a.s.pol.ClassifyFor(a.u.Name, o, a.s.r.now())
}

// bounded bounds a phase timeout, before the commit point, by what is left
// of the request's deadline.
func (a *attempt) bounded(d time.Duration, phase string) (time.Duration, string) {
	if left := a.s.r.until(a.s.deadline); left < d {
		return left, phaseDeadline
	}
	return d, phase
}

// readTimeout is the timeout and phase for the next read of the answer:
// idle, bounded by the deadline and, for a stream before its commit point,
// by first_byte counted from the attempt's start; after the commit point
// idle alone (a long answer is fine as long as bytes keep coming).
func (a *attempt) readTimeout() (time.Duration, string) {
	idle := a.u.Timeouts.Idle
	if a.committed {
		return idle, phaseIdle
	}
	d, ph := a.bounded(idle, phaseIdle)
	if !a.commitBy.IsZero() {
		if left := a.s.r.until(a.commitBy); left < d {
			return left, phaseFirstByte
		}
	}
	return d, ph
}

// run sends the request to the upstream once and handles its answer. It
// says whether the request is finished (answered, stopped, or the app
// went away), should go on to the next upstream, or should try this one
// again after a wait.
//
// run only dispatches: each kind of answer is handled by a method of its
// own, so that a committed stream, which is pumped from below this frame
// for as long as it lasts, does not carry the locals of the paths it did
// not take on its goroutine's stack.
func (a *attempt) run() step {
	s, u := a.s, a.u
	a.ar.seq = s.nextSeq()
	a.start, a.sent = s.r.clocks()
	a.startSpan()
	// In flight for /status until the attempt is over, a stream's last
	// event included.
	s.r.Health.Begin(u.Name)
	s.r.windows.Begin(u.Name)
	defer a.end()

	ctx, cancel := context.WithCancel(a.ln.ctx)
	defer cancel()
	a.timer.cancel = cancel
	defer a.timer.stop()
	// The drain ends the attempt through its context too; end unregisters
	// it.
	a.dn = drainNode{s: s, cancel: cancel}
	s.r.addDrain(&a.dn)
	// Before the commit point an attempt is bounded both by its own phase
	// timeout and by what is left of the request's deadline.
	a.timer.arm(a.bounded(u.Timeouts.FirstByte, phaseFirstByte))

	if a.conv != nil {
		a.ar.Translated = true
		a.ar.Notes = a.conv.notes
	}

	upReq, err := s.buildRequest(ctx, u, a.model, a.conv, &a.parts)
	if err != nil {
		return a.unbuildable(err)
	}
	a.span.Inject(upReq.Header)
	resp, err := s.r.Transports.ForUpstream(u).RoundTrip(upReq)
	if err != nil {
		return a.roundTripFailed(err)
	}
	return a.answered(resp)
}

// answered handles the upstream's answer, by its kind.
func (a *attempt) answered(resp *http.Response) step {
	defer resp.Body.Close()
	a.ar.Headers = time.Since(a.sent)
	a.ln.gotHeaders()

	a.body.r = resp.Body
	a.timer.arm(a.readTimeout())

	switch {
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		return a.errorAnswer(resp)
	case a.s.stream && isEventStream(resp.Header):
		return a.streamAnswer(resp)
	}
	return a.wholeAnswer(resp)
}

// unbuildable ends an attempt whose upstream request could not be built.
// Only SetModel can fail there, and the body was already parsed.
func (a *attempt) unbuildable(err error) step {
	s := a.s
	if !s.claim(a.ln) {
		return a.unclaimed(string(policy.ClassInvalidRequest), 0)
	}
	a.finish(OutcomeStop, string(policy.ClassInvalidRequest), err.Error(), 0)
	s.writeAppError(http.StatusBadRequest, policy.ClassInvalidRequest, "detour: "+err.Error(), 0)
	return stepDone
}

// roundTripFailed judges an attempt that got no response headers.
func (a *attempt) roundTripFailed(err error) step {
	if st, over := a.interrupted(0, "while waiting for "+a.u.Name); over {
		return st
	}
	phase := a.timer.firedPhase()
	if phase == "" && isConnectTimeout(err) {
		phase = phaseConnect
	}
	v := explainTLS(a.u, err, a.classify(policy.Outcome{Err: err, Timeout: phase}))
	return a.fail(v)
}

// errorAnswer judges an answer with a status outside 2xx, from as much of
// its body as maxErrorBody allows.
func (a *attempt) errorAnswer(resp *http.Response) step {
	u := a.u
	errBody, _ := io.ReadAll(io.LimitReader(&a.body, maxErrorBody))
	if st, over := a.interrupted(resp.StatusCode, "while reading an upstream error"); over {
		return st
	}
	v := a.classify(policy.Outcome{Status: resp.StatusCode, Header: resp.Header, Body: errBody, Timeout: a.timer.firedPhase()})
	if v.Class == policy.ClassNone {
		// A 1xx/3xx final answer is not something an SDK call expects.
		v.Class, v.Reason = policy.ClassBadResponse, "unexpected status "+strconv.Itoa(resp.StatusCode)
	}
	return a.failed(v, &failure{upstream: u.Name, verdict: v, status: resp.StatusCode, header: resp.Header, body: errBody, foreign: a.conv != nil})
}

// wholeAnswer reads a non-streaming 2xx answer whole, judges it, and
// answers the app with it.
func (a *attempt) wholeAnswer(resp *http.Response) step {
	s, u, conv := a.s, a.u, a.conv
	full, buf, err := readPooledAnswer(&a.body, resp.ContentLength)
	if err != nil {
		if st, over := a.interrupted(resp.StatusCode, "while reading the answer"); over {
			return st
		}
		return a.fail(a.classify(policy.Outcome{Err: err, Timeout: a.timer.firedPhase()}))
	}
	usageBody := full
	var v policy.Verdict
	if elems, isArray := geminiArray(u, s.stream, conv, full); isArray {
		// A Gemini stream asked for without alt=sse: one JSON array of
		// chunks. It was read whole, so an error chunk anywhere in it can
		// still fall over.
		v = a.classifyGeminiArray(resp, elems)
		if len(elems) > 0 {
			usageBody = elems[len(elems)-1]
		}
	} else {
		v = a.classify(policy.Outcome{Status: resp.StatusCode, Header: resp.Header, Body: full})
	}
	if v.Class != policy.ClassNone {
		return a.failed(v, &failure{upstream: u.Name, verdict: v, status: resp.StatusCode, header: resp.Header, body: full, foreign: conv != nil})
	}
	a.span.Answer(u.Shape, usageBody)
	answer := full
	if conv != nil {
		answer, err = translate.Response(conv.req, s.app, u.Shape, full)
		if err != nil {
			return a.fail(policy.Verdict{Class: policy.ClassBadResponse, Reason: "cannot translate the answer: " + err.Error()})
		}
	}

	// Commit: the whole answer is here and it is good — unless a hedged
	// attempt committed first.
	if !s.claim(a.ln) {
		return a.unclaimed("", resp.StatusCode)
	}
	a.finish(OutcomeOK, "", "", resp.StatusCode)
	h := s.w.Header()
	if conv == nil {
		copyResponseHeaders(h, resp.Header)
	} else {
		// Another vendor's headers (request ids, rate-limit counters)
		// mean nothing to the app's SDK.
		h.Set("Content-Type", "application/json")
	}
	if cl := resp.Header["Content-Length"]; conv == nil && len(cl) == 1 && resp.ContentLength == int64(len(answer)) {
		// The upstream's own value, when the answer is its body
		// unchanged: formatting and setting it again costs two
		// allocations. (The transport's value slices are capped at their
		// length, so sharing one is safe.)
		h["Content-Length"] = cl
	} else {
		h.Set("Content-Length", strconv.Itoa(len(answer)))
	}
	s.answeredBy(u.Name)
	s.w.WriteHeader(resp.StatusCode)
	s.rec.TTFB = time.Since(s.rec.Start)
	s.rec.Status = resp.StatusCode
	if _, err := s.w.Write(answer); err != nil {
		s.rec.Error = "client went away while the answer was written"
	} else {
		s.store(answer, false)
	}
	if w := a.wire(); w == u.Shape {
		// One scan for both.
		use, ok, cached, _ := rewrite.ExtractAnswerUsage(w, usageBody) // classify found it valid
		if ok {
			s.rec.Usage = use
		}
		s.rec.CachedInput = cached
	} else {
		if use, ok := rewrite.ExtractUsage(w, usageBody); ok {
			s.rec.Usage = use
		}
		s.rec.CachedInput, _ = rewrite.ExtractCachedInput(u.Shape, usageBody)
	}
	buf.release() // the answer is written, stored (a copy) and read
	return stepDone
}

// geminiArray reports whether full is a Gemini stream in its JSON-array
// form (streamGenerateContent without alt=sse, on the fast path), and
// splits it into chunks. A body that is not an array is not one (an error
// object, an HTML page): the usual classification judges it. elems is nil
// for an array that does not parse (truncated).
func geminiArray(u *policy.Upstream, stream bool, conv *conversion, full []byte) ([]json.RawMessage, bool) {
	if u.Shape != rewrite.Gemini || !stream || conv != nil {
		return nil, false
	}
	t := bytes.TrimSpace(full)
	if len(t) == 0 || t[0] != '[' {
		return nil, false
	}
	// Declared here, not as a named result: its address goes to
	// Unmarshal, which would put it on the heap for every answer.
	var elems []json.RawMessage
	if err := json.Unmarshal(t, &elems); err != nil {
		return nil, true
	}
	return elems, true
}

// classifyGeminiArray judges a Gemini array stream: whole JSON, at least
// one chunk, and no chunk carrying an error.
func (a *attempt) classifyGeminiArray(resp *http.Response, elems []json.RawMessage) policy.Verdict {
	if elems == nil {
		return policy.Verdict{Class: policy.ClassBadResponse, Reason: "200 stream array is not whole JSON"}
	}
	if len(elems) == 0 {
		return policy.Verdict{Class: policy.ClassBadResponse, Reason: "200 stream array is empty"}
	}
	for _, e := range elems {
		var probe struct {
			Error json.RawMessage `json:"error"`
		}
		if json.Unmarshal(e, &probe) != nil {
			return policy.Verdict{Class: policy.ClassBadResponse, Reason: "200 stream array holds a chunk that is not an object"}
		}
		if probe.Error != nil {
			v := a.classify(policy.Outcome{Status: resp.StatusCode, Header: resp.Header, Body: e, InStream: true})
			if v.Class == policy.ClassNone {
				v.Class, v.Reason = policy.ClassServerError, "in-stream error"
			}
			return v
		}
	}
	return policy.Verdict{}
}

func (s *session) answeredBy(name string) {
	s.rec.AnsweredBy = name
	s.setDetourHeaders(name)
}

// fail is failed for a failure that has nothing but its verdict (no
// answer to pass on).
func (a *attempt) fail(v policy.Verdict) step {
	return a.failed(v, &failure{upstream: a.u.Name, verdict: v})
}

// failed records a failed attempt, starts its cooldown, and either stops
// (writing the upstream's own error to the app), retries the same upstream,
// or lets the chain go on.
func (a *attempt) failed(v policy.Verdict, f *failure) step {
	s := a.s
	reason := v.Reason
	cd := s.cooldown(a.u.Name, v)
	if cd != "" {
		reason += "; " + cd
	}
	outcome := OutcomeFallback
	if a.last {
		outcome = OutcomeExhausted
	}
	if f.foreign && (v.Class == policy.ClassInvalidRequest || v.Class == policy.ClassAuth) {
		// The app's request was sound for its own vendor, and the key was
		// detour's: a translated request refused by another vendor says
		// this upstream cannot take it, not that the app erred. That
		// upstream is passed over, loudly, rather than failing the app.
		a.finish(outcome, string(v.Class), "translated request refused: "+reason, f.status)
		s.addFailure(f)
		return stepNext
	}
	if s.pol.Action(v.Class).Then == policy.Stop {
		if !s.claim(a.ln) {
			return a.unclaimed(string(v.Class), f.status)
		}
		a.finish(OutcomeStop, string(v.Class), reason, f.status)
		s.rec.Error = "stopped: " + string(v.Class)
		s.writeUpstreamError(f)
		return stepDone
	}
	wait, why, again := s.retryPlan(v, a.ar.Retry, cd != "")
	if again {
		a.finish(OutcomeRetry, string(v.Class), reason+"; retry in "+wait.Round(time.Millisecond).String()+why, f.status)
		return step{kind: kindRetry, wait: wait, fail: f}
	}
	a.finish(outcome, string(v.Class), reason+why, f.status)
	s.addFailure(f)
	return stepNext
}

// unclaimed records an attempt that reached a point where it would write
// to the app but may not: another lane answered, or the app went away.
func (a *attempt) unclaimed(class string, status int) step {
	if a.s.lost(nil) {
		a.finish(OutcomeHedgeLost, class, "another upstream answered first", status)
		return stepDone
	}
	a.finish(OutcomeClientGone, class, "client went away", status)
	a.s.clientGone("before the answer was written")
	return stepDone
}

// interrupted handles an attempt that ended because its context did: the
// app went away, or another lane answered. over is false when neither is
// the case (the attempt failed on its own and must be classified).
func (a *attempt) interrupted(status int, where string) (step, bool) {
	s := a.s
	// A lane that lost the race says so first: the winner owns the
	// record's request-level fields from its claim on.
	if a.ln.ctx.Err() != nil && s.lost(a.ln) {
		a.finish(OutcomeHedgeLost, "", "another upstream answered first", status)
		return stepDone, true
	}
	if s.drained() {
		a.finish(OutcomeDrained, "", "the drain timeout ran out "+where, status)
		s.drainedBeforeAnswer(a.ln)
		return stepDone, true
	}
	if contextDone(s.req.Context()) {
		a.finish(OutcomeClientGone, "", "client went away "+where, status)
		s.clientGone(where)
		return stepDone, true
	}
	return step{}, false
}

// end reports a finished attempt to the health registry: its upstream's
// recent success rate and latency, its breaker, and its concurrency slot.
// Called when the attempt is over, a stream's included, so that a cut
// after the commit point counts as the failure it is.
func (a *attempt) end() {
	s := a.s
	s.r.removeDrain(&a.dn)
	res, latency := health.Neutral, time.Duration(0)
	var ar AttemptRecord
	s.mu.Lock()
	recorded := a.idx >= 0
	if recorded {
		ar = s.rec.Attempts[a.idx]
	}
	s.mu.Unlock()
	if recorded {
		res, latency = ar.healthResult(), ar.Duration
	}
	now := s.r.now()
	s.r.Health.End(a.u.Name, res, latency, now)
	// The selection's window times the attempt on the Runner's clock, so
	// that a virtual clock (the simulation, tests) gives it exact latencies.
	s.r.windows.Record(a.u.Name, res, a.doneAt.Sub(a.start), now)
	a.gate.ticket.Done(breakerResult(ar, recorded), now)
	a.endSpan(ar, recorded)
	if a.gate.release != nil {
		a.gate.release()
	}
}

func isConnectTimeout(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" && op.Timeout() {
		return true
	}
	return strings.Contains(err.Error(), "TLS handshake timeout")
}
