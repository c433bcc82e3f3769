package policy

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"reflect"
	"syscall"
	"testing"
	"time"

	"github.com/detour-proxy/detour/rewrite"
)

// classifyNow is the fixed clock of these tests: a summer morning in UTC,
// so that America/Los_Angeles is on daylight time (UTC−7).
var classifyNow = time.Date(2026, 8, 21, 10, 0, 0, 0, time.UTC)

// Bodies of the cases in docs/vendors.md, quoted exactly from its sources, "…"
// included. Where the reference elides part of a JSON structure ("[…]",
// "{…"), the elision is filled so that the body stays valid JSON, and the
// constant says so. Bodies marked "constructed" are not quoted anywhere: the
// reference documents only their type, code or message, and the rest is the
// vendor's envelope around it.
const (
	// OpenAI: docs/vendors.md#openai-errors.
	oaiTPM             = `{"error":{"message":"Rate limit reached for gpt-4o in organization org-… on tokens per min (TPM): Limit 30000, Used 14567, Requested 24754. Please try again in 18.642s. …","type":"tokens","param":null,"code":"rate_limit_exceeded"}}`
	oaiRequestTooLarge = `{"error":{"message":"Request too large for gpt-4o … Limit 30000, Requested 30601. The input or output tokens must be reduced…","type":"tokens","param":null,"code":"rate_limit_exceeded"}}`
	oaiQuota           = `{"error":{"message":"You exceeded your current quota, please check your plan and billing details. For more information on this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`
	// "older: null" code.
	oaiQuotaOld         = `{"error":{"message":"You exceeded your current quota, please check your plan and billing details. For more information on this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors.","type":"insufficient_quota","param":null,"code":null}}`
	oaiOrgSpend         = `{"error":{"message":"…","type":"invalid_request_error","param":null,"code":"organization_spend_limit_exceeded"}}` // constructed
	oaiProjectSpend     = `{"error":{"message":"…","type":"invalid_request_error","param":null,"code":"project_spend_limit_exceeded"}}`      // constructed
	oaiCreditBalance    = `{"error":{"message":"…","type":"insufficient_quota","param":null,"code":"credit_balance_exhausted"}}`             // constructed
	oaiOrgUsage         = `{"error":{"message":"…","type":"insufficient_quota","param":null,"code":"organization_usage_limit_exceeded"}}`    // constructed
	oaiSlowDown         = `{"error":{"message":"…","type":"server_error","param":null,"code":"slow_down"}}`                                  // constructed
	oaiServerOverloaded = `{"error":{"message":"…","type":"server_error","param":null,"code":"server_is_overloaded"}}`                       // constructed
	oaiEngineOverloaded = `{"error":{"message":"The engine is currently overloaded…","type":"server_error","param":null,"code":null}}`       // constructed around the old docs' message
	oaiServerError      = `{"error":{"message":"The server had an error while processing your request…","type":"server_error","param":null,"code":null}}`
	oaiContext          = `{"error":{"message":"This model's maximum context length is 4097 tokens. However, you requested 4120 tokens …","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`
	oaiModelNotFound    = `{"error":{"message":"The model ` + "`gpt-4o`" + ` does not exist or you do not have access to it.","type":"invalid_request_error","param":null,"code":"model_not_found"}}`
	oaiBadKey           = `{"error":{"message":"Incorrect API key provided: sk-…","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`
	oaiIPNotAuthorized  = `{"error":{"message":"IP not authorized","type":"invalid_request_error","param":null,"code":null}}`                           // constructed
	oaiRegion           = `{"error":{"message":"Country, region, or territory not supported","type":"invalid_request_error","param":null,"code":null}}` // constructed
	oaiPolicy           = `{"error":{"message":"…","type":"invalid_request_error","param":null,"code":"content_policy_violation"}}`                     // constructed
	oaiInvalidPrompt    = `{"error":{"message":"…violating our usage policy","type":"invalid_request_error","param":null,"code":"invalid_prompt"}}`

	// Azure OpenAI: docs/vendors.md#azure-openai-errors.
	azureDaily = `{"error":{"code":"429","message":"Requests to the ChatCompletions_Create Operation under Azure OpenAI API version 2024-08-01-preview have exceeded token rate limit of your current OpenAI S0 pricing tier. Please retry after 86400 seconds. …"}}`
	// constructed: the same body with a per-minute wait.
	azureMinute = `{"error":{"code":"429","message":"Requests to the ChatCompletions_Create Operation under Azure OpenAI API version 2024-08-01-preview have exceeded token rate limit of your current OpenAI S0 pricing tier. Please retry after 6 seconds. …"}}`
	// The filter body with the "{…" inside content_filter_result filled.
	azureFilter = `{"error":{"message":"The response was filtered due to the prompt triggering Azure OpenAI's content management policy. …","type":null,"param":"prompt","code":"content_filter","status":400,"innererror":{"code":"ResponsibleAIPolicyViolation","content_filter_result":{"sexual":{"filtered":true,"severity":"high"}}}}}`
	// The filter body exactly as the reference prints it: not valid JSON.
	azureFilterVerbatim = `{"error":{"message":"The response was filtered due to the prompt triggering Azure OpenAI's content management policy. …","type":null,"param":"prompt","code":"content_filter","status":400,"innererror":{"code":"ResponsibleAIPolicyViolation","content_filter_result":{…"sexual":{"filtered":true,"severity":"high"}…}}}}`
	azureFilteredOutput = `{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":null},"finish_reason":"content_filter"}]}` // constructed
	// constructed: API Management's own envelope.
	apimQuota = `{ "statusCode": 403, "message": "Out of token quota. Quota will be replenished in 23:59:12." }`

	// Anthropic: docs/vendors.md#anthropic-errors.
	antCredit           = `{"type":"error","error":{"type":"invalid_request_error","message":"Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits."}}`
	antUsageLimits      = `{"type":"error","error":{"type":"invalid_request_error","message":"You have reached your specified API usage limits…"}}`
	antPromptTooLong    = `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 205351 tokens > 200000 maximum"}}`
	antAuth             = `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}` // constructed
	antBilling          = `{"type":"error","error":{"type":"billing_error","message":"…"}}`                        // constructed
	antPermission       = `{"type":"error","error":{"type":"permission_error","message":"…"}}`                     // constructed
	antNotFound         = `{"type":"error","error":{"type":"not_found_error","message":"model: claude-3-5-sonnet-20241022 "}}`
	antConflict         = `{"type":"error","error":{"type":"conflict_error","message":"…"}}`                        // constructed
	antTooLarge         = `{"type":"error","error":{"type":"request_too_large","message":"…"}}`                     // constructed
	antRateLimit        = `{"type":"error","error":{"type":"rate_limit_error","message":"…"},"request_id":"req_…"}` // constructed
	antSpend            = `{"type":"error","error":{"type":"rate_limit_error","message":"You have reached your API usage limits: your organization has crossed its monthly API usage threshold, … You will regain access on 2026-09-01 at 00:00 UTC.","details":{"error_code":"enforced_spend_limit_reached"}},"request_id":"req_018EeWyXxfu5pfWkrYcMdjWG"}`
	antSpendNoDate      = `{"type":"error","error":{"type":"rate_limit_error","message":"…","details":{"error_code":"enforced_spend_limit_reached"}}}` // constructed
	antAPIError         = `{"type":"error","error":{"type":"api_error","message":"…"}}`                                                                // constructed
	antTimeout          = `{"type":"error","error":{"type":"timeout_error","message":"…"}}`                                                            // constructed
	antOverloaded       = `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`
	antStreamOverloaded = `{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}`
	antRefusal          = `{"id":"msg_01","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5","stop_reason":"refusal","stop_sequence":null,"usage":{"input_tokens":9,"output_tokens":0}}` // constructed

	// Gemini and Vertex: docs/vendors.md#gemini-errors, docs/vendors.md#vertex-ai-errors.
	gemBadKey        = `{"error":{"code":400,"message":"API key not valid. Please pass a valid API key.","status":"INVALID_ARGUMENT","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"API_KEY_INVALID","domain":"googleapis.com","metadata":{"service":"generativelanguage.googleapis.com"}}]}}` // message quoted, ErrorInfo in Google's form
	gemTooManyTokens = `{"error":{"code":400,"message":"The input token count (1300000) exceeds the maximum number of tokens allowed (1048575).","status":"INVALID_ARGUMENT"}}`
	gemPrecondition  = `{"error":{"code":400,"message":"User location is not supported for the API use.","status":"FAILED_PRECONDITION"}}` // constructed
	gemInvalid       = `{"error":{"code":400,"message":"…","status":"INVALID_ARGUMENT"}}`                                                  // constructed
	gemPrepaid       = `{"error":{"code":402,"message":"…","status":"RESOURCE_EXHAUSTED"}}`                                                // constructed
	gemPermission    = `{"error":{"code":403,"message":"…","status":"PERMISSION_DENIED"}}`                                                 // constructed
	gemNotFound      = `{"error":{"code":404,"message":"…","status":"NOT_FOUND"}}`                                                         // constructed
	gemCancelled     = `{"error":{"code":499,"message":"…","status":"CANCELLED"}}`                                                         // constructed
	// The Help links ("[…]") filled.
	gemPerMinute = `{"error":{"code":429,"message":"You exceeded your current quota, please check your plan and billing details. …","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaMetric":"generativelanguage.googleapis.com/generate_content_free_tier_input_token_count","quotaId":"GenerateContentInputTokensPerModelPerMinute-FreeTier","quotaDimensions":{"location":"global","model":"gemini-2.5-flash"},"quotaValue":"250000"}]},{"@type":"type.googleapis.com/google.rpc.Help","links":[{"description":"Learn more about Gemini API quotas","url":"https://ai.google.dev/gemini-api/docs/rate-limits"}]},{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"26s"}]}}`
	// The same with the per-day quota ID the reference lists.
	gemPerDay = `{"error":{"code":429,"message":"You exceeded your current quota, please check your plan and billing details. …","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaMetric":"generativelanguage.googleapis.com/generate_content_free_tier_requests","quotaId":"GenerateRequestsPerDayPerProjectPerModel-FreeTier","quotaDimensions":{"location":"global","model":"gemini-2.5-flash"},"quotaValue":"250"}]},{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"26s"}]}}`
	// continuedev/continue#10062's "limit: 0, model: …", with its quota ID
	// (per-minute) as Google sends it.
	gemZeroLimit       = `{"error":{"code":429,"message":"You exceeded your current quota, please check your plan and billing details. * Quota exceeded for metric: generativelanguage.googleapis.com/generate_content_free_tier_requests, limit: 0, model: gemini-2.5-pro","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaId":"GenerateRequestsPerMinutePerProjectPerModel-FreeTier"}]}]}}`
	gemInternal        = `{"error":{"code":500,"message":"An internal error has occurred. Please retry or report in https://developers.generativeai.google/guide/troubleshooting","status":"INTERNAL"}}` // constructed
	gemInternalContext = `{"error":{"code":500,"message":"…input context is too long…","status":"INTERNAL"}}`                                                                                            // constructed
	gemOverloaded      = `{"error":{"code":503,"message":"The model is overloaded. Please try again later.","status":"UNAVAILABLE"}}`
	gemDeadline        = `{"error":{"code":504,"message":"…","status":"DEADLINE_EXCEEDED"}}` // constructed
	vertexSharedComma  = `{"error":{"code":429,"message":"Resource exhausted, please try again later.","status":"RESOURCE_EXHAUSTED"}}`
	vertexShared       = `{"error":{"code":429,"message":"Resource exhausted. Please try again later. Please refer to …/error-code-429 for more details.","status":"RESOURCE_EXHAUSTED"}}`
	vertexProvisioned  = `{"error":{"code":429,"message":"Too many requests. Exceeded the Provisioned Throughput.","status":"RESOURCE_EXHAUSTED"}}`
	gemBlocked         = `{"promptFeedback":{"blockReason":"SAFETY"},"usageMetadata":{"promptTokenCount":9,"totalTokenCount":9},"modelVersion":"gemini-2.5-flash"}` // constructed

	// OpenRouter (messages constructed; envelope and codes from or-docs): docs/vendors.md#openai-compatible-servers.
	orCredits    = `{"error":{"code":402,"message":"…","metadata":{}}}`
	orModeration = `{"error":{"code":403,"message":"Your chosen model requires moderation and your input was flagged for \"harassment\"","metadata":{"reasons":["harassment"],"flagged_input":"…","provider_name":"openai","model_slug":"openai/gpt-4o"}}}`
	orTimeout    = `{"error":{"code":408,"message":"…","metadata":{}}}`
	orRateLimit  = `{"error":{"code":429,"message":"…","metadata":{}}}`
	orDown       = `{"error":{"code":502,"message":"…","metadata":{"provider_name":"openai","raw":"…"}}}`
	orNoProvider = `{"error":{"code":503,"message":"…","metadata":{}}}`
	orMidStream  = `{"id":"cmpl-abc123","object":"chat.completion.chunk","provider":"openai","error":{"code":"server_error","message":"Provider disconnected unexpectedly"},"choices":[{"index":0,"delta":{"content":""},"finish_reason":"error"}]}`

	// Local servers: docs/vendors.md#openai-compatible-servers.
	vllmContext    = `{"error":{"message":"This model's maximum context length is 32768 tokens. However, your request has 40000 input tokens. …","type":"BadRequestError","param":null,"code":400}}`
	vllmFlat       = `{"object":"error","message":"The model ` + "`llama-3`" + ` does not exist.","type":"NotFoundError","param":null,"code":404}` // constructed
	ollamaInvalid  = `{"error":{"message":"…","type":"invalid_request_error","param":null,"code":null}}`                                           // constructed
	ollamaNotFound = `{"error":{"message":"model \"qwen2.5:7b-instruct\" not found, try pulling it first","type":"not_found_error","param":null,"code":null}}`
	ollamaAPIError = `{"error":{"message":"…","type":"api_error","param":null,"code":null}}` // constructed
	ollamaNative   = `{"error":"model \"llama3\" not found, try pulling it first"}`
	llamaContext   = `{"error":{"code":400,"message":"request (13392 tokens) exceeds the available context size (8192 tokens), try increasing it","type":"exceed_context_size_error","n_prompt_tokens":13392,"n_ctx":8192}}`
	llamaLoading   = `{"error":{"code":503,"message":"Loading model","type":"unavailable_error"}}` // constructed

	// Responses API in-stream (constructed from the documented fields): docs/vendors.md#openai-errors.
	respError  = `{"type":"error","code":"rate_limit_exceeded","message":"…","param":null,"sequence_number":2}`
	respFailed = `{"type":"response.failed","sequence_number":5,"response":{"id":"resp_1","object":"response","status":"failed","error":{"code":"server_error","message":"…"}}}`

	oaiChatCompletion = `{"id":"chatcmpl-1","object":"chat.completion","created":1735689600,"model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"Hi!"},"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":2,"total_tokens":11}}`
)

