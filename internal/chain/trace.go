package chain

import (
	"net/http"
	"strconv"

	"github.com/detour-proxy/detour/internal/telemetry"
	"github.com/detour-proxy/detour/policy"
)

// This file is the chain's side of tracing (internal/telemetry): what a
// request's and an attempt's spans say, taken from their records. Each
// function returns at once when the request is not traced (rec.trace nil).

// startTrace starts the request's span, continuing the app's traceparent.
func (r *Runner) startTrace(req *http.Request, pol *policy.Compiled, rec *Record) {
	rec.trace = r.Tracer.StartRequest(&pol.Telemetry, req.Header, req.URL.Path, rec.Start)
}

// endTrace ends the request's span from its finished record.
func (rec *Record) endTrace() {
	if rec.trace == nil {
		return
	}
	e := telemetry.RequestEnd{
		ID: rec.ID, Host: rec.Host, Route: rec.Route, Tier: rec.Tier, Model: rec.Model,
		Outcome: rec.Outcome(), AnsweredBy: rec.AnsweredBy, Status: rec.Status,
		InputTokens: rec.Usage.Input, OutputTokens: rec.Usage.Output,
	}
	for _, a := range rec.Attempts {
		if a.Outcome == OutcomeSkipped {
			rec.trace.Skipped(a.Upstream, a.Class, a.Reason)
		}
	}
	if rec.AnsweredBy == "" || e.Outcome == RequestStopped {
		// The class of the failure the app was told about: the last
		// attempt's that has one, else the status.
		for i := len(rec.Attempts) - 1; i >= 0 && e.ErrorType == ""; i-- {
			e.ErrorType = rec.Attempts[i].Class
		}
		if e.ErrorType == "" && rec.Status >= 400 {
			e.ErrorType = strconv.Itoa(rec.Status)
		}
	}
	rec.trace.End(e)
}

// startSpan starts the attempt's span as it is sent.
func (a *attempt) startSpan() {
	if a.s.rec.trace == nil || a.u.BaseURL == nil {
		return
	}
	a.span = a.s.rec.trace.StartAttempt(a.sent, telemetry.AttemptStart{
		Upstream: a.u.Name, Shape: string(a.u.Shape), Host: a.u.BaseURL.Hostname(),
		Model: a.model, Retry: a.ar.Retry, Hedge: a.ar.Hedge,
	})
}

// endSpan ends the attempt's span when the attempt is over (a stream's
// last event included); ar is its record when recorded.
func (a *attempt) endSpan(ar AttemptRecord, recorded bool) {
	if a.span == nil {
		return
	}
	e := telemetry.AttemptEnd{Outcome: ar.Outcome, Class: ar.Class, Reason: ar.Reason, Status: ar.Status}
	if !recorded {
		e.Outcome = "unrecorded"
	}
	if ar.Outcome == OutcomeOK {
		// The answering attempt's usage is the request's; the winner's
		// lane wrote it on this goroutine.
		e.InputTokens, e.OutputTokens = a.s.rec.Usage.Input, a.s.rec.Usage.Output
	}
	a.span.End(e)
}
