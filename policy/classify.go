package policy

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	// Gemini's daily quotas reset at midnight Pacific time; embed the zone
	// database so that the reset time is right in distroless images that
	// ship no /usr/share/zoneinfo.
	_ "time/tzdata"

	"github.com/detour-proxy/detour/rewrite"
)

// Outcome is everything known about one upstream attempt that decides its
// class.
type Outcome struct {
	// Shape is the upstream's shape. Classification reads all three vendor
	// envelopes whatever the shape, because OpenAI-compatible servers send
	// other vendors' envelopes (docs/vendors.md#openai-compatible-servers).
	Shape rewrite.Shape
	// Status is the HTTP status; 0 when no response arrived.
	Status int
	// Header holds the response headers; nil is fine.
	Header http.Header
	// Body is the error body; or, with InStream, the data of an in-stream
	// error event; or, for a 2xx without InStream, the whole non-stream
	// response body.
	Body []byte
	// InStream says Body is an error event received inside a 200 stream,
	// before the commit point.
	InStream bool
	// Err is the transport error when Status is 0. The caller must not
	// classify an attempt that failed because the app's own context was
	// canceled: that is no upstream failure (docs/architecture.md#when-the-app-goes-away), and Classify
	// would call it unreachable.
	Err error
	// Timeout is "", "connect", "first_byte" or "idle": set by the caller
	// when its own per-attempt timer fired. It wins over everything else.
	Timeout string
}

// Verdict is the class of an outcome and the facts behind it.
type Verdict struct {
	// Class is the failure class; ClassNone for a usable 2xx.
	Class Class
	// Info is what the error body said; zero for transport failures.
	Info rewrite.ErrorInfo
	// RetryAfter is the upstream's own hint of when to try again: from
	// retry-after-ms, else retry-after (delta-seconds or an HTTP-date,
	// relative to now), else Gemini RetryInfo, else the message text
	// ("Please retry after 86400 seconds", "Please try again in 18.642s").
	// Zero when unknown.
	RetryAfter time.Duration
	// ResetAt is when a quota_exhausted upstream's quota resets, when the
	// error says so: Anthropic's "You will regain access on 2026-09-01 at
	// 00:00 UTC." (or the 1st of next month for enforced_spend_limit_reached);
	// the next midnight in America/Los_Angeles for a Gemini per-day quota;
	// now + RetryAfter when that hint is quota-sized (Azure's "retry after
	// 86400 seconds"). Zero otherwise, and always zero for other classes.
	ResetAt time.Time
	// Reason is a short, log-safe account of the decision, made only of the
	// status and vendor tokens (never message text, which can quote keys):
	// "429 insufficient_quota", "in-stream overloaded_error",
	// "timeout first_byte", "200 not json".
	Reason string
}