// classifyHeader builds a header from name/value pairs.
func classifyHeader(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

type classifyCase struct {
	name   string
	o      Outcome
	class  Class
	retry  time.Duration
	reset  time.Time
	reason string
	typ    string // Info.Type, checked when set
	code   string // Info.Code, checked when set
}

// classifyHTTP is an error answered with an HTTP status and body.
func classifyHTTP(name string, shape rewrite.Shape, status int, body string, class Class, reason string) classifyCase {
	return classifyCase{name: name, o: Outcome{Shape: shape, Status: status, Body: []byte(body)}, class: class, reason: reason}
}

// classifyEvent is an error event inside a 200 stream.
func classifyEvent(name string, shape rewrite.Shape, data string, class Class, reason string) classifyCase {
	return classifyCase{name: name, o: Outcome{Shape: shape, Status: 200, Body: []byte(data), InStream: true}, class: class, reason: reason}
}

func (c classifyCase) with(f func(*classifyCase)) classifyCase { f(&c); return c }

func TestClassify(t *testing.T) {
	const (
		oai = rewrite.OpenAI
		ant = rewrite.Anthropic
		gem = rewrite.Gemini
	)
	dnsErr := &url.Error{Op: "Post", URL: "https://api.example", Err: &net.OpError{Op: "dial", Net: "tcp",
		Err: &net.DNSError{Err: "no such host", Name: "api.example", IsNotFound: true}}}
	refused := &url.Error{Op: "Post", URL: "https://api.example", Err: &net.OpError{Op: "dial", Net: "tcp",
		Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}}
	reset := &url.Error{Op: "Post", URL: "https://api.example", Err: &net.OpError{Op: "read", Net: "tcp",
		Err: os.NewSyscallError("read", syscall.ECONNRESET)}}
	netTimeout := &url.Error{Op: "Post", URL: "https://api.example", Err: &net.OpError{Op: "read", Net: "tcp",
		Err: os.ErrDeadlineExceeded}}
	tlsErr := &url.Error{Op: "Post", URL: "https://api.example", Err: &tls.CertificateVerificationError{
		Err: x509.UnknownAuthorityError{}}}

	tests := []classifyCase{
		// OpenAI (docs/vendors.md#openai-errors).
		classifyHTTP("openai 429 TPM", oai, 429, oaiTPM, ClassRateLimited, "429 rate_limit_exceeded").
			with(func(c *classifyCase) {
				c.retry = 18642 * time.Millisecond
				c.typ = "tokens"
				c.code = "rate_limit_exceeded"
			}),
		classifyHTTP("openai 429 TPM, retry-after-ms wins", oai, 429, oaiTPM, ClassRateLimited, "429 rate_limit_exceeded").
			with(func(c *classifyCase) {
				c.o.Header = classifyHeader("retry-after-ms", "1500", "retry-after", "2")
				c.retry = 1500 * time.Millisecond
			}),
		classifyHTTP("openai 429 request too large", oai, 429, oaiRequestTooLarge, ClassContextTooLong, "429 request too large"),
		classifyHTTP("openai 429 insufficient_quota", oai, 429, oaiQuota, ClassQuotaExhausted, "429 insufficient_quota").
			with(func(c *classifyCase) { c.typ = "insufficient_quota"; c.code = "insufficient_quota" }),
		classifyHTTP("openai 429 insufficient_quota, old null code", oai, 429, oaiQuotaOld, ClassQuotaExhausted, "429 insufficient_quota"),
		classifyHTTP("openai 429 org spend limit", oai, 429, oaiOrgSpend, ClassQuotaExhausted, "429 organization_spend_limit_exceeded"),
		classifyHTTP("openai 429 project spend limit", oai, 429, oaiProjectSpend, ClassQuotaExhausted, "429 project_spend_limit_exceeded"),
		classifyHTTP("openai 429 credit_balance_exhausted", oai, 429, oaiCreditBalance, ClassQuotaExhausted, "429 credit_balance_exhausted"),
		classifyHTTP("openai 429 organization_usage_limit_exceeded", oai, 429, oaiOrgUsage, ClassQuotaExhausted, "429 organization_usage_limit_exceeded"),
		classifyHTTP("openai 429 slow_down", oai, 429, oaiSlowDown, ClassOverloaded, "429 slow_down"),
		classifyHTTP("openai 503 server_is_overloaded", oai, 503, oaiServerOverloaded, ClassOverloaded, "503 server_is_overloaded"),
		classifyHTTP("openai old 429 engine overloaded", oai, 429, oaiEngineOverloaded, ClassOverloaded, "429 overloaded"),
		classifyHTTP("openai 500", oai, 500, oaiServerError, ClassServerError, "500 server_error"),
		classifyHTTP("openai 502 html", oai, 502, `<html><head><title>502 Bad Gateway</title></head><body>cloudflare</body></html>`, ClassServerError, "502"),
		classifyHTTP("openai 400 context_length_exceeded", oai, 400, oaiContext, ClassContextTooLong, "400 context_length_exceeded"),
		classifyHTTP("openai 404 model_not_found", oai, 404, oaiModelNotFound, ClassInvalidRequest, "404 model_not_found"),
		classifyHTTP("openai 401 invalid_api_key", oai, 401, oaiBadKey, ClassAuth, "401 invalid_api_key"),
		classifyHTTP("openai 401 IP not authorized", oai, 401, oaiIPNotAuthorized, ClassAuth, "401 invalid_request_error"),
		classifyHTTP("openai 403 region", oai, 403, oaiRegion, ClassAuth, "403 invalid_request_error"),
		classifyHTTP("openai 400 content_policy_violation", oai, 400, oaiPolicy, ClassContentFilter, "400 content_policy_violation"),
		classifyHTTP("openai 400 invalid_prompt", oai, 400, oaiInvalidPrompt, ClassContentFilter, "400 invalid_prompt"),
		classifyHTTP("openai 408 no body", oai, 408, ``, ClassTimeout, "408"),
		classifyHTTP("openai 409", oai, 409, ``, ClassInvalidRequest, "409"),
		classifyHTTP("openai 413", oai, 413, ``, ClassInvalidRequest, "413"),
		classifyHTTP("openai 422", oai, 422, `{"detail":"unprocessable"}`, ClassInvalidRequest, "422"),

		// Azure OpenAI (docs/vendors.md#azure-openai-errors).
		classifyHTTP("azure 429 retry after 86400 seconds", oai, 429, azureDaily, ClassQuotaExhausted, "429 long retry hint").
			with(func(c *classifyCase) {
				c.retry = 86400 * time.Second
				c.reset = classifyNow.Add(24 * time.Hour)
				c.code = "429"
			}),
		classifyHTTP("azure 429 retry after 86400 seconds, header too", oai, 429, azureDaily, ClassQuotaExhausted, "429 long retry hint").
			with(func(c *classifyCase) {
				c.o.Header = classifyHeader("Retry-After", "86400")
				c.retry = 86400 * time.Second
				c.reset = classifyNow.Add(24 * time.Hour)
			}),
		classifyHTTP("azure 429 per-minute", oai, 429, azureMinute, ClassRateLimited, "429").
			with(func(c *classifyCase) {
				c.o.Header = classifyHeader("retry-after-ms", "6000")
				c.retry = 6 * time.Second
			}),
		classifyHTTP("azure 429 retry-after-ms -1 ignored", oai, 429, azureMinute, ClassRateLimited, "429").
			with(func(c *classifyCase) { c.o.Header = classifyHeader("retry-after-ms", "-1"); c.retry = 6 * time.Second }),
		classifyHTTP("azure 400 content_filter", oai, 400, azureFilter, ClassContentFilter, "400 content_filter").
			with(func(c *classifyCase) { c.code = "content_filter" }),
		classifyHTTP("azure 400 content filter, body as printed (not JSON)", oai, 400, azureFilterVerbatim, ClassContentFilter, "400 content policy"),
		classifyHTTP("azure 200 finish_reason content_filter goes to the app", oai, 200, azureFilteredOutput, ClassNone, "200"),
		classifyHTTP("azure APIM 403 quota", oai, 403, apimQuota, ClassQuotaExhausted, "403 quota").
			with(func(c *classifyCase) {
				c.retry = 23*time.Hour + 59*time.Minute + 12*time.Second
				c.reset = classifyNow.Add(c.retry)
			}),
		classifyHTTP("google 403 quota project is auth", gem, 403,
			`{"error":{"code":403,"message":"Your application is authenticating by using local Application Default Credentials. The generativelanguage.googleapis.com API requires a quota project, which is not set by default.","status":"PERMISSION_DENIED"}}`,
			ClassAuth, "403 PERMISSION_DENIED"),
		classifyHTTP("azure APIM 403 without quota is auth", oai, 403, `{ "statusCode": 403, "message": "Forbidden" }`, ClassAuth, "403"),

		// Anthropic (docs/vendors.md#anthropic-errors).
		classifyHTTP("anthropic 400 credit balance too low", ant, 400, antCredit, ClassQuotaExhausted, "400 credit balance too low"),
		classifyHTTP("anthropic 400 usage limits", ant, 400, antUsageLimits, ClassQuotaExhausted, "400 usage limits reached"),
		classifyHTTP("anthropic 400 prompt is too long", ant, 400, antPromptTooLong, ClassContextTooLong, "400 context too long"),
		classifyHTTP("anthropic 401", ant, 401, antAuth, ClassAuth, "401 authentication_error"),
		classifyHTTP("anthropic 402 billing_error", ant, 402, antBilling, ClassQuotaExhausted, "402 billing_error"),
		classifyHTTP("anthropic 403 permission_error", ant, 403, antPermission, ClassAuth, "403 permission_error"),
		classifyHTTP("anthropic 404 not_found_error", ant, 404, antNotFound, ClassInvalidRequest, "404 not_found_error"),
		classifyHTTP("anthropic 409 conflict_error", ant, 409, antConflict, ClassInvalidRequest, "409 conflict_error"),
		classifyHTTP("anthropic 413 request_too_large", ant, 413, antTooLarge, ClassInvalidRequest, "413 request_too_large"),
		classifyHTTP("anthropic 413 from cloudflare", ant, 413, `<html><head><title>413 Request Entity Too Large</title></head></html>`, ClassInvalidRequest, "413"),
		classifyHTTP("anthropic 429 rate_limit_error with retry-after", ant, 429, antRateLimit, ClassRateLimited, "429 rate_limit_error").
			with(func(c *classifyCase) { c.o.Header = classifyHeader("retry-after", "30"); c.retry = 30 * time.Second }),
		classifyHTTP("anthropic 429 enforced_spend_limit_reached", ant, 429, antSpend, ClassQuotaExhausted, "429 enforced_spend_limit_reached").
			with(func(c *classifyCase) {
				c.reset = time.Date(2026, 9, 1, 0, 0, 0, 0, time.UTC)
				c.typ = "rate_limit_error"
				c.code = "enforced_spend_limit_reached"
			}),
		classifyHTTP("anthropic 429 enforced_spend_limit_reached without a date", ant, 429, antSpendNoDate, ClassQuotaExhausted, "429 enforced_spend_limit_reached").
			with(func(c *classifyCase) { c.reset = time.Date(2026, 9, 1, 0, 0, 0, 0, time.UTC) }),
		classifyHTTP("anthropic 500 api_error", ant, 500, antAPIError, ClassServerError, "500 api_error"),
		classifyHTTP("anthropic 504 timeout_error", ant, 504, antTimeout, ClassTimeout, "504 timeout_error"),
		classifyHTTP("anthropic 529 overloaded_error", ant, 529, antOverloaded, ClassOverloaded, "529 overloaded_error").
			with(func(c *classifyCase) { c.typ = "overloaded_error" }),
		classifyEvent("anthropic in-stream overloaded_error", ant, antStreamOverloaded, ClassOverloaded, "in-stream overloaded_error"),
		classifyEvent("anthropic in-stream api_error", ant, antAPIError, ClassServerError, "in-stream api_error"),
		classifyHTTP("anthropic 200 refusal goes to the app", ant, 200, antRefusal, ClassNone, "200"),

		// Gemini and Vertex (docs/vendors.md#gemini-errors, docs/vendors.md#vertex-ai-errors).
		classifyHTTP("gemini 400 API_KEY_INVALID", gem, 400, gemBadKey, ClassAuth, "400 API_KEY_INVALID").
			with(func(c *classifyCase) { c.typ = "INVALID_ARGUMENT"; c.code = "API_KEY_INVALID" }),
		classifyHTTP("gemini 400 API_KEY_INVALID wrapped in an array", gem, 400, "["+gemBadKey+"]", ClassAuth, "400 API_KEY_INVALID"),
		classifyHTTP("gemini 400 input token count", gem, 400, gemTooManyTokens, ClassContextTooLong, "400 context too long"),
		classifyHTTP("gemini 400 FAILED_PRECONDITION", gem, 400, gemPrecondition, ClassQuotaExhausted, "400 FAILED_PRECONDITION"),
		classifyHTTP("gemini 400 INVALID_ARGUMENT", gem, 400, gemInvalid, ClassInvalidRequest, "400 INVALID_ARGUMENT"),
		classifyHTTP("gemini 402 prepaid credits", gem, 402, gemPrepaid, ClassQuotaExhausted, "402 RESOURCE_EXHAUSTED"),
		classifyHTTP("gemini 403 PERMISSION_DENIED", gem, 403, gemPermission, ClassAuth, "403 PERMISSION_DENIED"),
		classifyHTTP("gemini 404 NOT_FOUND", gem, 404, gemNotFound, ClassInvalidRequest, "404 NOT_FOUND"),
		classifyHTTP("gemini 499 CANCELLED", gem, 499, gemCancelled, ClassInvalidRequest, "499 CANCELLED"),
		classifyHTTP("gemini 429 per-minute", gem, 429, gemPerMinute, ClassRateLimited, "429 per-minute quota").
			with(func(c *classifyCase) { c.retry = 26 * time.Second; c.typ = "RESOURCE_EXHAUSTED" }),
		classifyHTTP("gemini 429 per-day", gem, 429, gemPerDay, ClassQuotaExhausted, "429 per-day quota").
			with(func(c *classifyCase) {
				c.retry = 26 * time.Second
				c.reset = time.Date(2026, 8, 22, 7, 0, 0, 0, time.UTC) // midnight PDT
			}),
		classifyHTTP("gemini 429 limit: 0", gem, 429, gemZeroLimit, ClassQuotaExhausted, "429 zero quota"),
		classifyHTTP("gemini 500 INTERNAL", gem, 500, gemInternal, ClassServerError, "500 INTERNAL"),
		classifyHTTP("gemini 500 input context too long", gem, 500, gemInternalContext, ClassContextTooLong, "500 context too long"),
		classifyHTTP("gemini 503 UNAVAILABLE", gem, 503, gemOverloaded, ClassOverloaded, "503 UNAVAILABLE"),
		classifyHTTP("gemini 504 DEADLINE_EXCEEDED", gem, 504, gemDeadline, ClassTimeout, "504 DEADLINE_EXCEEDED"),
		classifyEvent("gemini in-stream UNAVAILABLE", gem, gemOverloaded, ClassOverloaded, "in-stream UNAVAILABLE"),
		classifyHTTP("vertex 429 shared capacity", gem, 429, vertexShared, ClassOverloaded, "429 shared capacity"),
		classifyHTTP("vertex 429 shared capacity, the documented spelling", gem, 429, vertexSharedComma, ClassOverloaded, "429 shared capacity"),
		classifyHTTP("vertex 429 provisioned throughput", gem, 429, vertexProvisioned, ClassRateLimited, "429 RESOURCE_EXHAUSTED"),
		classifyHTTP("gemini 200 blockReason goes to the app", gem, 200, gemBlocked, ClassNone, "200"),

		// OpenRouter (docs/vendors.md#openai-compatible-servers).
		classifyHTTP("openrouter 402", oai, 402, orCredits, ClassQuotaExhausted, "402"),
		classifyHTTP("openrouter 403 moderation", oai, 403, orModeration, ClassContentFilter, "403 moderation"),
		classifyHTTP("openrouter 408", oai, 408, orTimeout, ClassTimeout, "408"),
		classifyHTTP("openrouter 429 with Retry-After", oai, 429, orRateLimit, ClassRateLimited, "429").
			with(func(c *classifyCase) { c.o.Header = classifyHeader("Retry-After", "5"); c.retry = 5 * time.Second }),
		classifyHTTP("openrouter 502 model down", oai, 502, orDown, ClassServerError, "502"),
		classifyHTTP("openrouter 503 no provider", oai, 503, orNoProvider, ClassOverloaded, "503"),
		classifyHTTP("openrouter 200 with the error in the body", oai, 200, orDown, ClassServerError, "200 in-body"),
		classifyHTTP("openrouter 200 with a 429 in the body", oai, 200, orRateLimit, ClassRateLimited, "200 in-body"),
		classifyEvent("openrouter mid-stream error", oai, orMidStream, ClassServerError, "in-stream server_error"),

		// Local servers (docs/vendors.md#openai-compatible-servers).
		classifyHTTP("vllm 400 context", oai, 400, vllmContext, ClassContextTooLong, "400 context too long").
			with(func(c *classifyCase) { c.code = "400"; c.typ = "BadRequestError" }),
		classifyHTTP("vllm old flat 404", oai, 404, vllmFlat, ClassInvalidRequest, "404 NotFoundError"),
		classifyHTTP("vllm 503 queue full", oai, 503, ``, ClassOverloaded, "503"),
		classifyHTTP("ollama 400", oai, 400, ollamaInvalid, ClassInvalidRequest, "400 invalid_request_error"),
		classifyHTTP("ollama 404", oai, 404, ollamaNotFound, ClassInvalidRequest, "404 not_found_error"),
		classifyHTTP("ollama 500", oai, 500, ollamaAPIError, ClassServerError, "500 api_error"),
		classifyHTTP("ollama native 404", oai, 404, ollamaNative, ClassInvalidRequest, "404"),
		classifyHTTP("ollama native 500", oai, 500, `{"error":"llama runner process has terminated"}`, ClassServerError, "500"),
		classifyHTTP("llama.cpp exceed_context_size_error", oai, 400, llamaContext, ClassContextTooLong, "400 exceed_context_size_error"),
		classifyHTTP("llama.cpp unavailable_error", oai, 503, llamaLoading, ClassOverloaded, "503 unavailable_error"),

		// OpenAI Responses API in-stream (docs/vendors.md#openai-errors).
		classifyEvent("responses error event", oai, respError, ClassRateLimited, "in-stream rate_limit_exceeded"),
		classifyEvent("responses response.failed", oai, respFailed, ClassServerError, "in-stream server_error"),
		// The same bodies from an openai-responses upstream, whose HTTP
		// errors are OpenAI's envelope (docs/vendors.md#openai-responses).
		classifyHTTP("openai-responses 429 TPM", rewrite.OpenAIResponses, 429, oaiTPM, ClassRateLimited, "429 rate_limit_exceeded").
			with(func(c *classifyCase) {
				c.retry = 18642 * time.Millisecond
				c.typ = "tokens"
				c.code = "rate_limit_exceeded"
			}),
		classifyHTTP("openai-responses 400 context", rewrite.OpenAIResponses, 400, oaiContext, ClassContextTooLong, "400 context_length_exceeded"),
		classifyHTTP("openai-responses 503 overloaded", rewrite.OpenAIResponses, 503, oaiServerOverloaded, ClassOverloaded, "503 server_is_overloaded"),
		classifyEvent("openai-responses error event", rewrite.OpenAIResponses, respError, ClassRateLimited, "in-stream rate_limit_exceeded"),
		classifyEvent("openai-responses response.failed", rewrite.OpenAIResponses, respFailed, ClassServerError, "in-stream server_error"),
		classifyEvent("openai chat in-stream server_error", oai,
			`{"error": {"message": "The server had an error while processing your request. Sorry about that!", "type": "server_error"}}`,
			ClassServerError, "in-stream server_error"),
		classifyEvent("in-stream garbage", ant, `{"type":"error","error":`, ClassBadResponse, "in-stream not json"),
		classifyEvent("in-stream error nobody knows", oai, `{"error":{"message":"boom","type":"weird"}}`, ClassServerError, "in-stream weird"),

		// Transport and timers.
		{name: "no response, no error", o: Outcome{}, class: ClassUnreachable, reason: "unreachable no response"},
		{name: "dns", o: Outcome{Err: dnsErr}, class: ClassUnreachable, reason: "unreachable dns"},
		{name: "refused", o: Outcome{Err: refused}, class: ClassUnreachable, reason: "unreachable refused"},
		{name: "reset", o: Outcome{Err: reset}, class: ClassUnreachable, reason: "unreachable reset"},
		{name: "tls", o: Outcome{Err: tlsErr}, class: ClassUnreachable, reason: "unreachable tls"},
		{name: "eof", o: Outcome{Err: fmt.Errorf("read: %w", io.ErrUnexpectedEOF)}, class: ClassUnreachable, reason: "unreachable eof"},
		{name: "other transport error", o: Outcome{Err: fmt.Errorf("proxyconnect tcp: boom")}, class: ClassUnreachable, reason: "unreachable"},
		{name: "context deadline", o: Outcome{Err: fmt.Errorf("attempt: %w", context.DeadlineExceeded)}, class: ClassTimeout, reason: "timeout transport"},
		{name: "net timeout", o: Outcome{Err: netTimeout}, class: ClassTimeout, reason: "timeout transport"},
		{name: "connect timer", o: Outcome{Err: netTimeout, Timeout: "connect"}, class: ClassTimeout, reason: "timeout connect"},
		{name: "first byte timer", o: Outcome{Timeout: "first_byte"}, class: ClassTimeout, reason: "timeout first_byte"},
		{name: "idle timer wins over a 200", o: Outcome{Status: 200, Body: []byte(`{"id":`), Timeout: "idle"}, class: ClassTimeout, reason: "timeout idle"},
		{name: "body read timed out", o: Outcome{Status: 200, Body: []byte(`{"id":`), Err: netTimeout}, class: ClassTimeout, reason: "timeout 200 body"},

		// 2xx non-stream bodies.
		classifyHTTP("200 chat completion", oai, 200, oaiChatCompletion, ClassNone, "200"),
		classifyHTTP("200 with error null", oai, 200, `{"id":"resp_1","object":"response","status":"completed","error":null}`, ClassNone, "200"),
		classifyHTTP("200 html", oai, 200, "<!DOCTYPE html><html><body>Sign in to continue</body></html>", ClassBadResponse, "200 not json"),
		classifyHTTP("200 empty", oai, 200, "  \n", ClassBadResponse, "200 empty body"),
		classifyHTTP("200 truncated", oai, 200, oaiChatCompletion[:60], ClassBadResponse, "200 not json"),
		classifyHTTP("200 json array", gem, 200, `[{"candidates":[]}]`, ClassBadResponse, "200 not json"),

		// Statuses no table names.
		classifyHTTP("unknown 5xx", oai, 520, `error code: 520`, ClassServerError, "520"),
		classifyHTTP("unknown 4xx", oai, 418, ``, ClassInvalidRequest, "418"),
		classifyHTTP("3xx", oai, 302, ``, ClassBadResponse, "302"),
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := Classify(tt.o, classifyNow)
			if v.Class != tt.class {
				t.Errorf("Class = %q; want %q (reason %q, info %+v)", v.Class, tt.class, v.Reason, v.Info)
			}
			if v.Reason != tt.reason {
				t.Errorf("Reason = %q; want %q", v.Reason, tt.reason)
			}
			if v.RetryAfter != tt.retry {
				t.Errorf("RetryAfter = %v; want %v", v.RetryAfter, tt.retry)
			}
			if !v.ResetAt.Equal(tt.reset) {
				t.Errorf("ResetAt = %v; want %v", v.ResetAt, tt.reset)
			}
			if tt.typ != "" && v.Info.Type != tt.typ {
				t.Errorf("Info.Type = %q; want %q", v.Info.Type, tt.typ)
			}
			if tt.code != "" && v.Info.Code != tt.code {
				t.Errorf("Info.Code = %q; want %q", v.Info.Code, tt.code)
			}
		})
	}
}

