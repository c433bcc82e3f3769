package rewrite

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"time"
)

// maxParsedErrorBody caps how much of an error body ParseError reads. Error
// envelopes are a few hundred bytes; a body larger than this is an HTML page,
// a misrouted response or an attack, and is not worth decoding.
const maxParsedErrorBody = 64 << 10

// ErrorInfo is what a vendor error body says, vendor-neutral.
type ErrorInfo struct {
	// Parsed reports that the body was a recognised error envelope of some
	// vendor. When false, the other fields are empty.
	Parsed bool
	// Type is the OpenAI error.type, the Anthropic error.type, or the Gemini
	// error.status (e.g. RESOURCE_EXHAUSTED).
	Type string
	// Code is the OpenAI error.code (a string, or a number rendered as a
	// string: Azure, vLLM, llama.cpp and OpenRouter send numbers), the
	// Anthropic error.details.error_code, or the Gemini google.rpc.ErrorInfo
	// reason (e.g. API_KEY_INVALID). A Gemini body without an ErrorInfo
	// detail keeps its numeric error.code here.
	Code string
	// Message is the human-readable error message, verbatim.
	Message string
	// QuotaIDs are the quotaId values of a Gemini google.rpc.QuotaFailure
	// detail, e.g. GenerateRequestsPerDayPerProjectPerModel-FreeTier.
	QuotaIDs []string
	// RetryDelay is the Gemini google.rpc.RetryInfo retryDelay ("26s"); zero
	// when absent, negative or unparseable.
	RetryDelay time.Duration
}

// ParseError reads a vendor error body. It accepts every envelope detour has
// seen regardless of the upstream's shape, because "OpenAI-compatible"
// servers send other vendors' envelopes and odd variants
// (docs/vendors.md, from #openai-errors to #openai-compatible-servers):
//
//   - OpenAI {"error":{"message","type","param","code"}}, code a string,
//     number or null (Azure sends "429", vLLM and llama.cpp send 400);
//   - Anthropic {"type":"error","error":{"type","message","details":{"error_code"}}};
//   - Gemini google.rpc.Status {"error":{"code","message","status","details"}},
//     also wrapped in an array [{"error":…}] (gg-py errors.py unwraps it);
//   - OpenRouter {"error":{"code":<int>,"message","metadata"}};
//   - Ollama native {"error":"<string>"};
//   - old vLLM flat {"object":"error","message","type","code"};
//   - OpenAI Responses in-stream {"type":"error","code","message"} and
//     {"type":"response.failed","response":{"error":{"code","message"}}}.
//
// Only the first 64 KiB are read; a body cut there is not valid JSON and so is
// simply not Parsed. ParseError never panics.
func ParseError(body []byte) ErrorInfo {
	if len(body) > maxParsedErrorBody {
		body = body[:maxParsedErrorBody]
	}
	body = bytes.TrimSpace(body)
	if len(body) > 0 && body[0] == '[' {
		// Gemini sometimes wraps the Status in a one-element array
		// (continuedev/continue#8967).
		var arr []json.RawMessage
		if json.Unmarshal(body, &arr) != nil || len(arr) == 0 {
			return ErrorInfo{}
		}
		body = bytes.TrimSpace(arr[0])
	}
	if len(body) == 0 || body[0] != '{' {
		return ErrorInfo{}
	}
	var top map[string]json.RawMessage
	if json.Unmarshal(body, &top) != nil {
		return ErrorInfo{}
	}
	if info, ok := parseErrorValue(top["error"]); ok {
		return info
	}
	if info, ok := parseAWSError(top); ok {
		return info
	}
	switch errorString(top["object"]) {
	case "error":
		// Old vLLM builds: the error fields sit at the top level.
		return withParsed(ErrorInfo{
			Message: errorString(top["message"]),
			Type:    errorString(top["type"]),
			Code:    errorCode(top["code"]),
		})
	}
	switch errorString(top["type"]) {
	case "error":
		// OpenAI Responses API `event: error`: {type:"error",code,message,param}.
		// The top-level "type" is the event's type, not an error type.
		return withParsed(ErrorInfo{
			Message: errorString(top["message"]),
			Code:    errorCode(top["code"]),
		})
	case "response.failed":
		// OpenAI Responses API: the failure sits in response.error.
		var resp map[string]json.RawMessage
		if json.Unmarshal(top["response"], &resp) == nil {
			if info, ok := parseErrorValue(resp["error"]); ok {
				return info
			}
		}
	}
	return ErrorInfo{}
}