// Classify decides the class of one upstream attempt (docs/architecture.md#how-a-class-is-decided). It is a
// pure function of its arguments: it reads the status, the headers and the
// error body's type, code and message, never the status alone, because
// vendors put very different failures behind one status
// (docs/vendors.md#when-the-status-misleads).
//
// A 2xx outcome without InStream is ClassNone only when its Body is one
// valid JSON object: callers read such an answer without validating it
// again (rewrite.ExtractAnswerUsage).
func Classify(o Outcome, now time.Time) Verdict {
	if o.Timeout != "" {
		return Verdict{Class: ClassTimeout, Reason: "timeout " + logToken(o.Timeout)}
	}
	if o.Status == 0 && !o.InStream {
		class, why := classifyTransport(o.Err)
		return Verdict{Class: class, Reason: why}
	}
	if isTimeout(o.Err) {
		// The response started but reading it timed out.
		return Verdict{Class: ClassTimeout, Reason: "timeout " + strconv.Itoa(o.Status) + " body"}
	}

	v := Verdict{RetryAfter: retryAfterHeader(o.Header, now)}
	prefix := statusText(o.Status)
	status := o.Status
	switch {
	case o.InStream:
		v.Info = rewrite.ParseError(o.Body)
		if !v.Info.Parsed {
			v.Class, v.Reason = ClassBadResponse, "in-stream not json"
			return v
		}
		prefix, status = "in-stream", statusOfCode(v.Info.Code)
	case o.Status >= 200 && o.Status < 300:
		body := bytes.TrimSpace(o.Body)
		switch {
		case len(body) == 0:
			v.Class, v.Reason = ClassBadResponse, prefix+" empty body"
			return v
		case body[0] != '{' || !rewrite.ValidJSON(body):
			// An HTML page from a proxy or captive portal, or JSON cut off
			// mid-body. (rewrite.ValidJSON is json.Valid's verdict at a
			// fraction of its cost: every answer is checked.)
			v.Class, v.Reason = ClassBadResponse, prefix+" not json"
			return v
		}
		// OpenRouter answers 200 and puts the error in the body
		// (docs/vendors.md#openai-compatible-servers); so can a failed Responses object. Only
		// decode when an "error" key can be there: the fast path stays a
		// scan.
		if !bytes.Contains(body, []byte(`"error"`)) {
			v.Reason = prefix
			return v
		}
		v.Info = rewrite.ParseError(body)
		if !v.Info.Parsed {
			v.Reason = prefix
			return v
		}
		prefix, status = prefix+" in-body", statusOfCode(v.Info.Code)
	default:
		v.Info = parseErrorMemo(o.Body)
	}

	f := newFacts(status, v.Info, o.Body)
	if v.RetryAfter == 0 {
		v.RetryAfter = v.Info.RetryDelay
	}
	if v.RetryAfter == 0 {
		v.RetryAfter = retryAfterText(f.msg)
	}
	f.hint = v.RetryAfter

	label := ""
	v.Class = ClassNone
	for _, r := range rules {
		if r.match(&f) {
			v.Class, label = r.class, r.label
			break
		}
	}
	if v.Class == ClassNone {
		if o.InStream || status != o.Status {
			// An error event or in-body error we cannot place is still an
			// upstream failure of unknown kind, like an unknown 5xx.
			v.Class = ClassServerError
		} else {
			// 1xx, 3xx or a status no HTTP server should send.
			v.Class = ClassBadResponse
		}
	}
	if v.Class == ClassQuotaExhausted {
		v.ResetAt = resetAt(&f, v.Info, now)
		if v.ResetAt.IsZero() && v.RetryAfter >= longRetryHint {
			// "Please retry after 86400 seconds" names the reset time too,
			// relative to now; the cooldown should last that long
			// (docs/vendors.md#azure-openai-errors: cool down for the hinted time).
			v.ResetAt = now.Add(v.RetryAfter)
		}
	}
	if label == "" {
		label = infoToken(v.Info)
	}
	v.Reason = prefix
	if label != "" {
		v.Reason += " " + label
	}
	return v
}

// facts is the normalised view of an error the rules match on.
type facts struct {
	status   int           // HTTP status, or the status an in-stream/in-body error names; 0 if none
	typ      string        // Info.Type, lower case
	code     string        // Info.Code, lower case
	msg      string        // Info.Message, or the head of an unparsed body, lower case
	quotaIDs []string      // Info.QuotaIDs, lower case
	hint     time.Duration // Verdict.RetryAfter
}

// rawMessageHead is how much of an unparsed body the message rules read: an
// Azure APIM or Cloudflare body is short, and an HTML page's tell-tale words
// are near its top.
const rawMessageHead = 4 << 10

// newFacts normalises an error for the rules.
func newFacts(status int, info rewrite.ErrorInfo, body []byte) facts {
	f := facts{
		status: status,
		typ:    strings.ToLower(info.Type),
		code:   strings.ToLower(info.Code),
		msg:    strings.ToLower(info.Message),
	}
	if !info.Parsed {
		// A body in no known envelope (Azure APIM's {"statusCode",
		// "message"}, Bedrock's {"message"}, plain text, HTML) can still say
		// "quota" or "content management policy".
		if len(body) > rawMessageHead {
			body = body[:rawMessageHead]
		}
		f.msg = strings.ToLower(string(body))
	}
	for _, id := range info.QuotaIDs {
		f.quotaIDs = append(f.quotaIDs, strings.ToLower(id))
	}
	return f
}

