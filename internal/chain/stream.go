package chain

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/detour-proxy/detour/policy"
	"github.com/detour-proxy/detour/rewrite"
	"github.com/detour-proxy/detour/rewrite/sse"
	"github.com/detour-proxy/detour/rewrite/translate"
)

// streamAnswer reads an upstream stream up to its commit point — the first
// event that carries content — holding back the events before it, so that an
// early in-stream error still falls over. After the commit point every event
// is written as it arrives, and flushed unless the next one has already
// arrived with it (pump).
//
// The commit point is found in a frame of its own (untilCommit) that has
// returned before pump starts: a stream may stay open for minutes, and its
// goroutine's stack is sized by the deepest frames it ever held.
func (a *attempt) streamAnswer(resp *http.Response) step {
	s, u := a.s, a.u
	// Until its commit point a stream is also bounded by first_byte
	// counted from the attempt's start: keep-alive pings, comments and
	// empty opening events re-arm the idle timer but must not let a
	// stuck upstream hold the request until the deadline.
	a.commitBy = a.start.Add(u.Timeouts.FirstByte)
	a.timer.arm(a.readTimeout())
	if a.conv != nil {
		a.conv.stream = translate.NewStream(a.conv.req, s.app, u.Shape)
	}
	// The reader and the writer live in the attempt, which is on the heap
	// anyway: on this frame they would be under the first flush (below),
	// and referenced from the attempt they would be an allocation each.
	a.rd = *sse.NewReader(&a.body)
	rd := &a.rd
	// A stream waits on its upstream for nearly all of its life: while it
	// does, its reader's buffer serves other streams.
	rd.SetIdleRelease(true)
	first, ended, st, committed := a.untilCommit(rd, resp)
	if !committed {
		a.releaseStream()
		return st
	}
	out := &a.out
	*out = streamOut{w: s.w, rc: *http.NewResponseController(s.w), rd: rd, keep: s.cacheable, park: s.r.ParkFirstWriters}
	// The first content is flushed at once, whatever follows it: it is
	// what the app's time to first token measures.
	if !out.writeFirst(first) {
		a.releaseStream()
		s.rec.Usage, s.rec.CachedInput = a.usage.u, a.usage.cached
		a.clientGoneAfterCommit()
		return stepDone
	}
	a.releaseHeld()
	a.pump(out, ended)
	a.releaseStream()
	return stepDone
}

// untilCommit reads events until the commit point and commits there: the
// app gets the upstream's status and headers. first is what pump writes
// first (the held-back events and the first content), ended whether that
// already ended the stream. When it does not commit, st says what comes
// next.
func (a *attempt) untilCommit(rd *sse.Reader, resp *http.Response) (first []byte, ended bool, st step, committed bool) {
	s, u, conv := a.s, a.u, a.conv
	// pending holds the events held back, in one buffer that also has
	// room for the first content in the common case (firstHeld): one
	// allocation where a growing buffer and the append at the commit point
	// made two.
	var pending []byte
	for {
		ev, err := rd.Next()
		if err != nil {
			if st, over := a.interrupted(resp.StatusCode, "before the commit point"); over {
				return nil, false, st, false
			}
			var v policy.Verdict
			// A fired timer wins over whatever error the cancelled read
			// produced (EOF or a reset, depending on the transport).
			if errors.Is(err, io.EOF) && a.timer.firedPhase() == "" {
				v = policy.Verdict{Class: policy.ClassBadResponse, Reason: "stream ended before any content"}
			} else {
				v = a.classify(policy.Outcome{Err: err, Timeout: a.timer.firedPhase()})
			}
			return nil, false, a.fail(v), false
		}
		if !terminated(ev.Raw) {
			// The upstream closed in the middle of an event. If the event
			// is whole JSON (some servers omit the last blank line) it is
			// repaired; half an event is not content.
			if !wholeEvent(ev) {
				v := policy.Verdict{Class: policy.ClassBadResponse, Reason: "stream ended in the middle of an event"}
				return nil, false, a.fail(v), false
			}
			ev.Raw = append(ev.Raw, "\n\n"...)
		}
		kind := rewrite.InspectEvent(a.wire(), ev)
		switch kind {
		case rewrite.EventMeta:
			b := conv.event(ev)
			if pending == nil {
				pending = a.heldBuffer(len(b))
			}
			pending = append(pending, b...)
			a.usage.add(a.wire(), ev.Data)
			a.span.StreamEvent(a.wire(), ev.Data)
			if len(pending) < maxPending {
				continue
			}
		case rewrite.EventError:
			v := a.classify(policy.Outcome{Status: resp.StatusCode, Header: resp.Header, Body: ev.Data, InStream: true})
			if v.Class == policy.ClassNone {
				v.Class, v.Reason = policy.ClassServerError, "in-stream error"
			}
			f := &failure{upstream: u.Name, verdict: v, status: resp.StatusCode, header: resp.Header, inStream: true,
				prefix: bytes.Clone(pending), body: bytes.Clone(conv.event(ev))}
			return nil, false, a.failed(v, f), false
		}
		if !wholeEvent(ev) {
			// The would-be first content is not JSON (a truncated chunk, a
			// proxy's page inside the stream): nothing has reached the app
			// yet, so it falls over rather than commit a broken answer.
			// After the commit point such an event is passed on as is.
			v := policy.Verdict{Class: policy.ClassBadResponse, Reason: "first stream event is not JSON"}
			return nil, false, a.fail(v), false
		}
		// Commit point — unless a hedged attempt committed first.
		if !s.claim(a.ln) {
			return nil, false, a.unclaimed("", resp.StatusCode), false
		}
		a.finish(OutcomeOK, "", "", resp.StatusCode)
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
		// After the commit point the request's deadline no longer applies:
		// a long answer is fine as long as bytes keep coming.
		a.committed = true
		a.timer.arm(a.readTimeout())
		a.usage.add(a.wire(), ev.Data)
		a.span.StreamEvent(a.wire(), ev.Data)
		// With nothing held back the first content is written from the
		// reader's memory, before the next read can reuse it.
		first = conv.event(ev)
		if pending != nil {
			first = append(pending, first...)
		}
		return first, kind == rewrite.EventDone || endsStream(a.wire(), ev), stepDone, true
	}
}

