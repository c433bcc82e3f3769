package chain

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

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
// headers to reading the body, and on every read of the body.
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
	r     io.Reader
	timer *attemptTimer
	// next computes the timeout and phase for the next read.
	next func() (time.Duration, string)
}

func (t *timedReader) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if n > 0 {
		d, ph := t.next()
		t.timer.arm(d, ph)
	}
	return n, err
}

// attempt sends the request to one upstream once and handles its answer.
// It says whether the request is finished (answered, stopped, or the app
// went away), should go on to the next upstream, or should try this one
// again after a wait.
func (s *session) attempt(u *policy.Upstream, model string, last bool, ln *lane, retry int, g gate, conv *conversion) step {
	start := time.Now()
	a := &att{ln: ln, idx: -1, gate: g, ar: AttemptRecord{Upstream: u.Name, Model: model, Retry: retry, Hedge: ln.hedge, seq: s.nextSeq()}}
	// In flight for /status until the attempt is over, a stream's last
	// event included.
	s.r.Health.Begin(u.Name)
	defer s.endAttempt(u.Name, a)
	finish := func(outcome, class, reason string, status int) {
		a.ar.Outcome, a.ar.Class, a.ar.Reason, a.ar.Status = outcome, class, reason, status
		a.ar.Duration = time.Since(start)
		s.record(a)
	}

	ctx, cancel := context.WithCancel(ln.ctx)
	defer cancel()
	timer := &attemptTimer{cancel: cancel}
	defer timer.stop()
	// Before the commit point an attempt is bounded both by its own phase
	// timeout and by what is left of the request's deadline.
	bounded := func(d time.Duration, phase string) (time.Duration, string) {
		if left := time.Until(s.deadline); left < d {
			return left, phaseDeadline
		}
		return d, phase
	}
	timer.arm(bounded(u.Timeouts.FirstByte, phaseFirstByte))

	if conv != nil {
		a.ar.Translated = true
		a.ar.Notes = conv.notes
	}

	upReq, err := s.buildRequest(ctx, u, model, conv)
	if err != nil {
		// Only SetModel can fail here, and the body was already parsed.
		if !s.claim(ln) {
			return s.unclaimed(finish, string(policy.ClassInvalidRequest), 0)
		}
		finish(OutcomeStop, string(policy.ClassInvalidRequest), err.Error(), 0)
		s.writeAppError(http.StatusBadRequest, policy.ClassInvalidRequest, "detour: "+err.Error(), 0)
		return stepDone
	}
	resp, err := s.r.Transports.For(u).RoundTrip(upReq)
	if err != nil {
		if st, over := s.interrupted(ln, finish, 0, "while waiting for "+u.Name); over {
			return st
		}
		phase := timer.firedPhase()
		if phase == "" && isConnectTimeout(err) {
			phase = phaseConnect
		}
		v := explainTLS(u, err, s.pol.ClassifyFor(u.Name, policy.Outcome{Shape: u.Shape, Err: err, Timeout: phase}, s.r.now()))
		return s.failed(u, v, &failure{upstream: u.Name, verdict: v}, last, a, finish)
	}
	defer resp.Body.Close()
	a.ar.Headers = time.Since(start)
	ln.gotHeaders()

	body := &timedReader{r: resp.Body, timer: timer, next: func() (time.Duration, string) { return bounded(u.Timeouts.Idle, phaseIdle) }}
	timer.arm(bounded(u.Timeouts.Idle, phaseIdle))

	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		errBody, _ := io.ReadAll(io.LimitReader(body, maxErrorBody))
		if st, over := s.interrupted(ln, finish, resp.StatusCode, "while reading an upstream error"); over {
			return st
		}
		v := s.pol.ClassifyFor(u.Name, policy.Outcome{Shape: u.Shape, Status: resp.StatusCode, Header: resp.Header, Body: errBody, Timeout: timer.firedPhase()}, s.r.now())
		if v.Class == policy.ClassNone {
			// A 1xx/3xx final answer is not something an SDK call expects.
			v.Class, v.Reason = policy.ClassBadResponse, "unexpected status "+strconv.Itoa(resp.StatusCode)
		}
		return s.failed(u, v, &failure{upstream: u.Name, verdict: v, status: resp.StatusCode, header: resp.Header, body: errBody, foreign: conv != nil}, last, a, finish)
	}

	if s.stream && isEventStream(resp.Header) {
		// Until its commit point a stream is also bounded by first_byte
		// counted from the attempt's start: keep-alive pings, comments and
		// empty opening events re-arm the idle timer but must not let a
		// stuck upstream hold the request until the deadline.
		commitBy := start.Add(u.Timeouts.FirstByte)
		body.next = func() (time.Duration, string) {
			d, ph := bounded(u.Timeouts.Idle, phaseIdle)
			if left := time.Until(commitBy); left < d {
				return left, phaseFirstByte
			}
			return d, ph
		}
		timer.arm(body.next())
		if conv != nil {
			conv.stream = translate.NewStream(conv.req, s.app, u.Shape)
		}
		return s.streamAnswer(u, resp, body, timer, conv, last, a, finish)
	}

	full, err := io.ReadAll(io.LimitReader(body, maxResponseBody))
	if err != nil {
		if st, over := s.interrupted(ln, finish, resp.StatusCode, "while reading the answer"); over {
			return st
		}
		v := s.pol.ClassifyFor(u.Name, policy.Outcome{Shape: u.Shape, Err: err, Timeout: timer.firedPhase()}, s.r.now())
		return s.failed(u, v, &failure{upstream: u.Name, verdict: v}, last, a, finish)
	}
	usageBody := full
	var v policy.Verdict
	if elems, isArray := geminiArray(u, s.stream, conv, full); isArray {
		// A Gemini stream asked for without alt=sse: one JSON array of
		// chunks. It was read whole, so an error chunk anywhere in it can
		// still fall over.
		v = s.classifyGeminiArray(u, resp, elems)
		if len(elems) > 0 {
			usageBody = elems[len(elems)-1]
		}
	} else {
		v = s.pol.ClassifyFor(u.Name, policy.Outcome{Shape: u.Shape, Status: resp.StatusCode, Header: resp.Header, Body: full}, s.r.now())
	}
	if v.Class != policy.ClassNone {
		return s.failed(u, v, &failure{upstream: u.Name, verdict: v, status: resp.StatusCode, header: resp.Header, body: full, foreign: conv != nil}, last, a, finish)
	}
	answer := full
	if conv != nil {
		answer, err = translate.Response(conv.req, s.app, u.Shape, full)
		if err != nil {
			v := policy.Verdict{Class: policy.ClassBadResponse, Reason: "cannot translate the answer: " + err.Error()}
			return s.failed(u, v, &failure{upstream: u.Name, verdict: v}, last, a, finish)
		}
	}

	// Commit: the whole answer is here and it is good — unless a hedged
	// attempt committed first.
	if !s.claim(ln) {
		return s.unclaimed(finish, "", resp.StatusCode)
	}
	finish(OutcomeOK, "", "", resp.StatusCode)
	h := s.w.Header()
	if conv == nil {
		copyResponseHeaders(h, resp.Header)
	} else {
		// Another vendor's headers (request ids, rate-limit counters)
		// mean nothing to the app's SDK.
		h.Set("Content-Type", "application/json")
	}
	h.Set("Content-Length", strconv.Itoa(len(answer)))
	s.answeredBy(u.Name)
	s.w.WriteHeader(resp.StatusCode)
	s.rec.TTFB = time.Since(s.rec.Start)
	s.rec.Status = resp.StatusCode
	if _, err := s.w.Write(answer); err != nil {
		s.rec.Error = "client went away while the answer was written"
	} else {
		s.store(answer, false)
	}
	if use, ok := rewrite.ExtractUsage(u.Shape, usageBody); ok {
		s.rec.Usage = use
	}
	return stepDone
}