// TestClassifyGeminiPerDayResetWinter protects the reset time against the
// daylight-saving switch: in January, midnight Pacific is 08:00 UTC.
func TestClassifyGeminiPerDayResetWinter(t *testing.T) {
	winter := time.Date(2026, 1, 15, 10, 0, 0, 0, time.UTC) // 02:00 PST
	v := Classify(Outcome{Shape: rewrite.Gemini, Status: 429, Body: []byte(gemPerDay)}, winter)
	if want := time.Date(2026, 1, 16, 8, 0, 0, 0, time.UTC); !v.ResetAt.Equal(want) {
		t.Errorf("ResetAt = %v; want %v", v.ResetAt.UTC(), want)
	}
	late := time.Date(2026, 1, 16, 7, 59, 0, 0, time.UTC) // 23:59 PST on the 15th
	v = Classify(Outcome{Shape: rewrite.Gemini, Status: 429, Body: []byte(gemPerDay)}, late)
	if want := time.Date(2026, 1, 16, 8, 0, 0, 0, time.UTC); !v.ResetAt.Equal(want) {
		t.Errorf("ResetAt at 23:59 PST = %v; want %v", v.ResetAt.UTC(), want)
	}
}

// TestClassifyQuotaIDs checks the facts of the Gemini 429 beyond its class.
func TestClassifyQuotaIDs(t *testing.T) {
	v := Classify(Outcome{Shape: rewrite.Gemini, Status: 429, Body: []byte(gemPerMinute)}, classifyNow)
	want := []string{"GenerateContentInputTokensPerModelPerMinute-FreeTier"}
	if !reflect.DeepEqual(v.Info.QuotaIDs, want) {
		t.Errorf("QuotaIDs = %q; want %q", v.Info.QuotaIDs, want)
	}
}