// is reports whether the error's code or type is one of names.
func (f *facts) is(names ...string) bool {
	for _, n := range names {
		if f.code == n || f.typ == n {
			return true
		}
	}
	return false
}

// says reports whether the message contains one of phrases (lower case).
func (f *facts) says(phrases ...string) bool {
	for _, p := range phrases {
		if strings.Contains(f.msg, p) {
			return true
		}
	}
	return false
}

// quota reports whether a Gemini quota ID contains part (lower case).
func (f *facts) quota(part string) bool {
	for _, id := range f.quotaIDs {
		if strings.Contains(id, part) {
			return true
		}
	}
	return false
}

// rateLimitish reports whether the error is a rate limit by status or name,
// before the retry hint is looked at.
func (f *facts) rateLimitish() bool {
	return f.status == http.StatusTooManyRequests ||
		f.is("rate_limit_error", "rate_limit_exceeded", "resource_exhausted", "requests", "tokens")
}

// rule assigns class to errors that match. Rules are tried in order and the
// first match wins, so the specific (a code, a message) comes before the
// general (a status).
type rule struct {
	class Class
	label string // reason token; "" uses the error's code or type
	match func(*facts) bool
}

// longRetryHint is the retry hint from which a 429 is a quota, not a rate
// limit. A rate window is a minute or so; Azure answers an exhausted daily
// quota with "retry after 86400 seconds" (docs/vendors.md#azure-openai-errors). At or
// above the default quota cooldown, waiting is what a cooldown is for.
const longRetryHint = 10 * time.Minute

// contextPhrases are the messages that mean the prompt does not fit the
// model's window, from every server we know (docs/vendors.md#openai-compatible-servers,
// after litellm's exception_mapping_utils.py).
var contextPhrases = []string{
	"prompt is too long",                        // Anthropic 400
	"maximum context length",                    // OpenAI 400, vLLM 400
	"exceeds the maximum number of tokens",      // Gemini 400 "input token count … exceeds the maximum number of tokens allowed"
	"exceeds the available context size",        // llama.cpp 400
	"is longer than the model's context length", // litellm's list
	"context is too long", "context too long",   // Gemini 500 INTERNAL, listed for "input context too long" (gem-docs)
	"exceed context limit", // Anthropic "input length and `max_tokens` exceed context limit" ⚠ (docs/vendors.md#anthropic-errors)
}

// zeroLimit matches Gemini's "limit: 0, model: …": the key has no quota at
// all for the model (continuedev/continue#10062), not a spent one.
var zeroLimit = regexp.MustCompile(`limit: 0(?:[^0-9.]|$)`)

// quotaSpent matches a message saying a quota is used up: APIM's "Out of
// call volume quota. Quota will be replenished in 00:00:59.", and the usual
// "quota exceeded" / "exceeded your quota" wordings.
var quotaSpent = regexp.MustCompile(`out of [a-z ]*quota|quota will be replenished|quota (?:is |has been )?exceeded|exceeded (?:your |the )?(?:[a-z]+ )?quota`)