// geminiArray reports whether full is a Gemini stream in its JSON-array
// form (streamGenerateContent without alt=sse, on the fast path), and
// splits it into chunks. A body that is not an array is not one (an error
// object, an HTML page): the usual classification judges it. elems is nil
// for an array that does not parse (truncated).
func geminiArray(u *policy.Upstream, stream bool, conv *conversion, full []byte) (elems []json.RawMessage, ok bool) {
	if u.Shape != rewrite.Gemini || !stream || conv != nil {
		return nil, false
	}
	t := bytes.TrimSpace(full)
	if len(t) == 0 || t[0] != '[' {
		return nil, false
	}
	if err := json.Unmarshal(t, &elems); err != nil {
		return nil, true
	}
	return elems, true
}

// classifyGeminiArray judges a Gemini array stream: whole JSON, at least
// one chunk, and no chunk carrying an error.
func (s *session) classifyGeminiArray(u *policy.Upstream, resp *http.Response, elems []json.RawMessage) policy.Verdict {
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
			v := s.pol.ClassifyFor(u.Name, policy.Outcome{Shape: u.Shape, Status: resp.StatusCode, Header: resp.Header, Body: e, InStream: true}, s.r.now())
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

// failed records a failed attempt, starts its cooldown, and either stops
// (writing the upstream's own error to the app), retries the same upstream,
// or lets the chain go on.
func (s *session) failed(u *policy.Upstream, v policy.Verdict, f *failure, last bool, a *att, finish func(outcome, class, reason string, status int)) step {
	reason := v.Reason
	cd := s.cooldown(u.Name, v)
	if cd != "" {
		reason += "; " + cd
	}
	outcome := OutcomeFallback
	if last {
		outcome = OutcomeExhausted
	}
	if f.foreign && (v.Class == policy.ClassInvalidRequest || v.Class == policy.ClassAuth) {
		// The app's request was sound for its own vendor, and the key was
		// detour's: a translated request refused by another vendor says
		// this upstream cannot take it, not that the app erred. That
		// upstream is passed over, loudly, rather than failing the app.
		finish(outcome, string(v.Class), "translated request refused: "+reason, f.status)
		s.addFailure(f)
		return stepNext
	}
	if s.pol.Action(v.Class).Then == policy.Stop {
		if !s.claim(a.ln) {
			return s.unclaimed(finish, string(v.Class), f.status)
		}
		finish(OutcomeStop, string(v.Class), reason, f.status)
		s.rec.Error = "stopped: " + string(v.Class)
		s.writeUpstreamError(f)
		return stepDone
	}
	wait, why, again := s.retryPlan(v, a.ar.Retry, cd != "")
	if again {
		finish(OutcomeRetry, string(v.Class), reason+"; retry in "+wait.Round(time.Millisecond).String()+why, f.status)
		return step{kind: kindRetry, wait: wait, fail: f}
	}
	finish(outcome, string(v.Class), reason+why, f.status)
	s.addFailure(f)
	return stepNext
}

// streamAnswer reads an upstream stream up to its commit point — the first
// event that carries content — holding back the events before it, so that an
// early in-stream error still falls over. After the commit point every event
// is written and flushed as it arrives.
func (s *session) streamAnswer(u *policy.Upstream, resp *http.Response, body *timedReader, timer *attemptTimer, conv *conversion, last bool, a *att, finish func(outcome, class, reason string, status int)) step {
	rd := sse.NewReader(body)
	var pending bytes.Buffer
	var usage usageMerger
	for {
		ev, err := rd.Next()
		if err != nil {
			if st, over := s.interrupted(a.ln, finish, resp.StatusCode, "before the commit point"); over {
				return st
			}
			var v policy.Verdict
			// A fired timer wins over whatever error the cancelled read
			// produced (EOF or a reset, depending on the transport).
			if errors.Is(err, io.EOF) && timer.firedPhase() == "" {
				v = policy.Verdict{Class: policy.ClassBadResponse, Reason: "stream ended before any content"}
			} else {
				v = s.pol.ClassifyFor(u.Name, policy.Outcome{Shape: u.Shape, Err: err, Timeout: timer.firedPhase()}, s.r.now())
			}
			return s.failed(u, v, &failure{upstream: u.Name, verdict: v}, last, a, finish)
		}
		if !terminated(ev.Raw) {
			// The upstream closed in the middle of an event. If the event
			// is whole JSON (some servers omit the last blank line) it is
			// repaired; half an event is not content.
			if !wholeEvent(ev) {
				v := policy.Verdict{Class: policy.ClassBadResponse, Reason: "stream ended in the middle of an event"}
				return s.failed(u, v, &failure{upstream: u.Name, verdict: v}, last, a, finish)
			}
			ev.Raw = append(ev.Raw, "\n\n"...)
		}
		kind := rewrite.InspectEvent(u.Shape, ev)
		switch kind {
		case rewrite.EventMeta:
			pending.Write(conv.event(ev))
			usage.add(u.Shape, ev.Data)
			if pending.Len() < maxPending {
				continue
			}
		case rewrite.EventError:
			v := s.pol.ClassifyFor(u.Name, policy.Outcome{Shape: u.Shape, Status: resp.StatusCode, Header: resp.Header, Body: ev.Data, InStream: true}, s.r.now())
			if v.Class == policy.ClassNone {
				v.Class, v.Reason = policy.ClassServerError, "in-stream error"
			}
			f := &failure{upstream: u.Name, verdict: v, status: resp.StatusCode, header: resp.Header, inStream: true,
				prefix: bytes.Clone(pending.Bytes()), body: bytes.Clone(conv.event(ev))}
			return s.failed(u, v, f, last, a, finish)
		}
		if !wholeEvent(ev) {
			// The would-be first content is not JSON (a truncated chunk, a
			// proxy's page inside the stream): nothing has reached the app
			// yet, so it falls over rather than commit a broken answer.
			// After the commit point such an event is passed on as is.
			v := policy.Verdict{Class: policy.ClassBadResponse, Reason: "first stream event is not JSON"}
			return s.failed(u, v, &failure{upstream: u.Name, verdict: v}, last, a, finish)
		}
		// Commit point — unless a hedged attempt committed first.
		if !s.claim(a.ln) {
			return s.unclaimed(finish, "", resp.StatusCode)
		}
		finish(OutcomeOK, "", "", resp.StatusCode)
		h := s.w.Header()
		if conv == nil {
			copyResponseHeaders(h, resp.Header)
		} else {
			h.Set("Content-Type", "text/event-stream")
			h.Set("Cache-Control", "no-cache")
		}
		s.answeredBy(u.Name)
		s.w.WriteHeader(resp.StatusCode)
		s.rec.TTFB = time.Since(s.rec.Start)
		s.rec.Status = resp.StatusCode
		timer.arm(u.Timeouts.Idle, phaseIdle)
		// After the commit point the request's deadline no longer applies:
		// a long answer is fine as long as bytes keep coming.
		body.next = func() (time.Duration, string) { return u.Timeouts.Idle, phaseIdle }
		usage.add(u.Shape, ev.Data)
		s.pump(u, rd, append(pending.Bytes(), conv.event(ev)...), kind == rewrite.EventDone || endsStream(u.Shape, ev), timer, conv, &usage, a)
		return stepDone
	}
}

// pump forwards the rest of a committed stream event by event. Whole events
// only: if the upstream breaks off, the app gets a complete in-stream error
// event in its own shape rather than half a JSON line.
func (s *session) pump(u *policy.Upstream, rd *sse.Reader, first []byte, ended bool, timer *attemptTimer, conv *conversion, usage *usageMerger, a *att) {
	rc := http.NewResponseController(s.w)
	// A whole, cleanly ended stream is kept for the response cache (up to
	// a bound); a cut one never is.
	var kept []byte
	keep := s.cacheable
	write := func(b []byte) bool {
		if _, err := s.w.Write(b); err != nil {
			return false
		}
		if keep {
			if len(kept)+len(b) > maxCachedBody {
				keep, kept = false, nil
			} else {
				kept = append(kept, b...)
			}
		}
		return rc.Flush() == nil
	}
	defer func() { s.rec.Usage = usage.u }()
	if !write(first) {
		s.clientGoneAfterCommit(a)
		return
	}
	for {
		ev, err := rd.Next()
		if err != nil {
			if ended {
				// The stream was complete; an SDK that stops reading at
				// [DONE] or message_stop and hangs up is not a client
				// going away.
				if c := conv.closing(); len(c) > 0 {
					write(c)
				}
				if keep && !s.wasCut(a) {
					s.store(kept, true)
				}
				return
			}
			if s.drained() {
				s.drainCut(a, conv, write)
				return
			}
			if contextDone(s.req.Context()) {
				s.clientGoneAfterCommit(a)
				return
			}
			class, msg := policy.ClassServerError, "detour: upstream "+u.Name+" ended the stream before it was complete"
			if ph := timer.firedPhase(); ph != "" {
				class, msg = policy.ClassTimeout, fmt.Sprintf("detour: upstream %s sent nothing for %s", u.Name, u.Timeouts.Idle)
			} else if !errors.Is(err, io.EOF) {
				msg += ": " + err.Error()
			}
			s.cut(a, class, msg)
			write(conv.errorEvent(s.app, rewrite.AppError{Status: rewrite.StatusForClass(string(class)), Class: string(class), Message: msg}))
			return
		}
		if !terminated(ev.Raw) {
			if !wholeEvent(ev) {
				// Half an event: never forwarded (the app would read it
				// glued to the error event that follows).
				class, msg := policy.ClassServerError, "detour: upstream "+u.Name+" ended the stream in the middle of an event"
				s.cut(a, class, msg)
				write(conv.errorEvent(s.app, rewrite.AppError{Status: rewrite.StatusForClass(string(class)), Class: string(class), Message: msg}))
				return
			}
			ev.Raw = append(ev.Raw, "\n\n"...)
		}
		kind := rewrite.InspectEvent(u.Shape, ev)
		if kind == rewrite.EventDone || endsStream(u.Shape, ev) {
			ended = true
		}
		if kind == rewrite.EventError {
			// The vendor's own in-stream error, already in the app's shape:
			// forwarded as is, and the stream counts as ended by it.
			ended = true
			s.cut(a, policy.ClassServerError, "upstream in-stream error after the commit point")
		}
		usage.add(u.Shape, ev.Data)
		out := conv.event(ev)
		if conv != nil && ended && kind != rewrite.EventError {
			// A translated stream closes in the app's own terms once the
			// upstream's stream is complete.
			out = append(out, conv.closing()...)
		}
		if len(out) > 0 && !write(out) {
			if !ended {
				s.clientGoneAfterCommit(a)
			}
			return
		}
	}
}

// cut marks the answering attempt as failed after the commit point.
func (s *session) cut(a *att, class policy.Class, msg string) {
	s.mu.Lock()
	if a.idx >= 0 {
		r := &s.rec.Attempts[a.idx]
		r.Outcome, r.Class, r.Reason = OutcomeCut, string(class), msg
	}
	s.mu.Unlock()
	s.rec.Error = msg
}

// wasCut reports whether the answering attempt failed after its commit
// point.
func (s *session) wasCut(a *att) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return a.idx >= 0 && s.rec.Attempts[a.idx].Outcome == OutcomeCut
}