func TestRetryAfterHeader(t *testing.T) {
	tests := []struct {
		name string
		h    http.Header
		want time.Duration
	}{
		{"none", nil, 0},
		{"seconds", classifyHeader("Retry-After", "120"), 120 * time.Second},
		{"fractional seconds", classifyHeader("Retry-After", "1.5"), 1500 * time.Millisecond},
		{"ms float", classifyHeader("retry-after-ms", "1500.5"), 1500500 * time.Microsecond},
		{"ms wins over seconds", classifyHeader("retry-after-ms", "250", "retry-after", "9"), 250 * time.Millisecond},
		{"negative ms falls back to seconds", classifyHeader("retry-after-ms", "-1", "retry-after", "3"), 3 * time.Second},
		{"garbage ms falls back to seconds", classifyHeader("retry-after-ms", "soon", "retry-after", "3"), 3 * time.Second},
		{"NaN ms ignored", classifyHeader("retry-after-ms", "NaN"), 0},
		{"Inf ms ignored", classifyHeader("retry-after-ms", "+Inf"), 0},
		{"huge ms ignored", classifyHeader("retry-after-ms", "1e300"), 0},
		{"negative seconds", classifyHeader("Retry-After", "-5"), 0},
		{"NaN seconds", classifyHeader("Retry-After", "NaN"), 0},
		{"garbage seconds", classifyHeader("Retry-After", "soon"), 0},
		{"http date", classifyHeader("Retry-After", classifyNow.Add(90*time.Second).Format(http.TimeFormat)), 90 * time.Second},
		{"http date in the past", classifyHeader("Retry-After", classifyNow.Add(-time.Hour).Format(http.TimeFormat)), 0},
		{"zero", classifyHeader("Retry-After", "0"), 0},
	}
	for _, tt := range tests {
		if got := retryAfterHeader(tt.h, classifyNow); got != tt.want {
			t.Errorf("%s: retryAfterHeader(%v) = %v; want %v", tt.name, tt.h, got, tt.want)
		}
	}
}