// parseErrorValue reads the value of an "error" key: an object in every
// vendor's envelope, or a bare string in Ollama's native API. A null or empty
// value (successful Responses objects carry "error":null) is no error.
func parseErrorValue(raw json.RawMessage) (ErrorInfo, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return ErrorInfo{}, false
	}
	if raw[0] == '"' {
		msg := errorString(raw)
		return ErrorInfo{Parsed: msg != "", Message: msg}, msg != ""
	}
	var e map[string]json.RawMessage
	if raw[0] != '{' || json.Unmarshal(raw, &e) != nil {
		return ErrorInfo{}, false
	}
	info := ErrorInfo{
		Message: errorString(e["message"]),
		Type:    errorString(e["type"]),
		Code:    errorCode(e["code"]),
	}
	if info.Type == "" {
		// Gemini puts the canonical code name in "status". Azure's content
		// filter error has "status":400, a number, which errorString ignores.
		info.Type = errorString(e["status"])
	}
	details := bytes.TrimSpace(e["details"])
	switch {
	case len(details) > 0 && details[0] == '{':
		// Anthropic: error.details.error_code, e.g. enforced_spend_limit_reached.
		var d map[string]json.RawMessage
		if json.Unmarshal(details, &d) == nil {
			if c := errorString(d["error_code"]); c != "" {
				info.Code = c
			}
		}
	case len(details) > 0 && details[0] == '[':
		parseGoogleDetails(details, &info)
	}
	info = withParsed(info)
	return info, info.Parsed
}

// parseGoogleDetails reads the google.rpc detail messages detour acts on:
// ErrorInfo (reason API_KEY_INVALID marks a bad key on a 400), QuotaFailure
// (quota IDs tell a per-minute from a per-day limit) and RetryInfo.
func parseGoogleDetails(raw json.RawMessage, info *ErrorInfo) {
	var details []map[string]json.RawMessage
	if json.Unmarshal(raw, &details) != nil {
		return
	}
	for _, d := range details {
		t := errorString(d["@type"])
		switch t[strings.LastIndexByte(t, '/')+1:] {
		case "google.rpc.ErrorInfo":
			if r := errorString(d["reason"]); r != "" {
				info.Code = r
			}
		case "google.rpc.QuotaFailure":
			var violations []map[string]json.RawMessage
			if json.Unmarshal(d["violations"], &violations) == nil {
				for _, v := range violations {
					if id := errorString(v["quotaId"]); id != "" {
						info.QuotaIDs = append(info.QuotaIDs, id)
					}
				}
			}
		case "google.rpc.RetryInfo":
			if delay := protoDuration(d["retryDelay"]); delay > 0 {
				info.RetryDelay = delay
			}
		}
	}
}

// withParsed marks info Parsed when it carries anything at all: an envelope
// with no message, type or code is not an error we can say anything about.
func withParsed(info ErrorInfo) ErrorInfo {
	info.Parsed = info.Message != "" || info.Type != "" || info.Code != ""
	return info
}

// errorString returns raw decoded as a JSON string, or "" when it is anything
// else (null, a number, an object).
func errorString(raw json.RawMessage) string {
	var s string
	if len(raw) == 0 || json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}

// errorCode returns an error code that may be a string or a number: OpenAI
// sends strings, Azure the status as a string, and vLLM, llama.cpp, Gemini and
// OpenRouter a number, which is kept as its JSON literal.
func errorCode(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return ""
	}
	if raw[0] == '"' {
		return errorString(raw)
	}
	var n json.Number
	if json.Unmarshal(raw, &n) != nil {
		return ""
	}
	return n.String()
}

