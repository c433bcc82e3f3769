package chain

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/detour-proxy/detour/policy"
	"github.com/detour-proxy/detour/rewrite"
	"github.com/detour-proxy/detour/rewrite/sse"
)

// exhaustedRetryAfter is the retry-after of the app's error when every
// upstream failed: how long until some upstream of the chain may answer
// again. An upstream detour keeps out of its chains — a cooldown, an open
// breaker — comes back when that ends, whatever its vendor hinted: before
// then the app would only earn the same error (Gemini says "retry in 26s"
// on a daily quota that detour cools down until midnight). Any other failed
// upstream comes back when its vendor said, and one that said nothing adds
// nothing. Upstreams skipped for a cooldown or breaker count with theirs.
// Zero: nobody knows.
func (s *session) exhaustedRetryAfter() time.Duration {
	now := s.r.now()
	var back time.Time
	note := func(t time.Time) {
		if t.After(now) && (back.IsZero() || t.Before(back)) {
			back = t
		}
	}
	for _, f := range s.failures {
		if until, held := s.heldUntil(f.upstream, now); held {
			note(until)
			continue
		}
		if ra := f.verdict.RetryAfter; ra > 0 {
			note(now.Add(ra))
		}
	}
	if !s.soonest.IsZero() {
		note(s.soonest)
	}
	if back.IsZero() {
		return 0
	}
	return back.Sub(now)
}

// heldUntil is when detour lets upstream name back into its chains: the
// later of the end of its cooldown and of its open breaker. held is false
// when neither keeps it out.
func (s *session) heldUntil(name string, now time.Time) (until time.Time, held bool) {
	if cd, ok := s.r.Health.CoolingDown(name, now); ok {
		until = cd.Until
	}
	if s.pol.Breaker.Enabled {
		if b := s.r.Health.Breaker(name, now); b.Until.After(now) && b.Until.After(until) {
			until = b.Until
		}
	}
	return until, !until.IsZero()
}

// exhaustedDetails are the google.rpc details of the failure that decides a
// Gemini app's error (QuotaFailure, Help, RetryInfo), so that the app learns
// which quota ran out as it would from Gemini itself; RetryInfo says retry,
// as the retry-after header does. Nil for other apps, and for a failure that
// is not a Gemini error body (a timeout, a translated upstream).
func (s *session) exhaustedDetails(f *failure, retry time.Duration) json.RawMessage {
	if s.app != rewrite.Gemini || f.foreign || len(f.body) == 0 {
		return nil
	}
	body := f.body
	if f.inStream {
		// The raw SSE error event: its data is the Status.
		ev, err := sse.NewReader(bytes.NewReader(f.body)).Next()
		if err != nil {
			return nil
		}
		body = ev.Data
	}
	return rewrite.GeminiErrorDetails(body, retry)
}

// writeError answers the app with detour's own error e in its envelope
// (with details, for a Gemini app), with a retry-after of retryAfter
// (rounded up to whole seconds) when positive.
func (s *session) writeError(e rewrite.AppError, details json.RawMessage, retryAfter time.Duration) {
	st, body := rewrite.ErrorBodyWithDetails(s.app, e, details)
	h := s.w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	if retryAfter > 0 {
		h.Set("Retry-After", strconv.FormatInt(rewrite.RetryAfterSeconds(retryAfter), 10))
	}
	s.setDetourHeaders("")
	s.w.WriteHeader(st)
	_, _ = s.w.Write(body)
	s.rec.Status = st
}

// HostShape is the vendor shape of detour's own errors for a request to
// host that no route decides (a misdirected request on an intercepted
// connection): a route's for that host, else the vendor's that owns it,
// else OpenAI's.
func HostShape(pol *policy.Compiled, host string) rewrite.Shape {
	return passthroughShape(pol, nil, host)
}

// passthroughShape is the envelope of an error detour reports for a
// passed-through request: the shape of the route the request matched
// (for a method no route takes), else of any route for its host, else of
// the vendor that owns the host; OpenAI's, the one most clients read, for
// any other host.
func passthroughShape(pol *policy.Compiled, route *policy.Route, host string) rewrite.Shape {
	if route != nil {
		return route.Shape
	}
	for _, r := range pol.Routes {
		if r.Host == host {
			return r.Shape
		}
	}
	if s := rewrite.ShapeOfHost(host); s != "" {
		return s
	}
	return rewrite.OpenAI
}

// writePassthroughError answers a passed-through request whose vendor
// could not be reached. The app's SDK called its vendor and must read the
// failure as the vendor's own error (a text/plain body is a parse error, or
// an opaque one, in every SDK): the vendor's envelope, 504 for a timeout
// and 502 otherwise, with detour's headers. Nothing reached a vendor, so
// nothing answered.
func writePassthroughError(w http.ResponseWriter, shape rewrite.Shape, host string, err error) {
	class := policy.ClassUnreachable
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout() {
		class = policy.ClassTimeout
	}
	msg := "detour: cannot reach " + host + ": " + err.Error() +
		" (this request matches no route and goes straight to the vendor; check the network path from detour to it)"
	st, body := rewrite.ErrorBody(shape, rewrite.AppError{Status: rewrite.StatusForClass(string(class)), Class: string(class), Message: msg})
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set(HeaderAnsweredBy, "none")
	h.Set(HeaderAttempts, "0")
	w.WriteHeader(st)
	_, _ = w.Write(body)
}
