package fakevendor

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/detour-proxy/detour/rewrite"
)

// DefaultAnthropicRetryAfter is the retry-after header of an Anthropic rate
// limit when Fault.RetryAfter is empty: the real API sends one with every
// rate_limit_error except enforced_spend_limit_reached.
const DefaultAnthropicRetryAfter = "1"

// defaultGeminiRetryDelay is RetryInfo.retryDelay when Fault.RetryAfter is
// not a whole number of seconds; the value of the captured example in
// docs/vendors.md#gemini-errors.
const defaultGeminiRetryDelay = 26

// ErrorBody returns the HTTP status and the exact body the fake sends for an
// error of class f.Class with status f.Status (f.Kind is ignored) on shape.
// model is the request's model (Gemini: the model of the URL) and appears in
// the messages that name it; requestID is the Anthropic body's request_id
// (ignored by the other shapes). A zero f.Status means the class's usual
// status; an empty f.Class means the vendor's generic body for f.Status.
//
// Tests of code that forwards vendor errors can compare against it, e.g.
// ErrorBody(rewrite.Anthropic, Fault{Class: ClassOverloaded}, "claude-x", id).
func ErrorBody(shape rewrite.Shape, f Fault, model, requestID string) (int, []byte) {
	return errorBody(shape, f, model, requestID, time.Now())
}

// errorBody is ErrorBody at a given time (Anthropic's spend-limit message
// names the first of next month).
func errorBody(shape rewrite.Shape, f Fault, model, requestID string, now time.Time) (int, []byte) {
	class, status := resolve(shape, f.Class, f.Status)
	switch shape {
	case rewrite.Anthropic:
		e := anthropicError(class, status, model, now)
		return status, marshal(anthropicErrorBody{Type: "error", Error: e, RequestID: requestID})
	case rewrite.Gemini:
		e := geminiError(class, status, model, f.RetryAfter)
		e.Code = status // Gemini's code is always the HTTP status.
		return status, marshal(geminiErrorBody{Error: e})
	default:
		return status, marshal(openaiErrorBody{Error: openaiError(class, status, model)})
	}
}

// streamErrorData is the data of the in-stream error event for class on
// shape: OpenAI `{"error":{…}}`, Anthropic `{"type":"error","error":{…}}`
// (no request_id, as in the SDKs' fixtures), Gemini `{"error":{"code":…}}`.
// An empty class is the shape's usual in-stream error.
func streamErrorData(shape rewrite.Shape, class, model string, now time.Time) []byte {
	if class == "" {
		class = streamErrorClass(shape)
	}
	_, body := errorBody(shape, Fault{Class: class}, model, "", now)
	return body
}

// statusOrder is the order in which resolve looks for the class whose usual
// status is a given status, so that e.g. a bare Gemini 400 is
// invalid_request rather than auth.
var statusOrder = []string{
	ClassInvalidRequest, ClassAuth, ClassNotFound, ClassRateLimit,
	ClassServerError, ClassOverloaded, ClassTimeout,
}

// resolve fills in a missing class or status: a class alone gets its usual
// status on shape; a status alone gets the class whose usual status it is,
// else no class (the generic body); neither is a 500.
func resolve(shape rewrite.Shape, class string, status int) (string, int) {
	switch {
	case class != "" && status == 0:
		return class, classStatus(shape, class)
	case class == "" && status == 0:
		return ClassServerError, http.StatusInternalServerError
	case class == "":
		for _, c := range statusOrder {
			if classStatus(shape, c) == status {
				return c, status
			}
		}
	}
	return class, status
}

// classStatus is the usual HTTP status of class on shape.
func classStatus(shape rewrite.Shape, class string) int {
	switch class {
	case ClassRateLimit, ClassQuotaPerDay, ClassSpendLimit:
		return http.StatusTooManyRequests
	case ClassInsufficientQuota, ClassCreditBalance:
		if shape == rewrite.Anthropic {
			// Anthropic answers an empty credit balance with a 400
			// (anthropics/claude-code#88711), not a 402 or 429.
			return http.StatusBadRequest
		}
		return http.StatusTooManyRequests
	case ClassOverloaded:
		if shape == rewrite.Anthropic {
			return 529
		}
		return http.StatusServiceUnavailable
	case ClassInvalidRequest, ClassContextTooLong:
		return http.StatusBadRequest
	case ClassAuth:
		if shape == rewrite.Gemini {
			// Gemini rejects a bad key with 400 INVALID_ARGUMENT.
			return http.StatusBadRequest
		}
		return http.StatusUnauthorized
	case ClassNotFound:
		return http.StatusNotFound
	case ClassTimeout:
		return http.StatusGatewayTimeout
	}
	return http.StatusInternalServerError
}