func (s *session) clientGoneAfterCommit(a *att) {
	s.rec.Error = "client went away during the stream"
	s.mu.Lock()
	if a.idx >= 0 {
		s.rec.Attempts[a.idx].Outcome = OutcomeClientGone
	}
	s.mu.Unlock()
}

// terminated reports whether an event's raw bytes end with the blank line
// that closes an SSE event.
func terminated(raw []byte) bool {
	return bytes.HasSuffix(raw, []byte("\n\n")) || bytes.HasSuffix(raw, []byte("\r\r")) || bytes.HasSuffix(raw, []byte("\r\n\r\n"))
}

// wholeEvent reports whether an unterminated event's data is complete.
func wholeEvent(ev sse.Event) bool {
	d := bytes.TrimSpace(ev.Data)
	return string(d) == "[DONE]" || json.Valid(d)
}

// endsStream reports whether ev is a stream's natural last event for shapes
// whose streams have no terminator: Gemini's last chunk carries finishReason.
func endsStream(shape rewrite.Shape, ev sse.Event) bool {
	return shape == rewrite.Gemini && bytes.Contains(ev.Data, []byte(`"finishReason"`))
}

// usageMerger keeps token counts across stream events: Anthropic reports
// input in message_start and cumulative output in message_delta; OpenAI
// once at the end; Gemini cumulatively in every chunk.
type usageMerger struct{ u rewrite.Usage }