// firstHeld is the room pending starts with: the opening events of every
// vendor's stream and its first content event fit in it.
const firstHeld = 1024

// pump forwards the rest of a committed stream, after its first content,
// event by event. Whole events
// only: if the upstream breaks off, the app gets a complete in-stream error
// event in its own shape rather than half a JSON line. Its frame is kept
// small and its rare endings are methods of their own (the stack it blocks
// on holds every frame below it for the stream's whole life).
func (a *attempt) pump(out *streamOut, ended bool) {
	s, u, conv, rd := a.s, a.u, a.conv, out.rd
	defer func() { s.rec.Usage, s.rec.CachedInput = a.usage.u, a.usage.cached }()
	for {
		if !rd.EventBuffered() {
			// What was held back must not wait behind a read that may
			// block.
			if !out.settle() && !ended {
				a.clientGoneAfterCommit()
				return
			}
		}
		if conv == nil && !out.run {
			// The fast path forwards each event's bytes unchanged: the
			// events that arrived together are written with one Write,
			// straight from the reader's buffer.
			out.run = true
			rd.Mark()
		}
		ev, err := rd.Next()
		if err != nil {
			out.endRun()
			a.streamEnded(out, err, ended)
			return
		}
		inRun := out.run
		if !terminated(ev.Raw) {
			// The event is not in the run as it will be written.
			out.endRunBefore(len(ev.Raw))
			inRun = false
			if !wholeEvent(ev) {
				// Half an event: never forwarded (the app would read it
				// glued to the error event that follows).
				a.cutStream(out, policy.ClassServerError, "detour: upstream "+u.Name+" ended the stream in the middle of an event")
				return
			}
			ev.Raw = append(ev.Raw, "\n\n"...)
		}
		// Past the commit point only an event's being the end or an
		// error matters, not whether it carries content.
		kind := rewrite.InspectCommitted(a.wire(), ev)
		if kind == rewrite.EventDone || endsStream(a.wire(), ev) {
			ended = true
		}
		if kind == rewrite.EventError {
			// The vendor's own in-stream error, already in the app's shape:
			// forwarded as is, and the stream counts as ended by it.
			ended = true
			a.cut(policy.ClassServerError, "upstream in-stream error after the commit point")
		}
		a.usage.add(a.wire(), ev.Data)
		if inRun {
			// Written with the run (settle).
			continue
		}
		b := conv.event(ev)
		if conv != nil && ended && kind != rewrite.EventError {
			// A translated stream closes in the app's own terms once the
			// upstream's stream is complete.
			b = append(b, conv.closing()...)
		}
		if len(b) > 0 && !out.write(b) {
			if !ended {
				a.clientGoneAfterCommit()
			}
			return
		}
	}
}

// streamEnded ends a committed stream whose upstream read failed with err:
// a complete stream closes (and may be cached), the drain and an app that
// went away are told apart from an upstream that broke off, which gets the
// app an in-stream error event.
func (a *attempt) streamEnded(out *streamOut, err error, ended bool) {
	s, u, conv := a.s, a.u, a.conv
	if ended {
		// The stream was complete; an SDK that stops reading at [DONE] or
		// message_stop and hangs up is not a client going away.
		if c := conv.closing(); len(c) > 0 {
			out.write(c)
		}
		if out.keep && !a.wasCut() {
			s.store(out.kept, true)
		}
		return
	}
	if s.drained() {
		a.drainCut(out)
		return
	}
	if contextDone(s.req.Context()) {
		a.clientGoneAfterCommit()
		return
	}
	class, msg := policy.ClassServerError, "detour: upstream "+u.Name+" ended the stream before it was complete"
	if ph := a.timer.firedPhase(); ph != "" {
		class, msg = policy.ClassTimeout, fmt.Sprintf("detour: upstream %s sent nothing for %s", u.Name, u.Timeouts.Idle)
	} else if !errors.Is(err, io.EOF) {
		msg += ": " + err.Error()
	}
	a.cutStream(out, class, msg)
}