// statusText is the message of a generic error body.
func statusText(status int) string {
	if t := http.StatusText(status); t != "" {
		return t
	}
	return "HTTP " + strconv.Itoa(status)
}

// --- OpenAI ---

// openaiErrorBody is OpenAI's error envelope.
type openaiErrorBody struct {
	Error openaiErrorObject `json:"error"`
}

// openaiErrorObject is the object inside OpenAI's error envelope; param and
// code are null when absent.
type openaiErrorObject struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

// ptr returns a pointer to s, for the nullable fields of error bodies.
func ptr(s string) *string { return &s }

// openaiError is the OpenAI error for class (empty: generic for status).
func openaiError(class string, status int, model string) openaiErrorObject {
	const rateLimitHelp = " Visit https://platform.openai.com/account/rate-limits to learn more."
	switch class {
	case ClassRateLimit:
		return openaiErrorObject{
			Message: "Rate limit reached for " + model + " in organization org-fakevendor on tokens per min (TPM): Limit 30000, Used 14567, Requested 24754. Please try again in 18.642s." + rateLimitHelp,
			Type:    "tokens", Code: ptr("rate_limit_exceeded"),
		}
	case ClassQuotaPerDay:
		return openaiErrorObject{
			Message: "Rate limit reached for " + model + " in organization org-fakevendor on requests per day (RPD): Limit 10000, Used 10000, Requested 1. Please try again in 8.64s." + rateLimitHelp,
			Type:    "requests", Code: ptr("rate_limit_exceeded"),
		}
	case ClassInsufficientQuota:
		// Verbatim from docs/vendors.md#openai-errors (ChatGPTNextWeb/NextChat#3664).
		return openaiErrorObject{
			Message: "You exceeded your current quota, please check your plan and billing details. For more information on this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors.",
			Type:    "insufficient_quota", Code: ptr("insufficient_quota"),
		}
	case ClassSpendLimit:
		// The code is documented (oai-docs spend-limits); the type and the
		// wording are not, so they follow insufficient_quota.
		return openaiErrorObject{
			Message: "You have exceeded your organization's spend limit. To continue, increase the limit at https://platform.openai.com/settings/organization/limits.",
			Type:    "insufficient_quota", Code: ptr("organization_spend_limit_exceeded"),
		}
	case ClassCreditBalance:
		// Code and type as listed in docs/vendors.md#openai-errors (marked ⚠ there).
		return openaiErrorObject{
			Message: "Your credit balance is exhausted. To continue, add credits at https://platform.openai.com/settings/organization/billing.",
			Type:    "insufficient_quota", Code: ptr("credit_balance_exhausted"),
		}
	case ClassOverloaded:
		return openaiErrorObject{
			Message: "The engine is currently overloaded, please try again later.",
			Type:    "server_error", Code: ptr("server_is_overloaded"),
		}
	case ClassServerError:
		return openaiErrorObject{
			Message: "The server had an error while processing your request. Sorry about that!",
			Type:    "server_error",
		}
	case ClassInvalidRequest:
		return openaiErrorObject{
			Message: "Missing required parameter: 'messages'.",
			Type:    "invalid_request_error", Param: ptr("messages"), Code: ptr("missing_required_parameter"),
		}
	case ClassAuth:
		return openaiErrorObject{
			Message: "Incorrect API key provided: sk-fake***********abcd. You can find your API key at https://platform.openai.com/account/api-keys.",
			Type:    "invalid_request_error", Code: ptr("invalid_api_key"),
		}
	case ClassContextTooLong:
		return openaiErrorObject{
			Message: "This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens. Please reduce the length of the messages.",
			Type:    "invalid_request_error", Param: ptr("messages"), Code: ptr("context_length_exceeded"),
		}
	case ClassNotFound:
		return openaiErrorObject{
			Message: "The model `" + model + "` does not exist or you do not have access to it.",
			Type:    "invalid_request_error", Code: ptr("model_not_found"),
		}
	case ClassTimeout:
		// OpenAI documents no 504 body; this is the generic server_error form.
		return openaiErrorObject{Message: "Request timed out.", Type: "server_error", Code: ptr("timeout")}
	}
	typ := "invalid_request_error"
	if status >= 500 {
		typ = "server_error"
	}
	return openaiErrorObject{Message: statusText(status), Type: typ}
}

