package chain

import (
	"time"

	"github.com/rs/zerolog"

	"github.com/detour-proxy/detour/internal/health"
	"github.com/detour-proxy/detour/internal/telemetry"
	"github.com/detour-proxy/detour/policy"
	"github.com/detour-proxy/detour/rewrite"
)

// Attempt outcomes, as they appear in the log line's attempts[].outcome.
const (
	OutcomeOK         = "ok"          // answered the app
	OutcomeFallback   = "fallback"    // failed; the chain went on
	OutcomeStop       = "stop"        // failed with a class that must reach the app
	OutcomeSkipped    = "skipped"     // not sent: cooling down, no model mapping
	OutcomeClientGone = "client_gone" // the app went away; not an upstream failure
	OutcomeCut        = "cut"         // failed after the commit point; the app got an in-stream error
	OutcomeExhausted  = "exhausted"   // failed; it was the last upstream
	OutcomeRetry      = "retry"       // failed; the same upstream was tried again
	OutcomeHedgeLost  = "hedge_lost"  // a hedged upstream answered first; this one was cancelled
	OutcomeDrained    = "drained"     // still running when detour's drain timeout ran out; the app got an error in its shape
)

// AttemptRecord is one upstream's part in a request.
type AttemptRecord struct {
	// Translated is set when the request crossed shapes for this upstream;
	// Notes lists what the translation had to change (a clamped
	// temperature, a dropped stop sequence).
	Translated bool
	Notes      []string
	Upstream   string
	Model      string
	Status     int
	Class      string
	Outcome    string
	Reason     string
	// Duration runs from sending the request to the end of the attempt: its
	// failure, or, for the answering attempt, its commit point (the whole
	// body, or a stream's first content).
	Duration time.Duration
	// Headers is the time from sending the request to the upstream's
	// response headers; zero when none arrived (refused, timed out).
	Headers time.Duration
	// Retry numbers the attempts on one upstream: 0 first, 1 the first
	// retry.
	Retry int
	// Hedge marks an attempt started beside a slow one (hedge_after).
	Hedge bool
	// Routing marks a skip for what the request needs rather than for the
	// upstream's state: no models entry for its model, a request it cannot
	// take in its shape, a capability or context window it lacks. Such an
	// upstream was never this request's to try, so the chain going past it
	// is routing, not a failover (detour run's summary counts them apart).
	Routing bool
	// seq orders attempts by when they started: hedged attempts are
	// recorded as they end, and the log lists them in chain order.
	seq int64
}

// healthResult says how an attempt counts towards its upstream's recent
// success rate. An attempt that failed because of the request itself (an
// invalid or too long request, a content filter) or because the app went
// away says nothing about the upstream.
func (a *AttemptRecord) healthResult() health.Result {
	switch a.Outcome {
	case OutcomeOK:
		return health.Success
	case OutcomeClientGone, OutcomeSkipped, OutcomeHedgeLost, OutcomeDrained:
		return health.Neutral
	}
	switch policy.Class(a.Class) {
	case policy.ClassInvalidRequest, policy.ClassContextTooLong, policy.ClassContentFilter:
		return health.Neutral
	}
	return health.Failure
}

// Request outcomes, as the requests_total metric counts them.
const (
	RequestAnswered    = "answered"    // an upstream answered (a stream cut later included)
	RequestFailed      = "failed"      // nothing answered: every upstream failed or was skipped, or detour refused the request
	RequestStopped     = "stopped"     // an upstream's stop-class error reached the app
	RequestClientGone  = "client_gone" // the app went away before its answer
	RequestPassthrough = "passthrough" // no route took it; forwarded untouched
	RequestDrained     = "drained"     // ended by detour's drain timeout (the app got an error in its shape)
)

// Outcome is the request's outcome for metrics: one of the Request*
// constants.
func (r *Record) Outcome() string {
	switch {
	case r.Status == 499:
		return RequestClientGone
	case r.AnsweredBy == "passthrough":
		return RequestPassthrough
	}
	for _, a := range r.Attempts {
		if a.Outcome == OutcomeDrained {
			return RequestDrained
		}
	}
	if r.AnsweredBy != "" {
		return RequestAnswered
	}
	for _, a := range r.Attempts {
		if a.Outcome == OutcomeStop {
			return RequestStopped
		}
	}
	return RequestFailed
}