func (m *usageMerger) add(shape rewrite.Shape, data []byte) {
	use, ok := rewrite.ExtractUsage(shape, data)
	if !ok {
		return
	}
	if use.Input > 0 {
		m.u.Input = use.Input
	}
	if use.Output > 0 {
		m.u.Output = use.Output
	}
}

func isEventStream(h http.Header) bool {
	mt, _, _ := mime.ParseMediaType(h.Get("Content-Type"))
	return mt == "text/event-stream"
}

func isConnectTimeout(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" && op.Timeout() {
		return true
	}
	return strings.Contains(err.Error(), "TLS handshake timeout")
}

// buildRequest rewrites the app's request for one upstream: its URL, its
// model, and its credential. Every credential the app sent is removed first;
// the app's own key goes back only to an upstream with auth "client".
func (s *session) buildRequest(ctx context.Context, u *policy.Upstream, model string, conv *conversion) (*http.Request, error) {
	if conv != nil {
		return s.buildTranslated(ctx, u, conv)
	}
	rel := strings.TrimPrefix(s.req.URL.Path, s.app.APIRoot())
	if u.Shape == rewrite.Gemini && model != s.model {
		if p, ok := rewrite.SetGeminiModelInPath(rel, model); ok {
			rel = p
		}
	}
	target := *u.BaseURL
	target.Path = u.BaseURL.Path + rel
	target.RawPath = ""
	q := s.req.URL.Query()
	clientQueryKey := q.Get("key")
	q.Del("key")
	target.RawQuery = q.Encode()

	body := s.body
	if model != s.model && u.Shape != rewrite.Gemini {
		b, err := rewrite.SetModel(body, model)
		if err != nil {
			return nil, fmt.Errorf("cannot set model for upstream %s: %w", u.Name, err)
		}
		body = b
	}

	h := s.req.Header.Clone()
	for _, c := range h.Values("Connection") {
		for _, f := range strings.Split(c, ",") {
			h.Del(strings.TrimSpace(f))
		}
	}
	for _, k := range hopHeaders {
		h.Del(k)
	}
	for _, k := range policy.CredentialHeaders() {
		h.Del(k)
	}
	// The app's identity (org, project, cookie) goes back only with the
	// app's own key: see identityHeaders.
	for _, k := range identityHeaders {
		h.Del(k)
	}
	// The body is already buffered; waiting for "100 Continue" would only
	// add up to a second per attempt.
	h.Del("Expect")
	for k := range h {
		if strings.HasPrefix(k, "X-Detour-") {
			h.Del(k)
		}
	}
	// Let the transport negotiate gzip and decode it: detour must read
	// error bodies and stream events.
	h.Del("Accept-Encoding")
	h.Del("Content-Length")
	h.Del("Host")
	for k, vs := range u.Headers {
		h[k] = append([]string(nil), vs...)
	}
	switch u.Auth {
	case policy.AuthClient:
		copyClientCredential(h, s.req.Header, clientQueryKey, u.Shape)
	case policy.AuthKey:
		setKey(h, u.Shape, string(u.Key))
	}
	if u.Shape == rewrite.Anthropic && h.Get("Anthropic-Version") == "" {
		h.Set("Anthropic-Version", "2023-06-01")
	}

	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target.String(), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header = h
	req.ContentLength = int64(len(body))
	return req, nil
}