// --- Anthropic ---

// anthropicErrorBody is Anthropic's error envelope (also the data of an
// `event: error`, without request_id).
type anthropicErrorBody struct {
	Type      string               `json:"type"`
	Error     anthropicErrorObject `json:"error"`
	RequestID string               `json:"request_id,omitempty"`
}

// anthropicErrorObject is the object inside Anthropic's error envelope.
type anthropicErrorObject struct {
	Type    string                 `json:"type"`
	Message string                 `json:"message"`
	Details *anthropicErrorDetails `json:"details,omitempty"`
}

// anthropicErrorDetails carries the error_code that tells a spend cap from
// a rate limit.
type anthropicErrorDetails struct {
	ErrorCode string `json:"error_code"`
}

// anthropicError is the Anthropic error for class (empty: generic for
// status).
func anthropicError(class string, status int, model string, now time.Time) anthropicErrorObject {
	switch class {
	case ClassRateLimit, ClassQuotaPerDay:
		return anthropicErrorObject{Type: "rate_limit_error", Message: "This request would exceed the rate limit for your organization (fakevendor) of 50 requests per minute. For details, refer to: https://docs.claude.com/en/api/rate-limits. You can see the response headers for current usage. Please reduce the prompt length or the maximum tokens requested, or try again later. You may also contact sales at https://www.anthropic.com/contact-sales to discuss your options for a rate limit increase."}
	case ClassSpendLimit:
		// docs/vendors.md#anthropic-errors (ant-docs /rate-limits) cuts the middle of
		// the message; it is filled in here. Access returns on the 1st of
		// next month, 00:00 UTC.
		y, m, _ := now.UTC().Date()
		reset := time.Date(y, m+1, 1, 0, 0, 0, 0, time.UTC).Format("2006-01-02")
		return anthropicErrorObject{
			Type:    "rate_limit_error",
			Message: "You have reached your API usage limits: your organization has crossed its monthly API usage threshold, so further requests are refused until the limit resets. You will regain access on " + reset + " at 00:00 UTC.",
			Details: &anthropicErrorDetails{ErrorCode: "enforced_spend_limit_reached"},
		}
	case ClassInsufficientQuota, ClassCreditBalance:
		return anthropicErrorObject{Type: "invalid_request_error", Message: "Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits."}
	case ClassOverloaded:
		return anthropicErrorObject{Type: "overloaded_error", Message: "Overloaded"}
	case ClassServerError:
		return anthropicErrorObject{Type: "api_error", Message: "Internal server error"}
	case ClassInvalidRequest:
		return anthropicErrorObject{Type: "invalid_request_error", Message: "messages: Field required"}
	case ClassAuth:
		return anthropicErrorObject{Type: "authentication_error", Message: "invalid x-api-key"}
	case ClassContextTooLong:
		return anthropicErrorObject{Type: "invalid_request_error", Message: "prompt is too long: 205351 tokens > 200000 maximum"}
	case ClassNotFound:
		return anthropicErrorObject{Type: "not_found_error", Message: "model: " + model}
	case ClassTimeout:
		return anthropicErrorObject{Type: "timeout_error", Message: "Request timed out"}
	}
	return anthropicErrorObject{Type: anthropicErrorType(status), Message: statusText(status)}
}

// anthropicErrorType is the error type Anthropic uses for status.
func anthropicErrorType(status int) string {
	switch status {
	case 401:
		return "authentication_error"
	case 402:
		return "billing_error"
	case 403:
		return "permission_error"
	case 404:
		return "not_found_error"
	case 409:
		return "conflict_error"
	case 413:
		return "request_too_large"
	case 429:
		return "rate_limit_error"
	case 504:
		return "timeout_error"
	case 529:
		return "overloaded_error"
	}
	if status >= 500 {
		return "api_error"
	}
	return "invalid_request_error"
}

// --- Gemini ---

// geminiErrorBody is Gemini's google.rpc.Status envelope.
type geminiErrorBody struct {
	Error geminiErrorObject `json:"error"`
}

// geminiErrorObject is google.rpc.Status; details are typed messages with
// their "@type" first.
type geminiErrorObject struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Status  string `json:"status"`
	Details []any  `json:"details,omitempty"`
}

