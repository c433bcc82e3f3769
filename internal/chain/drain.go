package chain

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/detour-proxy/detour/policy"
	"github.com/detour-proxy/detour/rewrite"
)

// errDrained is the cause of a request context cancelled because detour's
// drain timeout ran out (Runner.Drain), as opposed to the app going away.
var errDrained = errors.New("detour is shutting down: the drain timeout ran out")

// drainedMessage is what the app is told, in its vendor's error shape, when
// its request or stream is ended by the drain.
const drainedMessage = "detour is shutting down and its drain timeout (drain_timeout) ran out while this request was still running; retry the request"

// drained reports whether the request was ended by the drain.
func (s *session) drained() bool {
	return errors.Is(context.Cause(s.req.Context()), errDrained)
}

// drainedBeforeAnswer answers a request the drain ended before any upstream
// answered: a 503 in the app's shape, so that its SDK retries (against a
// detour that is not shutting down, behind a Service). Only one lane
// writes it; the others have nothing to add.
func (s *session) drainedBeforeAnswer(ln *lane) {
	if !s.claim(ln) {
		return
	}
	s.rec.Error = "drained: still waiting for an upstream when the drain timeout ran out"
	s.writeAppError(http.StatusServiceUnavailable, policy.ClassOverloaded, drainedMessage, time.Second)
}

// drainCut ends a committed stream at the drain: the attempt is logged with
// outcome drained, and the app gets the in-stream error event an upstream
// cut would give it, in its own shape.
func (a *attempt) drainCut(write func([]byte) bool) {
	s := a.s
	s.mu.Lock()
	if a.idx >= 0 {
		r := &s.rec.Attempts[a.idx]
		r.Outcome, r.Class, r.Reason = OutcomeDrained, string(policy.ClassOverloaded), "stream still open when the drain timeout ran out"
	}
	s.mu.Unlock()
	s.rec.Error = "drained: stream still open when the drain timeout ran out"
	write(a.conv.errorEvent(s.app, rewrite.AppError{Status: http.StatusServiceUnavailable, Class: string(policy.ClassOverloaded), Message: drainedMessage}))
}