// rules is the built-in classification table (docs/architecture.md#how-a-class-is-decided). errors.rules in
// the policy override its verdict (Compiled.ClassifyFor).
var rules = []rule{
	// Billing and quota first: OpenAI insufficient_quota and Anthropic
	// enforced_spend_limit_reached arrive as 429 and Anthropic's "credit
	// balance is too low" as 400, which would otherwise read as a rate
	// limit or a bad request (docs/vendors.md#when-the-status-misleads). Retrying never helps;
	// a cooldown does.
	{ClassQuotaExhausted, "", func(f *facts) bool {
		// OpenAI: insufficient_quota (type and code), the spend-limit codes
		// of oai-docs spend-limits, and the billing codes of the Dev Proxy
		// page ⚠. Anthropic: details.error_code enforced_spend_limit_reached
		// (ant-docs /rate-limits) and billing_error 402.
		return f.is("insufficient_quota", "credit_balance_exhausted", "organization_usage_limit_exceeded",
			"enforced_spend_limit_reached", "billing_error") ||
			strings.HasSuffix(f.code, "_spend_limit_exceeded")
	}},
	// Anthropic out of credits: a 400 invalid_request_error, not a 402
	// (anthropics/claude-code#88711).
	{ClassQuotaExhausted, "credit balance too low", func(f *facts) bool {
		return f.says("credit balance is too low")
	}},
	// Anthropic: a spend limit the customer set, also a 400 ⚠.
	{ClassQuotaExhausted, "usage limits reached", func(f *facts) bool {
		return f.says("reached your specified api usage limits")
	}},
	// Gemini QuotaFailure naming a per-day quota: nothing until midnight
	// Pacific (RooCodeInc/Roo-Code#3883).
	{ClassQuotaExhausted, "per-day quota", func(f *facts) bool { return f.quota("perday") }},
	{ClassQuotaExhausted, "zero quota", func(f *facts) bool {
		return (f.status == http.StatusTooManyRequests || f.typ == "resource_exhausted") && zeroLimit.MatchString(f.msg)
	}},
	// 402: Anthropic billing_error, Gemini prepaid credits used up,
	// OpenRouter out of credits.
	{ClassQuotaExhausted, "", func(f *facts) bool { return f.status == http.StatusPaymentRequired }},
	// Azure API Management's token-limit policy answers an exhausted quota
	// with 403, in APIM's own envelope (azure-openai-token-limit-policy).
	// Only when the body says the quota is spent: every other 403 is a
	// permission problem, including Google's "requires a quota project".
	{ClassQuotaExhausted, "quota", func(f *facts) bool {
		return f.status == http.StatusForbidden && quotaSpent.MatchString(f.msg)
	}},
	// Gemini FAILED_PRECONDITION: the free tier is not offered in the
	// caller's country and billing is not enabled. The request is fine and
	// the key will not serve it soon: fall over and cool down, as for any
	// account that cannot pay.
	{ClassQuotaExhausted, "", func(f *facts) bool { return f.typ == "failed_precondition" }},

	// Content filter before auth and invalid_request: Azure's filter is a
	// 400 with code content_filter, OpenRouter's moderation a 403.
	{ClassContentFilter, "", func(f *facts) bool {
		return f.is("content_filter", "content_policy_violation", "invalid_prompt")
	}},
	{ClassContentFilter, "content policy", func(f *facts) bool {
		// Azure "…triggering Azure OpenAI's content management policy", and
		// OpenAI invalid_prompt "…violating our usage policy" when the code
		// is lost (a body cut short, a gateway that rewrites it).
		return f.says("content management policy", "violating our usage policy")
	}},
	{ClassContentFilter, "moderation", func(f *facts) bool {
		// OpenRouter 403: "moderation or guardrail block", metadata.flagged_input.
		return f.status == http.StatusForbidden && f.says("moderation", "flagged")
	}},

	// Auth: a broken key must be seen, not masked. Gemini reports a bad key
	// as 400 INVALID_ARGUMENT with ErrorInfo reason API_KEY_INVALID
	// (continuedev/continue#10290).
	{ClassAuth, "", func(f *facts) bool {
		return f.is("api_key_invalid", "invalid_api_key", "authentication_error", "permission_error",
			"unauthenticated", "permission_denied")
	}},
	{ClassAuth, "", func(f *facts) bool {
		return f.status == http.StatusUnauthorized || f.status == http.StatusForbidden
	}},

	// Context too long, before rate limits and server errors.
	{ClassContextTooLong, "", func(f *facts) bool {
		return f.is("context_length_exceeded", "exceed_context_size_error")
	}},
	// OpenAI 429 "Request too large for gpt-4o … Limit 30000, Requested
	// 30601" (DrShushen/climb#13): one request above the key's whole TPM
	// limit. It is sent as rate_limit_exceeded but can never succeed on this
	// key, so retrying is futile and a cooldown would punish the key for one
	// request. context_too_long has exactly that action: fall over to an
	// upstream with room, no cooldown.
	{ClassContextTooLong, "request too large", func(f *facts) bool {
		return (f.status == http.StatusTooManyRequests || f.is("rate_limit_exceeded", "tokens")) &&
			f.says("request too large")
	}},
	{ClassContextTooLong, "context too long", func(f *facts) bool { return f.says(contextPhrases...) }},

	// Overloaded: Anthropic 529 overloaded_error (also in-stream), Gemini
	// 503 UNAVAILABLE (also in-stream), OpenAI server_is_overloaded and
	// slow_down ⚠, llama.cpp unavailable_error, vLLM queue full 503 ⚠.
	{ClassOverloaded, "", func(f *facts) bool {
		return f.status == http.StatusServiceUnavailable || f.status == 529 ||
			f.is("overloaded_error", "unavailable", "unavailable_error", "server_is_overloaded", "slow_down")
	}},
	// Vertex AI pay-as-you-go 429 without a QuotaFailure: the shared
	// capacity ran out, not the caller's quota (Vertex error-code-429 page).
	{ClassOverloaded, "shared capacity", func(f *facts) bool {
		return (f.status == http.StatusTooManyRequests || f.typ == "resource_exhausted") &&
			len(f.quotaIDs) == 0 && (f.says("resource exhausted. please try again later") ||
			// Vertex's own error page spells it with a comma.
			f.says("resource exhausted, please try again later"))
	}},
	// OpenAI's old "The engine is currently overloaded…" was a 429.
	{ClassOverloaded, "overloaded", func(f *facts) bool {
		return (f.status == http.StatusTooManyRequests || f.status >= 500) && f.says("overloaded")
	}},

	// A rate limit that asks for a wait measured in hours is a quota: Azure's
	// "Please retry after 86400 seconds" (vanderschaarlab/climb#1).
	{ClassQuotaExhausted, "long retry hint", func(f *facts) bool {
		return f.rateLimitish() && f.hint >= longRetryHint
	}},

	// Rate limits: OpenAI rate_limit_exceeded (type tokens/requests),
	// Anthropic rate_limit_error, Gemini RESOURCE_EXHAUSTED per-minute,
	// Vertex Provisioned Throughput "Too many requests".
	{ClassRateLimited, "per-minute quota", func(f *facts) bool { return f.quota("perminute") }},
	{ClassRateLimited, "", (*facts).rateLimitish},

	// Timeouts: 504, 408, Anthropic timeout_error, Gemini DEADLINE_EXCEEDED.
	{ClassTimeout, "", func(f *facts) bool {
		return f.status == http.StatusGatewayTimeout || f.status == http.StatusRequestTimeout ||
			f.is("timeout_error", "deadline_exceeded", "timeout")
	}},

	// Server errors: any other 5xx; Anthropic api_error, OpenAI and
	// OpenRouter server_error, Gemini INTERNAL, also in-stream.
	{ClassServerError, "", func(f *facts) bool {
		return (f.status >= 500 && f.status < 600) || f.is("api_error", "server_error", "internal", "unknown")
	}},

	// Everything else the caller got wrong: 400, 404 (model_not_found
	// included: docs/vendors.md#when-the-status-misleads), 409, 413, 422 and unknown 4xx.
	{ClassInvalidRequest, "", func(f *facts) bool {
		return (f.status >= 400 && f.status < 500) ||
			f.is("invalid_request_error", "not_found_error", "request_too_large", "conflict_error",
				"invalid_argument", "not_found", "out_of_range")
	}},
}