// The google.rpc detail messages the fake sends.
type (
	geminiQuotaFailure struct {
		Type       string                 `json:"@type"`
		Violations []geminiQuotaViolation `json:"violations"`
	}
	geminiQuotaViolation struct {
		QuotaMetric     string            `json:"quotaMetric"`
		QuotaID         string            `json:"quotaId"`
		QuotaDimensions map[string]string `json:"quotaDimensions"`
		QuotaValue      string            `json:"quotaValue"`
	}
	geminiHelp struct {
		Type  string           `json:"@type"`
		Links []geminiHelpLink `json:"links"`
	}
	geminiHelpLink struct {
		Description string `json:"description"`
		URL         string `json:"url"`
	}
	geminiRetryInfo struct {
		Type       string `json:"@type"`
		RetryDelay string `json:"retryDelay"`
	}
	geminiErrorInfo struct {
		Type     string            `json:"@type"`
		Reason   string            `json:"reason"`
		Domain   string            `json:"domain"`
		Metadata map[string]string `json:"metadata"`
	}
	geminiLocalizedMessage struct {
		Type    string `json:"@type"`
		Locale  string `json:"locale"`
		Message string `json:"message"`
	}
	geminiBadRequest struct {
		Type            string                 `json:"@type"`
		FieldViolations []geminiFieldViolation `json:"fieldViolations"`
	}
	geminiFieldViolation struct {
		Description string `json:"description"`
	}
)

// geminiError is the Gemini error for class (empty: generic for status).
// retryAfter, when a whole number of seconds, sets RetryInfo.retryDelay.
func geminiError(class string, status int, model, retryAfter string) geminiErrorObject {
	switch class {
	case ClassRateLimit:
		return geminiQuotaError(model, retryAfter,
			"generativelanguage.googleapis.com/generate_content_free_tier_input_token_count",
			"GenerateContentInputTokensPerModelPerMinute-FreeTier", "250000")
	case ClassQuotaPerDay, ClassInsufficientQuota, ClassSpendLimit, ClassCreditBalance:
		// The Gemini API has no separate billing errors in the reference; a
		// daily quota is how "this key is spent" looks.
		return geminiQuotaError(model, retryAfter,
			"generativelanguage.googleapis.com/generate_content_free_tier_requests",
			"GenerateRequestsPerDayPerProjectPerModel-FreeTier", "250")
	case ClassOverloaded:
		// Verbatim from docs/vendors.md#gemini-errors (lobehub/lobehub#9728).
		return geminiErrorObject{Message: "The model is overloaded. Please try again later.", Status: "UNAVAILABLE"}
	case ClassServerError:
		return geminiErrorObject{Message: "An internal error has occurred. Please retry or report in https://developers.generativeai.google/guide/troubleshooting", Status: "INTERNAL"}
	case ClassInvalidRequest:
		return geminiErrorObject{Message: "Request contains an invalid argument.", Status: "INVALID_ARGUMENT"}
	case ClassAuth:
		const msg = "API key not valid. Please pass a valid API key."
		return geminiErrorObject{Message: msg, Status: "INVALID_ARGUMENT", Details: []any{
			geminiErrorInfo{
				Type: "type.googleapis.com/google.rpc.ErrorInfo", Reason: "API_KEY_INVALID", Domain: "googleapis.com",
				Metadata: map[string]string{"service": "generativelanguage.googleapis.com"},
			},
			geminiLocalizedMessage{Type: "type.googleapis.com/google.rpc.LocalizedMessage", Locale: "en-US", Message: msg},
		}}
	case ClassContextTooLong:
		return geminiErrorObject{Message: "The input token count (1300000) exceeds the maximum number of tokens allowed (1048575).", Status: "INVALID_ARGUMENT"}
	case ClassNotFound:
		return geminiErrorObject{Message: "models/" + model + " is not found for API version v1beta, or is not supported for generateContent. Call ListModels to see the list of available models and their supported methods.", Status: "NOT_FOUND"}
	case ClassTimeout:
		return geminiErrorObject{Message: "Deadline expired before operation could complete.", Status: "DEADLINE_EXCEEDED"}
	}
	return geminiErrorObject{Message: statusText(status), Status: geminiStatus(status)}
}