// protoDuration decodes a google.protobuf.Duration: a JSON string such as
// "26s" or "1.5s" in the proto3 JSON mapping, or {"seconds","nanos"} when a
// server serialises the message form.
func protoDuration(raw json.RawMessage) time.Duration {
	if s := errorString(raw); s != "" {
		if !strings.HasSuffix(s, "s") {
			return 0
		}
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 {
			return 0
		}
		return d
	}
	var m struct {
		Seconds json.Number `json:"seconds"`
		Nanos   int64       `json:"nanos"`
	}
	if json.Unmarshal(raw, &m) != nil {
		return 0
	}
	secs, err := m.Seconds.Int64()
	if err != nil || secs < 0 || m.Nanos < 0 || secs > int64(maxProtoSeconds) {
		return 0
	}
	return time.Duration(secs)*time.Second + time.Duration(m.Nanos)
}

// maxProtoSeconds keeps a {"seconds"} duration from overflowing time.Duration.
const maxProtoSeconds = 1 << 32

// AppError is an error detour itself reports to the app in the app's own
// envelope: when every upstream failed, or to report a malformed request.
type AppError struct {
	// Status is the HTTP status to send. Zero, or anything outside 400–599,
	// means StatusForClass(Class), which is 502 when Class is "".
	Status int
	// Class is the detour failure class name (rate_limited, quota_exhausted,
	// overloaded, server_error, timeout, unreachable, context_too_long,
	// invalid_request, auth, content_filter, bad_response) or "". It picks
	// the vendor error type; "" or an unknown name picks it from Status.
	Class string
	// Message is the text the app sees; "" gives a generic one per class.
	Message string
}

// StatusForClass is the HTTP status detour sends for a failure class when
// the caller has no better one: the status the vendors use for the same
// condition, so that the app's SDK raises its usual error type and retries
// (or not) as it would against the vendor.
func StatusForClass(class string) int {
	switch class {
	case "rate_limited", "quota_exhausted":
		return http.StatusTooManyRequests
	case "overloaded":
		return http.StatusServiceUnavailable
	case "timeout":
		return http.StatusGatewayTimeout
	case "context_too_long", "invalid_request", "content_filter":
		return http.StatusBadRequest
	case "auth":
		return http.StatusUnauthorized
	}
	// server_error, unreachable, bad_response and "": the upstream side
	// failed, which is what 502 Bad Gateway says.
	return http.StatusBadGateway
}

// classForStatus picks a class for an AppError that names none, so that the
// vendor error type still matches the status.
func classForStatus(status int) string {
	switch {
	case status == http.StatusTooManyRequests:
		return "rate_limited"
	case status == http.StatusPaymentRequired:
		return "quota_exhausted"
	case status == http.StatusServiceUnavailable || status == 529:
		return "overloaded"
	case status == http.StatusGatewayTimeout || status == http.StatusRequestTimeout:
		return "timeout"
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return "auth"
	case status >= 400 && status < 500:
		return "invalid_request"
	}
	return "server_error"
}

// knownErrorClass reports whether class is one AppError understands.
func knownErrorClass(class string) bool {
	switch class {
	case "rate_limited", "quota_exhausted", "overloaded", "server_error", "timeout",
		"unreachable", "context_too_long", "invalid_request", "auth",
		"content_filter", "bad_response":
		return true
	}
	return false
}

// defaultErrorMessages are the texts detour sends when AppError.Message is
// empty.
var defaultErrorMessages = map[string]string{
	"rate_limited":     "Rate limit reached on every upstream. Please try again later.",
	"quota_exhausted":  "Quota or credits exhausted on every upstream.",
	"overloaded":       "Overloaded",
	"server_error":     "The upstream server had an error while processing your request.",
	"timeout":          "The upstream did not answer in time.",
	"unreachable":      "No upstream could be reached.",
	"context_too_long": "The prompt is too long for every upstream's context window.",
	"invalid_request":  "Invalid request.",
	"auth":             "The upstream rejected the credentials.",
	"content_filter":   "The request was blocked by a content policy.",
	"bad_response":     "The upstream sent a malformed response.",
}

// vendorError is one AppError spelled in one vendor's vocabulary.
type vendorError struct {
	status  int
	typ     string // OpenAI type, Anthropic type, or Gemini status
	code    string // OpenAI code; "" is sent as null
	param   string // OpenAI param; "" is sent as null
	message string
	details json.RawMessage // Gemini error.details; nil: none
}