// statusOfCode returns the HTTP status an in-stream or in-body error names in
// its numeric code (Gemini {"code":503}, OpenRouter {"code":502}), or 0.
func statusOfCode(code string) int {
	n, err := strconv.Atoi(code)
	if err != nil || n < 400 || n > 599 {
		return 0
	}
	return n
}

// classifyTransport classifies an attempt that got no HTTP response.
func classifyTransport(err error) (Class, string) {
	if err == nil {
		return ClassUnreachable, "unreachable no response"
	}
	if isTimeout(err) {
		return ClassTimeout, "timeout transport"
	}
	var dnsErr *net.DNSError
	var certErr *tls.CertificateVerificationError
	var headerErr tls.RecordHeaderError
	var alertErr tls.AlertError
	switch {
	case errors.As(err, &dnsErr):
		return ClassUnreachable, "unreachable dns"
	case errors.Is(err, syscall.ECONNREFUSED):
		return ClassUnreachable, "unreachable refused"
	case errors.Is(err, syscall.ECONNRESET):
		return ClassUnreachable, "unreachable reset"
	case errors.As(err, &certErr), errors.As(err, &headerErr), errors.As(err, &alertErr):
		return ClassUnreachable, "unreachable tls"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return ClassUnreachable, "unreachable eof"
	case errors.Is(err, context.Canceled):
		return ClassUnreachable, "unreachable canceled"
	}
	return ClassUnreachable, "unreachable"
}