// geminiQuotaError is a 429 RESOURCE_EXHAUSTED with QuotaFailure, Help and
// RetryInfo details, shaped like the captured example in
// docs/vendors.md#gemini-errors (RooCodeInc/Roo-Code#3883).
func geminiQuotaError(model, retryAfter, metric, quotaID, limit string) geminiErrorObject {
	delay := defaultGeminiRetryDelay
	if n, err := strconv.Atoi(retryAfter); err == nil && n >= 0 {
		delay = n
	}
	return geminiErrorObject{
		Message: fmt.Sprintf("You exceeded your current quota, please check your plan and billing details. For more information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits. To monitor your current usage, head to: https://ai.dev/usage?tab=rate-limit. \n* Quota exceeded for metric: %s, limit: %s, model: %s\nPlease retry in %ds.", metric, limit, model, delay),
		Status:  "RESOURCE_EXHAUSTED",
		Details: []any{
			geminiQuotaFailure{Type: "type.googleapis.com/google.rpc.QuotaFailure", Violations: []geminiQuotaViolation{{
				QuotaMetric: metric, QuotaID: quotaID,
				QuotaDimensions: map[string]string{"location": "global", "model": model},
				QuotaValue:      limit,
			}}},
			geminiHelp{Type: "type.googleapis.com/google.rpc.Help", Links: []geminiHelpLink{{
				Description: "Learn more about Gemini API quotas", URL: "https://ai.google.dev/gemini-api/docs/rate-limits",
			}}},
			geminiRetryInfo{Type: "type.googleapis.com/google.rpc.RetryInfo", RetryDelay: fmt.Sprintf("%ds", delay)},
		},
	}
}

// geminiStatus is the google.rpc.Code name Gemini sends with status.
func geminiStatus(status int) string {
	switch status {
	case 400:
		return "INVALID_ARGUMENT"
	case 401:
		return "UNAUTHENTICATED"
	case 402, 429:
		return "RESOURCE_EXHAUSTED"
	case 403:
		return "PERMISSION_DENIED"
	case 404:
		return "NOT_FOUND"
	case 409:
		return "ABORTED"
	case 499:
		return "CANCELLED"
	case 501:
		return "UNIMPLEMENTED"
	case 503:
		return "UNAVAILABLE"
	case 504:
		return "DEADLINE_EXCEEDED"
	}
	if status >= 500 {
		return "INTERNAL"
	}
	return "FAILED_PRECONDITION"
}

// --- requests the fake cannot serve ---

// malformedBody is the vendor's answer to a request body that is not a JSON
// object.
func malformedBody(shape rewrite.Shape, requestID string) (int, []byte) {
	switch shape {
	case rewrite.Anthropic:
		return http.StatusBadRequest, marshal(anthropicErrorBody{Type: "error", Error: anthropicErrorObject{
			Type: "invalid_request_error", Message: "There was an issue with the format or content of your request.",
		}, RequestID: requestID})
	case rewrite.Gemini:
		const msg = "Invalid JSON payload received. Unexpected token."
		return http.StatusBadRequest, marshal(geminiErrorBody{Error: geminiErrorObject{
			Code: http.StatusBadRequest, Message: msg, Status: "INVALID_ARGUMENT",
			Details: []any{geminiBadRequest{Type: "type.googleapis.com/google.rpc.BadRequest", FieldViolations: []geminiFieldViolation{{Description: msg}}}},
		}})
	default:
		return http.StatusBadRequest, marshal(openaiErrorBody{Error: openaiErrorObject{
			Message: "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON. If you have trouble figuring out how to fix this, please contact us through our help center at help.openai.com.)",
			Type:    "invalid_request_error",
		}})
	}
}

// notFoundBody is the vendor's answer to a path (or method) it does not
// serve.
func notFoundBody(shape rewrite.Shape, method, path, requestID string) (int, []byte) {
	switch shape {
	case rewrite.Anthropic:
		return http.StatusNotFound, marshal(anthropicErrorBody{Type: "error", Error: anthropicErrorObject{
			Type: "not_found_error", Message: "Not Found",
		}, RequestID: requestID})
	case rewrite.Gemini:
		return http.StatusNotFound, marshal(geminiErrorBody{Error: geminiErrorObject{
			Code: http.StatusNotFound, Message: "Method not found.", Status: "NOT_FOUND",
		}})
	default:
		return http.StatusNotFound, marshal(openaiErrorBody{Error: openaiErrorObject{
			Message: "Invalid URL (" + method + " " + path + ")", Type: "invalid_request_error",
		}})
	}
}