func TestRetryAfterText(t *testing.T) {
	tests := []struct {
		msg  string
		want time.Duration
	}{
		{"Please retry after 86400 seconds. …", 86400 * time.Second},
		{"Please retry after 1 second.", time.Second},
		{"Please try again in 18.642s. …", 18642 * time.Millisecond},
		{"Please try again in 6m0s.", 6 * time.Minute},
		{"Please try again in 20ms.", 20 * time.Millisecond},
		{"Please try again later.", 0},
		{"Out of call volume quota. Quota will be replenished in 00:00:59.", 59 * time.Second},
		{"", 0},
	}
	for _, tt := range tests {
		if got := retryAfterText(tt.msg); got != tt.want {
			t.Errorf("retryAfterText(%q) = %v; want %v", tt.msg, got, tt.want)
		}
	}
}

// TestClassifyReadsBackErrorBody protects the loop between the two ends of
// detour: an error detour writes for an app in some shape, met again as an
// upstream error (detour in front of detour, or the app's own gateway), is
// read back as the class it was written for, or as the nearest class the
// vendor's vocabulary can say.
func TestClassifyReadsBackErrorBody(t *testing.T) {
	// What each shape cannot say: no vendor has a type for "unreachable" or
	// "bad_response" (both are server errors to an SDK), Anthropic and
	// Gemini have none for a content filter and say "context too long" only
	// in the message, and Gemini's quota and rate limits are both
	// RESOURCE_EXHAUSTED.
	lossy := map[rewrite.Shape]map[Class]Class{
		rewrite.OpenAI: {ClassUnreachable: ClassServerError, ClassBadResponse: ClassServerError},
		rewrite.Anthropic: {ClassUnreachable: ClassServerError, ClassBadResponse: ClassServerError,
			ClassContentFilter: ClassInvalidRequest, ClassContextTooLong: ClassInvalidRequest},
		rewrite.Gemini: {ClassUnreachable: ClassServerError, ClassBadResponse: ClassServerError,
			ClassContentFilter: ClassInvalidRequest, ClassContextTooLong: ClassInvalidRequest,
			ClassQuotaExhausted: ClassRateLimited},
	}
	for _, shape := range rewrite.Shapes {
		for _, class := range Classes {
			for _, msg := range []string{"detour: every upstream failed", ""} {
				checkReadBack(t, shape, class, msg, lossy[shape])
			}
		}
	}
}