// isTimeout reports whether err is a deadline: context.DeadlineExceeded, or
// a net.Error (or os.ErrDeadlineExceeded) whose Timeout() is true.
func isTimeout(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}

// maxRetryHint bounds a believable retry hint; larger values are garbage.
const maxRetryHint = 366 * 24 * time.Hour

// firstValue is a header's first value, as http.Header.Get returns it.
func firstValue(vs []string) string {
	if len(vs) == 0 {
		return ""
	}
	return vs[0]
}

// statusText is strconv.Itoa of an HTTP status: a success's own is a
// constant, so that classifying every answer formats (and allocates)
// nothing.
func statusText(status int) string {
	switch status {
	case http.StatusOK:
		return "200"
	case http.StatusCreated:
		return "201"
	case http.StatusAccepted:
		return "202"
	}
	return strconv.Itoa(status)
}

// retryAfterHeader reads the server's retry hint. retry-after-ms (float
// milliseconds; Azure, and the OpenAI SDKs read it first) wins over
// retry-after (delta-seconds or an HTTP-date). Negative, non-finite and
// unparseable values are ignored, as the SDKs do.
func retryAfterHeader(h http.Header, now time.Time) time.Duration {
	// Indexed rather than Get: the names are canonical already, and every
	// answer is classified.
	if v := strings.TrimSpace(firstValue(h["Retry-After-Ms"])); v != "" {
		// The comparisons are written so that NaN fails them.
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 && ms <= float64(maxRetryHint/time.Millisecond) {
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	v := strings.TrimSpace(firstValue(h["Retry-After"]))
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseFloat(v, 64); err == nil {
		// RFC 9110 says delta-seconds is an integer; oai-py also accepts a
		// float, and so do we.
		if !(secs >= 0 && secs <= maxRetryHint.Seconds()) {
			return 0
		}
		return time.Duration(secs * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 && d <= maxRetryHint {
			return d
		}
	}
	return 0
}

var (
	// retryAfterSeconds matches Azure's "Please retry after 86400 seconds".
	retryAfterSeconds = regexp.MustCompile(`(?i)retry after (\d{1,9}) seconds?`)
	// replenishedIn matches Azure APIM's "Quota will be replenished in
	// 23:59:12." (hours:minutes:seconds).
	replenishedIn = regexp.MustCompile(`(?i)replenished in (\d{1,4}):(\d{2}):(\d{2})`)
	// tryAgainIn matches OpenAI's "Please try again in 18.642s" and
	// "… in 6m0s" / "… in 20ms".
	tryAgainIn = regexp.MustCompile(`(?i)try again in ((?:\d+(?:\.\d+)?(?:ms|h|m|s))+)`)
)

// retryAfterText reads a retry hint from an error message, for bodies whose
// headers carry none (Azure's daily quota, OpenAI rate limits through
// gateways that drop headers).
func retryAfterText(msg string) time.Duration {
	// Each regexp runs only when the message holds the literal its match
	// must contain (containsFoldASCII): most messages hold none, and a
	// case-insensitive regexp that finds nothing still steps through every
	// byte, which made this the costliest part of classifying an error.
	if !containsFoldASCII(msg, "retry after ") && !containsFoldASCII(msg, "hed in ") && !containsFoldASCII(msg, "try again in ") {
		return 0
	}
	if m := retryAfterSeconds.FindStringSubmatch(msg); m != nil {
		if n, err := strconv.Atoi(m[1]); err == nil {
			if d := time.Duration(n) * time.Second; d <= maxRetryHint {
				return d
			}
		}
	}
	if m := replenishedIn.FindStringSubmatch(msg); m != nil {
		h, _ := strconv.Atoi(m[1])
		mi, _ := strconv.Atoi(m[2])
		sec, _ := strconv.Atoi(m[3])
		if d := time.Duration(h)*time.Hour + time.Duration(mi)*time.Minute + time.Duration(sec)*time.Second; d > 0 && d <= maxRetryHint {
			return d
		}
	}
	if m := tryAgainIn.FindStringSubmatch(msg); m != nil {
		if d, err := time.ParseDuration(strings.ToLower(m[1])); err == nil && d > 0 && d <= maxRetryHint {
			return d
		}
	}
	return 0
}

// regainAccess matches Anthropic's enforced spend limit message, "You will
// regain access on 2026-09-01 at 00:00 UTC." (ant-docs /rate-limits).
var regainAccess = regexp.MustCompile(`regain access on (\d{4}-\d{2}-\d{2}) at (\d{2}:\d{2}) UTC`)

// pacific is the zone in which Gemini's per-day quotas reset.
var pacific = loadPacific()

// loadPacific loads America/Los_Angeles. With time/tzdata embedded it cannot
// fail; the fixed UTC−8 fallback is an hour early in summer but still a
// reset on the right day.
func loadPacific() *time.Location {
	if loc, err := time.LoadLocation("America/Los_Angeles"); err == nil {
		return loc
	}
	return time.FixedZone("PST", -8*60*60)
}

// resetAt returns when a quota_exhausted upstream's quota comes back, when
// the error says so.
func resetAt(f *facts, info rewrite.ErrorInfo, now time.Time) time.Time {
	if m := regainAccess.FindStringSubmatch(info.Message); m != nil {
		if t, err := time.Parse("2006-01-02 15:04", m[1]+" "+m[2]); err == nil {
			return t
		}
	}
	if f.code == "enforced_spend_limit_reached" {
		// The monthly cap lifts on the 1st of the month, 00:00 UTC, even when
		// the message does not say so.
		u := now.UTC()
		return time.Date(u.Year(), u.Month()+1, 1, 0, 0, 0, 0, time.UTC)
	}
	if f.quota("perday") {
		p := now.In(pacific)
		return time.Date(p.Year(), p.Month(), p.Day()+1, 0, 0, 0, 0, pacific)
	}
	return time.Time{}
}

// infoToken names an error by its code, else its type, for Verdict.Reason.
// A numeric code only repeats the status and is skipped.
func infoToken(info rewrite.ErrorInfo) string {
	if info.Code != "" {
		if _, err := strconv.Atoi(info.Code); err != nil {
			if t := logToken(info.Code); t != "" {
				return t
			}
		}
	}
	return logToken(info.Type)
}

// logToken keeps a vendor-supplied token log-safe: short, and only the
// characters error types and codes are made of.
func logToken(s string) string {
	const maxLen = 48
	var b strings.Builder
	for _, r := range s {
		if b.Len() >= maxLen {
			break
		}
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-', r == '.', r == ':':
			b.WriteRune(r)
		}
	}
	return b.String()
}