// vendorErrorFor resolves e's status, class and message and picks the vendor
// type each official SDK expects
// (docs/vendors.md#errors-detour-writes-to-the-app).
func vendorErrorFor(shape Shape, e AppError) vendorError {
	class := e.Class
	status := e.Status
	if status < 400 || status > 599 {
		status = StatusForClass(class)
	}
	if !knownErrorClass(class) {
		class = classForStatus(status)
	}
	v := vendorError{status: status, message: e.Message}
	if v.message == "" {
		v.message = defaultErrorMessages[class]
	}
	switch shape {
	case Anthropic:
		v.typ = anthropicType(class, &v.status)
	case Gemini:
		v.typ, v.status = geminiStatus(class, v.status)
	default:
		v.typ, v.code, v.param = openAIType(class, v.status)
	}
	return v
}

// openAIType returns the OpenAI error type, code and param for class. Codes
// are only those OpenAI itself sends (docs/vendors.md#openai-errors); a null code is
// what OpenAI sends for its generic 500s.
func openAIType(class string, status int) (typ, code, param string) {
	switch class {
	case "rate_limited":
		return "requests", "rate_limit_exceeded", ""
	case "quota_exhausted":
		return "insufficient_quota", "insufficient_quota", ""
	case "overloaded":
		return "server_error", "server_is_overloaded", ""
	case "timeout":
		return "timeout", "", ""
	case "context_too_long":
		return "invalid_request_error", "context_length_exceeded", "messages"
	case "invalid_request":
		return "invalid_request_error", "", ""
	case "auth":
		// OpenAI reports a bad key as invalid_request_error/invalid_api_key.
		if status == http.StatusUnauthorized {
			return "invalid_request_error", "invalid_api_key", ""
		}
		return "invalid_request_error", "", ""
	case "content_filter":
		return "invalid_request_error", "content_policy_violation", ""
	}
	return "server_error", "", ""
}

// anthropicType returns the Anthropic error.type for class, from the list in
// docs/vendors.md#anthropic-errors, and moves *status where Anthropic uses its own: 529 for
// overloaded_error (ant-py raises OverloadedError only for 529) and 402 for
// billing_error.
func anthropicType(class string, status *int) string {
	switch class {
	case "rate_limited":
		return "rate_limit_error"
	case "quota_exhausted":
		// billing_error/402 rather than Anthropic's spend-cap 429: the SDKs
		// retry every 429 twice, and retrying an exhausted quota is wasted.
		*status = http.StatusPaymentRequired
		return "billing_error"
	case "overloaded":
		*status = 529
		return "overloaded_error"
	case "timeout":
		return "timeout_error"
	case "auth":
		if *status == http.StatusForbidden {
			return "permission_error"
		}
		return "authentication_error"
	case "context_too_long", "invalid_request", "content_filter":
		if *status == http.StatusNotFound {
			return "not_found_error"
		}
		return "invalid_request_error"
	}
	return "api_error"
}

// geminiStatus returns the google.rpc.Status name for class and the HTTP
// status that goes with it. Google pairs each name with one status
// (docs/vendors.md#errors-detour-writes-to-the-app) and clients read error.code as the HTTP status, so the
// pair is kept canonical: a 502 is sent as 500 INTERNAL.
func geminiStatus(class string, status int) (string, int) {
	switch class {
	case "rate_limited":
		return "RESOURCE_EXHAUSTED", http.StatusTooManyRequests
	case "quota_exhausted":
		// Gemini sends 402 RESOURCE_EXHAUSTED when prepaid credits are gone
		// (docs/vendors.md#gemini-errors); any other quota is a 429.
		if status == http.StatusPaymentRequired {
			return "RESOURCE_EXHAUSTED", http.StatusPaymentRequired
		}
		return "RESOURCE_EXHAUSTED", http.StatusTooManyRequests
	case "overloaded":
		return "UNAVAILABLE", http.StatusServiceUnavailable
	case "timeout":
		return "DEADLINE_EXCEEDED", http.StatusGatewayTimeout
	case "auth":
		if status == http.StatusForbidden {
			return "PERMISSION_DENIED", http.StatusForbidden
		}
		return "UNAUTHENTICATED", http.StatusUnauthorized
	case "context_too_long", "invalid_request", "content_filter":
		if status == http.StatusNotFound {
			return "NOT_FOUND", http.StatusNotFound
		}
		return "INVALID_ARGUMENT", http.StatusBadRequest
	}
	return "INTERNAL", http.StatusInternalServerError
}