// copyClientCredential puts back the app's own credential for an upstream of
// the app's shape. Only the header that shape uses is copied.
func copyClientCredential(dst, src http.Header, queryKey string, shape rewrite.Shape) {
	for _, k := range identityHeaders {
		copyHeader(dst, src, k)
	}
	switch shape {
	case rewrite.OpenAI:
		copyHeader(dst, src, "Authorization")
		copyHeader(dst, src, "Api-Key") // Azure OpenAI
	case rewrite.Anthropic:
		copyHeader(dst, src, "X-Api-Key")
		copyHeader(dst, src, "Authorization") // Anthropic SDKs' auth-token mode
	case rewrite.Gemini:
		copyHeader(dst, src, "X-Goog-Api-Key")
		if dst.Get("X-Goog-Api-Key") == "" && queryKey != "" {
			// Moved from ?key= to the header so it cannot end up in an
			// access log on the way.
			dst.Set("X-Goog-Api-Key", queryKey)
		}
	}
}

func copyHeader(dst, src http.Header, k string) {
	if v := src.Values(k); len(v) > 0 {
		dst[k] = append([]string(nil), v...)
	}
}

func setKey(h http.Header, shape rewrite.Shape, key string) {
	switch shape {
	case rewrite.OpenAI:
		h.Set("Authorization", "Bearer "+key)
	case rewrite.Anthropic:
		h.Set("X-Api-Key", key)
	case rewrite.Gemini:
		h.Set("X-Goog-Api-Key", key)
	}
}