// cutStream marks the answering attempt as cut after the commit point and
// ends the app's stream with an error event in its own shape.
func (a *attempt) cutStream(out *streamOut, class policy.Class, msg string) {
	a.cut(class, msg)
	out.write(a.conv.errorEvent(a.s.app, rewrite.AppError{Status: rewrite.StatusForClass(string(class)), Class: string(class), Message: msg}))
}

// streamOut writes a committed stream to the app.
type streamOut struct {
	w  http.ResponseWriter
	rc http.ResponseController
	rd *sse.Reader
	// A whole, cleanly ended stream is kept for the response cache (up to
	// a bound); a cut one never is.
	kept []byte
	keep bool
	// unflushed: written but not yet flushed because the next whole event
	// was already buffered. Events that arrived together leave together,
	// which saves a syscall (and a chunk) per event on a fast upstream.
	unflushed bool
	// run: the events read since rd.Mark are not written yet; they are
	// written together, by settle or endRun.
	run bool
	// The commit point's write (writeFirst): whether it succeeded, its
	// panic if it panicked, and its end.
	firstOK    bool
	park       bool
	firstPanic *any
	firstDone  sync.WaitGroup
}

// put writes b without flushing.
func (o *streamOut) put(b []byte) bool {
	if _, err := o.w.Write(b); err != nil {
		return false
	}
	if o.keep {
		if len(o.kept)+len(b) > maxCachedBody {
			o.keep, o.kept = false, nil
		} else {
			o.kept = append(o.kept, b...)
		}
	}
	return true
}

// settle writes the run of events read since Mark, if any, and flushes
// what is written but not flushed: before a read that may block. It
// reports false when the app is gone.
func (o *streamOut) settle() bool {
	o.endRun()
	if !o.unflushed {
		return true
	}
	o.unflushed = false
	return o.rc.Flush() == nil
}

// endRun writes the run of events read since Mark, if any, without
// flushing it, and ends the run: before anything else is written.
func (o *streamOut) endRun() {
	o.endRunBefore(0)
}

// endRunBefore is endRun for a run whose last n bytes are an event that is
// not to be written with it.
func (o *streamOut) endRunBefore(n int) {
	if !o.run {
		return
	}
	b := o.rd.Marked()
	o.run = false
	o.rd.Unmark()
	if len(b) > n {
		// A failed write fails the flush that follows it too.
		o.put(b[:len(b)-n])
		o.unflushed = true
	}
}

// write writes b, and flushes it unless the next whole event is already
// buffered.
func (o *streamOut) write(b []byte) bool {
	if !o.put(b) {
		return false
	}
	if o.rd.EventBuffered() {
		o.unflushed = true
		return true
	}
	o.unflushed = false
	return o.rc.Flush() == nil
}

// cut marks the answering attempt as failed after the commit point.
func (a *attempt) cut(class policy.Class, msg string) {
	s := a.s
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
func (a *attempt) wasCut() bool {
	s := a.s
	s.mu.Lock()
	defer s.mu.Unlock()
	return a.idx >= 0 && s.rec.Attempts[a.idx].Outcome == OutcomeCut
}

func (a *attempt) clientGoneAfterCommit() {
	s := a.s
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
// whose streams have no terminator: Gemini's last chunk carries finishReason;
// Bedrock's ConverseStream ends with its metadata event (usage), after
// messageStop.
func endsStream(shape rewrite.Shape, ev sse.Event) bool {
	return shape == rewrite.Gemini && bytes.Contains(ev.Data, []byte(`"finishReason"`)) ||
		shape == rewrite.Bedrock && ev.Name == "metadata" ||
		shape == rewrite.OpenAIResponses && endsResponses(ev)
}

// usageMerger keeps token counts across stream events: Anthropic reports
// input in message_start and cumulative output in message_delta; OpenAI
// once at the end; Gemini cumulatively in every chunk.
type usageMerger struct {
	u rewrite.Usage
	// cached is the last cached-input count reported.
	cached int64
}

func (m *usageMerger) add(shape rewrite.Shape, data []byte) {
	use, ok, c, cok := rewrite.ExtractUsageAndCached(shape, data)
	if cok {
		m.cached = c
	}
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
	ct := h.Get("Content-Type")
	base, params, _ := strings.Cut(ct, ";")
	if strings.Count(params, "=") > 1 {
		// Two parameters of one name and different values make
		// ParseMediaType refuse the whole value: only it can tell.
		mt, _, _ := mime.ParseMediaType(ct)
		return mt == "text/event-stream"
	}
	// What mime.ParseMediaType says of the media type (the part before
	// the parameters, trimmed, in any case) when no parameter can be
	// repeated, without the map of parameters it builds. No letter of
	// "text/event-stream" is the lower case of a non-ASCII letter, so an
	// ASCII comparison is exact.
	return asciiEqualFold(strings.TrimSpace(base), "text/event-stream")
}

// asciiEqualFold reports whether s and lower (ASCII, lower case) are equal
// under ASCII case folding.
func asciiEqualFold(s, lower string) bool {
	if len(s) != len(lower) {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}