func checkReadBack(t *testing.T, shape rewrite.Shape, class Class, msg string, lossy map[Class]Class) {
	t.Helper()
	e := rewrite.AppError{Class: string(class), Message: msg}
	want := class
	if c, ok := lossy[class]; ok && !(class == ClassContextTooLong && msg == "") {
		// detour's default context message says "prompt is too long",
		// which every shape reads back.
		want = c
	}
	status, body := rewrite.ErrorBody(shape, e)
	if got := Classify(Outcome{Shape: shape, Status: status, Body: body}, classifyNow).Class; got != want {
		t.Errorf("%s %s: %d %s classified %q; want %q", shape, class, status, body, got, want)
	}
	ev := rewrite.StreamErrorEvent(shape, e)
	data := ev[len(ev)-2-len(body) : len(ev)-2]
	if got := Classify(Outcome{Shape: shape, Status: 200, Body: data, InStream: true}, classifyNow).Class; got != want {
		t.Errorf("%s %s in-stream: %s classified %q; want %q", shape, class, data, got, want)
	}
}

func FuzzClassify(f *testing.F) {
	for _, b := range []string{oaiTPM, oaiQuota, azureDaily, azureFilterVerbatim, apimQuota, antSpend, antStreamOverloaded,
		gemPerMinute, gemPerDay, gemZeroLimit, "[" + gemBadKey + "]", orMidStream, vllmFlat, ollamaNative, llamaContext,
		respFailed, oaiChatCompletion, "", "<html>"} {
		f.Add(429, []byte(b), false, "", "", uint8(0))
		f.Add(200, []byte(b), true, "3", "1500", uint8(0))
	}
	f.Add(0, []byte(nil), false, "", "", uint8(1))
	f.Add(200, []byte(oaiChatCompletion), false, "Wed, 21 Oct 2026 07:28:00 GMT", "-1", uint8(2))
	f.Fuzz(func(t *testing.T, status int, body []byte, inStream bool, retryAfter, retryAfterMs string, timer uint8) {
		o := Outcome{Shape: rewrite.Shapes[int(timer)%len(rewrite.Shapes)], Status: status, Body: body, InStream: inStream,
			Header: classifyHeader("Retry-After", retryAfter, "Retry-After-Ms", retryAfterMs)}
		switch timer % 4 {
		case 1:
			o.Err = context.DeadlineExceeded
		case 2:
			o.Err = io.ErrUnexpectedEOF
		case 3:
			o.Timeout = "idle"
		}
		v := Classify(o, classifyNow)
		if v.Class != ClassNone && !v.Class.Valid() {
			t.Fatalf("Classify gave unknown class %q", v.Class)
		}
		if v.Class == ClassNone && (inStream || status < 200 || status > 299 || o.Timeout != "") {
			t.Fatalf("Classify(%d, inStream=%v, timeout=%q) = success", status, inStream, o.Timeout)
		}
		if v.RetryAfter < 0 {
			t.Fatalf("negative RetryAfter %v", v.RetryAfter)
		}
		if v.Reason == "" {
			t.Fatal("empty Reason")
		}
		if !v.ResetAt.IsZero() && v.Class != ClassQuotaExhausted {
			t.Fatalf("ResetAt %v on class %q", v.ResetAt, v.Class)
		}
	})
}

// BenchmarkClassify measures the two paths every attempt takes: a 2xx body
// (a scan, no decode) and a vendor error (one decode).
func BenchmarkClassify(b *testing.B) {
	ok := Outcome{Shape: rewrite.OpenAI, Status: 200, Body: []byte(oaiChatCompletion)}
	quota := Outcome{Shape: rewrite.Gemini, Status: 429, Body: []byte(gemPerMinute), Header: classifyHeader("Retry-After", "26")}
	b.Run("2xx", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			Classify(ok, classifyNow)
		}
	})
	b.Run("gemini-429", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			Classify(quota, classifyNow)
		}
	})
}