// Record is everything the canonical log line says about one request. It
// never holds keys; prompts and completions only when log.prompts allows.
type Record struct {
	ID         string
	Mode       string // "proxy" or "base_url"
	Host       string
	Method     string
	Path       string
	Route      string
	Policy     string
	Tier       string
	Reasons    []string
	Stream     bool
	Model      string
	Attempts   []AttemptRecord
	AnsweredBy string
	Status     int // HTTP status sent to the app (499: the app went away first)
	Error      string
	Start      time.Time
	TTFB       time.Duration
	Total      time.Duration
	Usage      rewrite.Usage
	Cache      string
	Prompt     string
	// Selection is how the chain's order was chosen (routes[].select and
	// the pre-filters); nil for a chain walked as written.
	Selection *SelectionRecord
	// selState holds Selection's memory until the line is written.
	selState *selectState

	// CachedInput is the part of Usage.Input the vendor reports as read
	// from its prompt cache (rewrite.ExtractCachedInput).
	CachedInput int64
	// CostUSD is the answer's cost at its upstream's prices (0: no price
	// matches, no usage reported, or nothing answered).
	CostUSD float64
	// Priority is the request's priority: high, normal or low.
	Priority string

	// idValue is the X-Detour-Request-Id header's value slice; idBytes
	// the memory of ID (newID).
	idValue [1]string
	idBytes [16]byte
	// attemptBuf is Attempts' first backing array: most requests make one
	// attempt, and it then costs no allocation of its own (addAttempt).
	attemptBuf [1]AttemptRecord
	// trace is the request's span; nil when it is not traced.
	trace *telemetry.Request
}

// addAttempt appends a to Attempts, in the record's own array while it has
// room. Attempts stays nil for a request that makes none.
func (r *Record) addAttempt(a AttemptRecord) {
	if r.Attempts == nil {
		r.Attempts = r.attemptBuf[:0:len(r.attemptBuf)]
	}
	r.Attempts = append(r.Attempts, a)
}

// sentAttempts counts the attempts that reached an upstream.
func (r *Record) sentAttempts() int {
	n := 0
	for _, a := range r.Attempts {
		if a.Outcome != OutcomeSkipped {
			n++
		}
	}
	return n
}

// failedOver reports whether an upstream other than the first one tried answered.
func (r *Record) failedOver() bool {
	for _, a := range r.Attempts {
		if a.Outcome == OutcomeFallback || a.Outcome == OutcomeRetry || a.Outcome == OutcomeHedgeLost {
			return true
		}
	}
	return false
}

// Log writes the canonical log line: one JSON object per request with
// constant field names (docs/architecture.md#the-canonical-log-line). The level follows the outcome: info
// when the first upstream answered, warn after a failover or a stop, error
// when nothing answered.
func (r *Record) Log(l zerolog.Logger) {
	var ev *zerolog.Event
	switch {
	case r.Status == 499:
		ev = l.Info()
	case r.AnsweredBy == "" || r.Status >= 500:
		ev = l.Error()
	case r.failedOver() || r.Status >= 400 || r.Error != "":
		ev = l.Warn()
	default:
		ev = l.Info()
	}
	if ev == nil { // level disabled
		return
	}
	// Every field up to the selection is encoded by logjson.go into one
	// buffer, in the bytes zerolog's Str, Arr, Dict and Float64 would
	// write, and handed to zerolog as the raw value of the first key.
	bp := logBufs.Get().(*[]byte)
	raw := appendLineFields((*bp)[:0], r)
	ev = ev.RawJSON("id", raw)
	if r.Selection != nil {
		ev = ev.Dict("selection", r.Selection.dict())
	}
	ev.Msg("request")
	*bp = raw[:0]
	logBufs.Put(bp)
}

func ms(d time.Duration) float64 {
	return float64(d.Microseconds()) / 1000
}
