package chain

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"time"

	"github.com/detour-proxy/detour/policy"
	"github.com/detour-proxy/detour/rewrite"
	"github.com/detour-proxy/detour/rewrite/sse"
)

// streamAnswer reads an upstream stream up to its commit point — the first
// event that carries content — holding back the events before it, so that an
// early in-stream error still falls over. After the commit point every event
// is written as it arrives, and flushed unless the next one has already
// arrived with it (pump).
func (a *attempt) streamAnswer(resp *http.Response) step {
	s, u, conv := a.s, a.u, a.conv
	rd := sse.NewReader(&a.body)
	var pending bytes.Buffer
	for {
		ev, err := rd.Next()
		if err != nil {
			if st, over := a.interrupted(resp.StatusCode, "before the commit point"); over {
				return st
			}
			var v policy.Verdict
			// A fired timer wins over whatever error the cancelled read
			// produced (EOF or a reset, depending on the transport).
			if errors.Is(err, io.EOF) && a.timer.firedPhase() == "" {
				v = policy.Verdict{Class: policy.ClassBadResponse, Reason: "stream ended before any content"}
			} else {
				v = a.classify(policy.Outcome{Err: err, Timeout: a.timer.firedPhase()})
			}
			return a.fail(v)
		}
		if !terminated(ev.Raw) {
			// The upstream closed in the middle of an event. If the event
			// is whole JSON (some servers omit the last blank line) it is
			// repaired; half an event is not content.
			if !wholeEvent(ev) {
				v := policy.Verdict{Class: policy.ClassBadResponse, Reason: "stream ended in the middle of an event"}
				return a.fail(v)
			}
			ev.Raw = append(ev.Raw, "\n\n"...)
		}
		kind := rewrite.InspectEvent(u.Shape, ev)
		switch kind {
		case rewrite.EventMeta:
			pending.Write(conv.event(ev))
			a.usage.add(u.Shape, ev.Data)
			if pending.Len() < maxPending {
				continue
			}
		case rewrite.EventError:
			v := a.classify(policy.Outcome{Status: resp.StatusCode, Header: resp.Header, Body: ev.Data, InStream: true})
			if v.Class == policy.ClassNone {
				v.Class, v.Reason = policy.ClassServerError, "in-stream error"
			}
			f := &failure{upstream: u.Name, verdict: v, status: resp.StatusCode, header: resp.Header, inStream: true,
				prefix: bytes.Clone(pending.Bytes()), body: bytes.Clone(conv.event(ev))}
			return a.failed(v, f)
		}
		if !wholeEvent(ev) {
			// The would-be first content is not JSON (a truncated chunk, a
			// proxy's page inside the stream): nothing has reached the app
			// yet, so it falls over rather than commit a broken answer.
			// After the commit point such an event is passed on as is.
			v := policy.Verdict{Class: policy.ClassBadResponse, Reason: "first stream event is not JSON"}
			return a.fail(v)
		}
		// Commit point — unless a hedged attempt committed first.
		if !s.claim(a.ln) {
			return a.unclaimed("", resp.StatusCode)
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
		a.usage.add(u.Shape, ev.Data)
		a.pump(rd, append(pending.Bytes(), conv.event(ev)...), kind == rewrite.EventDone || endsStream(u.Shape, ev))
		return stepDone
	}
}

// pump forwards the rest of a committed stream event by event. Whole events
// only: if the upstream breaks off, the app gets a complete in-stream error
// event in its own shape rather than half a JSON line.
func (a *attempt) pump(rd *sse.Reader, first []byte, ended bool) {
	s, u, conv := a.s, a.u, a.conv
	rc := http.NewResponseController(s.w)
	// A whole, cleanly ended stream is kept for the response cache (up to
	// a bound); a cut one never is.
	var kept []byte
	keep := s.cacheable
	// unflushed: written but not yet flushed because the next whole event
	// was already buffered. Events that arrived together leave together,
	// which saves a syscall (and a chunk) per event on a fast upstream.
	unflushed := false
	put := func(b []byte) bool {
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
		return true
	}
	write := func(b []byte) bool {
		if !put(b) {
			return false
		}
		if rd.EventBuffered() {
			unflushed = true
			return true
		}
		unflushed = false
		return rc.Flush() == nil
	}
	defer func() { s.rec.Usage = a.usage.u }()
	// The first content is flushed at once, whatever follows it: it is
	// what the app's time to first token measures.
	if !put(first) || rc.Flush() != nil {
		a.clientGoneAfterCommit()
		return
	}
	for {
		if unflushed && !rd.EventBuffered() {
			// What was held back must not wait behind a read that may
			// block (the events since then wrote nothing).
			unflushed = false
			if rc.Flush() != nil && !ended {
				a.clientGoneAfterCommit()
				return
			}
		}
		ev, err := rd.Next()
		if err != nil {
			if ended {
				// The stream was complete; an SDK that stops reading at
				// [DONE] or message_stop and hangs up is not a client
				// going away.
				if c := conv.closing(); len(c) > 0 {
					write(c)
				}
				if keep && !a.wasCut() {
					s.store(kept, true)
				}
				return
			}
			if s.drained() {
				a.drainCut(write)
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
			a.cut(class, msg)
			write(conv.errorEvent(s.app, rewrite.AppError{Status: rewrite.StatusForClass(string(class)), Class: string(class), Message: msg}))
			return
		}
		if !terminated(ev.Raw) {
			if !wholeEvent(ev) {
				// Half an event: never forwarded (the app would read it
				// glued to the error event that follows).
				class, msg := policy.ClassServerError, "detour: upstream "+u.Name+" ended the stream in the middle of an event"
				a.cut(class, msg)
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
			a.cut(policy.ClassServerError, "upstream in-stream error after the commit point")
		}
		a.usage.add(u.Shape, ev.Data)
		out := conv.event(ev)
		if conv != nil && ended && kind != rewrite.EventError {
			// A translated stream closes in the app's own terms once the
			// upstream's stream is complete.
			out = append(out, conv.closing()...)
		}
		if len(out) > 0 && !write(out) {
			if !ended {
				a.clientGoneAfterCommit()
			}
			return
		}
	}
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
