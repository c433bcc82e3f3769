package fakevendor

import (
	"fmt"
	"time"
)

// FaultKind names one way a vendor answers or fails.
type FaultKind string

// The fault kinds. Kinds that only make sense for a stream degrade on a
// non-streaming request as described on each.
const (
	// OK is a normal, successful answer.
	OK FaultKind = ""
	// Status is an HTTP error: Fault.Status (default: the class's usual
	// status for the shape) with the vendor's exact error body for
	// Fault.Class. Sent before any stream begins, as real vendors do.
	Status FaultKind = "status"
	// Hang accepts the request and never sends headers, until the client
	// goes away or Fault.Delay (default DefaultHangDelay) passes; then the
	// connection is dropped without an answer.
	Hang FaultKind = "hang"
	// SlowFirstByte waits Fault.Delay (default DefaultSlowFirstByteDelay)
	// before answering normally; it gives up if the client goes away.
	SlowFirstByte FaultKind = "slow_first_byte"
	// StreamErrorEarly answers a stream with 200 and the shape's opening
	// events but no content, then the in-stream error event for
	// Fault.Class, then ends the response. Opening events: OpenAI the role
	// chunk, Anthropic message_start, Gemini none. On a non-streaming
	// request it is a Status fault.
	StreamErrorEarly FaultKind = "stream_error_early"
	// StreamErrorMid answers a stream with some content events (the first
	// half of the deltas, at least one), then the in-stream error event for
	// Fault.Class, then ends the response. On a non-streaming request it is
	// a Status fault.
	StreamErrorMid FaultKind = "stream_error_mid"
	// StreamCut sends some content events and then drops the connection
	// without ending the response (the client reads an unexpected EOF). On a
	// non-streaming request it sends half of the JSON body, then drops the
	// connection.
	StreamCut FaultKind = "stream_cut"
	// StreamEOF sends some content events and then ends the response
	// cleanly, without the closing events (no finish chunk, no
	// message_stop, no [DONE], no finishReason). On a non-streaming request
	// it is Truncated200.
	StreamEOF FaultKind = "stream_eof"
	// StreamStall sends some content events and then no more bytes until the
	// client goes away or Fault.Delay (default DefaultHangDelay) passes;
	// then it finishes the stream normally. On a non-streaming request it
	// stalls after half of the JSON body.
	StreamStall FaultKind = "stream_stall"
	// HTML200 answers 200 text/html with an error page, like a captive
	// portal or a CDN in front of the vendor.
	HTML200 FaultKind = "html_200"
	// Empty200 answers 200 application/json with an empty body.
	Empty200 FaultKind = "empty_200"
	// Truncated200 answers 200 application/json with the first half of the
	// normal JSON body, ending the response cleanly.
	Truncated200 FaultKind = "truncated_json"
)

// Kinds lists every fault kind except OK, in documentation order.
var Kinds = []FaultKind{
	Status, Hang, SlowFirstByte, StreamErrorEarly, StreamErrorMid, StreamCut,
	StreamEOF, StreamStall, HTML200, Empty200, Truncated200,
}

// Valid reports whether k is a fault kind the fake knows (OK included).
func (k FaultKind) Valid() bool {
	if k == OK {
		return true
	}
	for _, known := range Kinds {
		if k == known {
			return true
		}
	}
	return false
}

// Default delays of the timing faults.
const (
	// DefaultHangDelay is how long Hang and StreamStall wait for the client
	// to go away when Fault.Delay is zero.
	DefaultHangDelay = 2 * time.Minute
	// DefaultSlowFirstByteDelay is the wait of SlowFirstByte when
	// Fault.Delay is zero.
	DefaultSlowFirstByteDelay = 5 * time.Second
)