// The wire forms of the three envelopes. Field order is the vendors' own, so
// output is stable for golden tests.
type (
	openAIErrorWire struct {
		Error openAIErrorWireObject `json:"error"`
	}
	openAIErrorWireObject struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	}
	anthropicErrorWire struct {
		Type  string                   `json:"type"`
		Error anthropicErrorWireObject `json:"error"`
	}
	anthropicErrorWireObject struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	}
	geminiErrorWire struct {
		Error geminiErrorWireObject `json:"error"`
	}
	geminiErrorWireObject struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Status  string          `json:"status"`
		Details json.RawMessage `json:"details,omitempty"`
	}
)

// nullIfEmpty turns "" into a JSON null.
func nullIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// marshalError encodes v as one line of JSON. HTML escaping is off because
// these bodies are read by SDKs, not browsers, and "tokens > 200000" should
// read as it does from the vendor; encoding/json still escapes quotes, control
// characters, U+2028 and U+2029, so a message can never break the SSE line.
func marshalError(v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		// Unreachable: the values are plain structs of strings and ints.
		return []byte(`{"error":{"message":"detour: cannot encode error"}}`)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// errorEnvelope renders v in shape's error envelope.
func errorEnvelope(shape Shape, v vendorError) []byte {
	switch shape {
	case Anthropic:
		return marshalError(anthropicErrorWire{
			Type:  "error",
			Error: anthropicErrorWireObject{Type: v.typ, Message: v.message},
		})
	case Gemini:
		return marshalError(geminiErrorWire{
			Error: geminiErrorWireObject{Code: v.status, Message: v.message, Status: v.typ, Details: v.details},
		})
	}
	return marshalError(openAIErrorWire{Error: openAIErrorWireObject{
		Message: v.message,
		Type:    v.typ,
		Param:   nullIfEmpty(v.param),
		Code:    nullIfEmpty(v.code),
	}})
}

// ErrorBody renders e in shape's HTTP error envelope (docs/vendors.md#errors-detour-writes-to-the-app). It
// returns the status to send, which differs from e.Status where the vendor
// uses its own (Anthropic overloaded → 529, Anthropic quota → 402, Gemini
// keeps its canonical status per name), and the JSON body. An unknown shape
// gets the OpenAI envelope, the one most clients understand.
func ErrorBody(shape Shape, e AppError) (status int, body []byte) {
	return ErrorBodyWithDetails(shape, e, nil)
}

// ErrorBodyWithDetails is ErrorBody with a google.rpc.Status details array
// (GeminiErrorDetails) sent as error.details in the Gemini envelope. Other
// shapes have no place for it and ignore it, as does Gemini when details is
// not a JSON array.
func ErrorBodyWithDetails(shape Shape, e AppError, details json.RawMessage) (status int, body []byte) {
	v := vendorErrorFor(shape, e)
	if shape == Gemini && json.Valid(details) && bytes.HasPrefix(bytes.TrimSpace(details), []byte("[")) {
		v.details = details
	}
	return v.status, errorEnvelope(shape, v)
}

// StreamErrorEvent renders e as the in-stream error event the app's SDK
// expects after a 200, as complete SSE bytes ending in a blank line:
//
//   - OpenAI: data: {"error":{…}} — openai-go ends the stream with a
//     StreamError, oai-py raises APIError;
//   - Anthropic: event: error + data: {"type":"error","error":{…}} —
//     the SDKs dispatch on the event name;
//   - Gemini: data: {"error":{"code","message","status"}} — gg-py raises from
//     error.code. go-genai reads this line as an empty chunk, not an error
//     (docs/vendors.md#errors-detour-writes-to-the-app); there is no framing that both SDKs accept.
func StreamErrorEvent(shape Shape, e AppError) []byte {
	if shape == OpenAIResponses {
		return AppendResponsesErrorEvent(nil, e, 0)
	}
	body := errorEnvelope(shape, vendorErrorFor(shape, e))
	out := make([]byte, 0, len(body)+32)
	if shape == Anthropic {
		out = append(out, "event: error\n"...)
	}
	out = append(out, "data: "...)
	out = append(out, body...)
	return append(out, "\n\n"...)
}