// The error classes a Fault can ask for. Each names a vendor error flavour;
// ErrorBody documents the status and body each shape sends for it.
const (
	// ClassRateLimit is a per-minute rate limit: OpenAI 429
	// rate_limit_exceeded, Anthropic 429 rate_limit_error with retry-after,
	// Gemini 429 RESOURCE_EXHAUSTED with a PerMinute QuotaFailure.
	ClassRateLimit = "rate_limit"
	// ClassInsufficientQuota is out of quota or credits: OpenAI 429
	// insufficient_quota (verbatim body), Anthropic 400 credit balance too
	// low, Gemini 429 with a PerDay QuotaFailure.
	ClassInsufficientQuota = "insufficient_quota"
	// ClassSpendLimit is a spend cap: OpenAI 429
	// organization_spend_limit_exceeded, Anthropic 429
	// enforced_spend_limit_reached (no retry-after), Gemini 429 PerDay.
	ClassSpendLimit = "spend_limit"
	// ClassCreditBalance is an exhausted prepaid balance: Anthropic 400
	// "credit balance is too low", OpenAI 429 credit_balance_exhausted,
	// Gemini 429 PerDay.
	ClassCreditBalance = "credit_balance"
	// ClassQuotaPerDay is a daily quota: Gemini 429 with a PerDay
	// QuotaFailure, OpenAI 429 on requests per day (RPD), Anthropic (which
	// has no daily limit) its rate limit.
	ClassQuotaPerDay = "quota_per_day"
	// ClassOverloaded is vendor overload: OpenAI 503 server_is_overloaded,
	// Anthropic 529 overloaded_error, Gemini 503 UNAVAILABLE.
	ClassOverloaded = "overloaded"
	// ClassServerError is an internal error: 500 on every shape.
	ClassServerError = "server_error"
	// ClassInvalidRequest is a rejected request: 400 on every shape.
	ClassInvalidRequest = "invalid_request"
	// ClassAuth is a bad key: OpenAI 401 invalid_api_key, Anthropic 401
	// authentication_error, Gemini 400 API_KEY_INVALID.
	ClassAuth = "auth"
	// ClassContextTooLong is a prompt over the model's window: 400 on every
	// shape, with each vendor's wording.
	ClassContextTooLong = "context_too_long"
	// ClassNotFound is an unknown model: 404 on every shape.
	ClassNotFound = "not_found"
	// ClassTimeout is a vendor-side timeout: 504 on every shape.
	ClassTimeout = "timeout"
)

// Classes lists every error class, in documentation order.
var Classes = []string{
	ClassRateLimit, ClassInsufficientQuota, ClassSpendLimit, ClassCreditBalance,
	ClassQuotaPerDay, ClassOverloaded, ClassServerError, ClassInvalidRequest,
	ClassAuth, ClassContextTooLong, ClassNotFound, ClassTimeout,
}

// validClass reports whether c is empty or one of Classes.
func validClass(c string) bool {
	if c == "" {
		return true
	}
	for _, k := range Classes {
		if k == c {
			return true
		}
	}
	return false
}

// Fault is what the fake does with one request. The zero Fault is a normal
// answer.
type Fault struct {
	// Kind is what happens; OK (empty) answers normally.
	Kind FaultKind
	// Status is the HTTP status of a Status fault. Zero means the usual
	// status of Class for the shape (500 when Class is empty too). On OK,
	// HTML200, Empty200 and Truncated200 a non-zero Status replaces the
	// 200; streams that have begun always carry 200.
	Status int
	// Class is the error flavour of a Status fault and of in-stream errors
	// (one of Classes). Empty with a Status means the vendor's usual body
	// for that status: the class whose status it is (OpenAI 429 →
	// rate_limit, Anthropic 529 → overloaded, Gemini 400 →
	// invalid_request), else a generic envelope with the status text.
	// Empty on a stream error means the shape's usual
	// in-stream error (OpenAI server_error, Anthropic and Gemini
	// overloaded).
	Class string
	// Delay is the wait of Hang, SlowFirstByte and StreamStall; zero means
	// the kind's default.
	Delay time.Duration
	// RetryAfter, when not empty, is sent as the retry-after header. When
	// empty, only an Anthropic rate limit sends one
	// (DefaultAnthropicRetryAfter), as the real API does. When it is a whole
	// number of seconds it also sets Gemini's RetryInfo.retryDelay.
	RetryAfter string
}

// String describes f for logs and test failures, in ParseFaults syntax where
// possible.
func (f Fault) String() string {
	var s string
	switch f.Kind {
	case OK:
		s = "ok"
	case Status:
		s = fmt.Sprint(f.Status)
		if f.Status == 0 {
			s = "status"
		}
	default:
		s = string(f.Kind)
	}
	if f.Class != "" {
		s += ":" + f.Class
	}
	if f.Delay != 0 {
		s += ":" + f.Delay.String()
	}
	return s
}

// delay returns f.Delay, or def when it is zero or negative.
func (f Fault) delay(def time.Duration) time.Duration {
	if f.Delay > 0 {
		return f.Delay
	}
	return def
}
