package fakevendor

import (
	"encoding/json"
	"net/http"
	"strconv"
	"testing"

	"github.com/detour-proxy/detour/rewrite"
)

// TestErrorBodiesExact pins the bodies that docs/vendors.md quotes, byte
// for byte, and the headers that go with them.
func TestErrorBodiesExact(t *testing.T) {
	t.Parallel()
	const id = "req_fake0000000000000001"
	for _, tc := range []struct {
		name       string
		shape      rewrite.Shape
		fault      Fault
		wantStatus int
		wantBody   string
		wantRetry  string
	}{
		{
			"openai insufficient_quota", rewrite.OpenAI, Fault{Kind: Status, Status: 429, Class: ClassInsufficientQuota}, 429,
			`{"error":{"message":"You exceeded your current quota, please check your plan and billing details. For more information on this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`, "",
		},
		{
			"openai server_error", rewrite.OpenAI, Fault{Kind: Status, Status: 500}, 500,
			`{"error":{"message":"The server had an error while processing your request. Sorry about that!","type":"server_error","param":null,"code":null}}`, "",
		},
		{
			"openai context too long", rewrite.OpenAI, Fault{Kind: Status, Class: ClassContextTooLong}, 400,
			`{"error":{"message":"This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`, "",
		},
		{
			"openai model not found", rewrite.OpenAI, Fault{Kind: Status, Class: ClassNotFound}, 404,
			"{\"error\":{\"message\":\"The model `gpt-4o` does not exist or you do not have access to it.\",\"type\":\"invalid_request_error\",\"param\":null,\"code\":\"model_not_found\"}}", "",
		},
		{
			"openai generic 529 with retry-after", rewrite.OpenAI, Fault{Kind: Status, Status: 529, RetryAfter: "3"}, 529,
			`{"error":{"message":"HTTP 529","type":"server_error","param":null,"code":null}}`, "3",
		},
		{
			"anthropic overloaded", rewrite.Anthropic, Fault{Kind: Status, Class: ClassOverloaded}, 529,
			`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},"request_id":"` + id + `"}`, "",
		},
		{
			"anthropic bare 529", rewrite.Anthropic, Fault{Kind: Status, Status: 529}, 529,
			`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},"request_id":"` + id + `"}`, "",
		},
		{
			"anthropic spend limit", rewrite.Anthropic, Fault{Kind: Status, Class: ClassSpendLimit}, 429,
			`{"type":"error","error":{"type":"rate_limit_error","message":"You have reached your API usage limits: your organization has crossed its monthly API usage threshold, so further requests are refused until the limit resets. You will regain access on 2025-02-01 at 00:00 UTC.","details":{"error_code":"enforced_spend_limit_reached"}},"request_id":"` + id + `"}`, "",
		},
		{
			"anthropic credit balance", rewrite.Anthropic, Fault{Kind: Status, Class: ClassCreditBalance}, 400,
			`{"type":"error","error":{"type":"invalid_request_error","message":"Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits."},"request_id":"` + id + `"}`, "",
		},
		{
			"anthropic rate limit has retry-after", rewrite.Anthropic, Fault{Kind: Status, Status: 429}, 429,
			`{"type":"error","error":{"type":"rate_limit_error","message":"This request would exceed the rate limit for your organization (fakevendor) of 50 requests per minute. For details, refer to: https://docs.claude.com/en/api/rate-limits. You can see the response headers for current usage. Please reduce the prompt length or the maximum tokens requested, or try again later. You may also contact sales at https://www.anthropic.com/contact-sales to discuss your options for a rate limit increase."},"request_id":"` + id + `"}`, DefaultAnthropicRetryAfter,
		},
		{
			"anthropic model not found", rewrite.Anthropic, Fault{Kind: Status, Class: ClassNotFound}, 404,
			`{"type":"error","error":{"type":"not_found_error","message":"model: claude-sonnet-4-5"},"request_id":"` + id + `"}`, "",
		},
		{
			"anthropic generic 503", rewrite.Anthropic, Fault{Kind: Status, Status: 503}, 503,
			`{"type":"error","error":{"type":"api_error","message":"Service Unavailable"},"request_id":"` + id + `"}`, "",
		},
		{
			"gemini overloaded", rewrite.Gemini, Fault{Kind: Status, Class: ClassOverloaded}, 503,
			`{"error":{"code":503,"message":"The model is overloaded. Please try again later.","status":"UNAVAILABLE"}}`, "",
		},
		{
			"gemini bad key", rewrite.Gemini, Fault{Kind: Status, Class: ClassAuth}, 400,
			`{"error":{"code":400,"message":"API key not valid. Please pass a valid API key.","status":"INVALID_ARGUMENT","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"API_KEY_INVALID","domain":"googleapis.com","metadata":{"service":"generativelanguage.googleapis.com"}},{"@type":"type.googleapis.com/google.rpc.LocalizedMessage","locale":"en-US","message":"API key not valid. Please pass a valid API key."}]}}`, "",
		},
		{
			"gemini per-minute quota", rewrite.Gemini, Fault{Kind: Status, Status: 429}, 429,
			`{"error":{"code":429,"message":"You exceeded your current quota, please check your plan and billing details. For more information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits. To monitor your current usage, head to: https://ai.dev/usage?tab=rate-limit. \n* Quota exceeded for metric: generativelanguage.googleapis.com/generate_content_free_tier_input_token_count, limit: 250000, model: gemini-2.5-flash\nPlease retry in 26s.","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaMetric":"generativelanguage.googleapis.com/generate_content_free_tier_input_token_count","quotaId":"GenerateContentInputTokensPerModelPerMinute-FreeTier","quotaDimensions":{"location":"global","model":"gemini-2.5-flash"},"quotaValue":"250000"}]},{"@type":"type.googleapis.com/google.rpc.Help","links":[{"description":"Learn more about Gemini API quotas","url":"https://ai.google.dev/gemini-api/docs/rate-limits"}]},{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"26s"}]}}`, "",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, srv := serve(t, tc.shape, Options{})
			v.Script(tc.fault)
			got := ask(t, srv, tc.shape, false)
			if got.status != tc.wantStatus {
				t.Errorf("status = %d; want %d", got.status, tc.wantStatus)
			}
			if string(got.body) != tc.wantBody {
				t.Errorf("body:\n%s\nwant:\n%s", got.body, tc.wantBody)
			}
			if ra := got.header.Get("retry-after"); ra != tc.wantRetry {
				t.Errorf("retry-after = %q; want %q", ra, tc.wantRetry)
			}
			if cl := got.header.Get("Content-Length"); cl != strconv.Itoa(len(got.body)) {
				t.Errorf("Content-Length = %q for %d bytes", cl, len(got.body))
			}
		})
	}
}

// TestEveryClassOnEveryShape checks the envelope, status and headers of
// every class on every shape, and that ErrorBody matches what is served.
func TestEveryClassOnEveryShape(t *testing.T) {
	t.Parallel()
	for _, shape := range rewrite.Shapes {
		for _, class := range Classes {
			t.Run(string(shape)+"/"+class, func(t *testing.T) {
				v, srv := serve(t, shape, Options{Now: fixedNow})
				f := Fault{Kind: Status, Class: class}
				v.Script(f)
				got := ask(t, srv, shape, true) // a stream request still fails before the stream
				wantStatus := classStatus(shape, class)
				if got.status != wantStatus {
					t.Errorf("status = %d; want %d", got.status, wantStatus)
				}
				id := v.Requests()[0].RequestID
				status, body := errorBody(shape, f, testModel[shape], id, fixedNow())
				if status != got.status || string(body) != string(got.body) {
					t.Errorf("ErrorBody = %d %s; served %d %s", status, body, got.status, got.body)
				}
				if ct := got.header.Get("Content-Type"); ct != v.jsonType() {
					t.Errorf("Content-Type = %q", ct)
				}
				switch shape {
				case rewrite.OpenAI:
					var b struct {
						Error *struct {
							Message string `json:"message"`
							Type    string `json:"type"`
						} `json:"error"`
					}
					if json.Unmarshal(got.body, &b) != nil || b.Error == nil || b.Error.Message == "" || b.Error.Type == "" {
						t.Errorf("not an OpenAI error envelope: %s", got.body)
					}
					if got.header.Get("x-request-id") != id {
						t.Errorf("x-request-id = %q; want %q", got.header.Get("x-request-id"), id)
					}
				case rewrite.Anthropic:
					var b struct {
						Type  string `json:"type"`
						Error struct {
							Type    string `json:"type"`
							Message string `json:"message"`
						} `json:"error"`
						RequestID string `json:"request_id"`
					}
					if json.Unmarshal(got.body, &b) != nil || b.Type != "error" || b.Error.Type == "" || b.Error.Message == "" {
						t.Errorf("not an Anthropic error envelope: %s", got.body)
					}
					if b.RequestID != id || got.header.Get("request-id") != id {
						t.Errorf("request ids: body %q header %q; want %q", b.RequestID, got.header.Get("request-id"), id)
					}
					wantRetry := class == ClassRateLimit || class == ClassQuotaPerDay
					if (got.header.Get("retry-after") != "") != wantRetry {
						t.Errorf("retry-after = %q; want one: %v", got.header.Get("retry-after"), wantRetry)
					}
				case rewrite.Gemini:
					var b struct {
						Error struct {
							Code    int    `json:"code"`
							Message string `json:"message"`
							Status  string `json:"status"`
						} `json:"error"`
					}
					if json.Unmarshal(got.body, &b) != nil || b.Error.Code != got.status || b.Error.Status == "" || b.Error.Message == "" {
						t.Errorf("not a Gemini error envelope for %d: %s", got.status, got.body)
					}
				}
			})
		}
	}
}

// TestUnservedRequests covers unknown paths and malformed bodies: the
// vendor's 404 and 400, counted and recorded, and no scripted fault spent.
func TestUnservedRequests(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		shape      rewrite.Shape
		method     string
		path, body string
		wantStatus int
		wantBody   string
	}{
		{"openai unknown path", rewrite.OpenAI, "POST", "/v1/moderations", `{}`, 404,
			`{"error":{"message":"Invalid URL (POST /v1/moderations)","type":"invalid_request_error","param":null,"code":null}}`},
		{"openai GET", rewrite.OpenAI, "GET", "/v1/chat/completions", ``, 404,
			`{"error":{"message":"Invalid URL (GET /v1/chat/completions)","type":"invalid_request_error","param":null,"code":null}}`},
		{"openai malformed", rewrite.OpenAI, "POST", "/v1/chat/completions", `{"model":`, 400,
			`{"error":{"message":"We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON. If you have trouble figuring out how to fix this, please contact us through our help center at help.openai.com.)","type":"invalid_request_error","param":null,"code":null}}`},
		{"anthropic unknown path", rewrite.Anthropic, "POST", "/v1/complete", `{}`, 404,
			`{"type":"error","error":{"type":"not_found_error","message":"Not Found"},"request_id":"req_fake0000000000000001"}`},
		{"anthropic malformed", rewrite.Anthropic, "POST", "/v1/messages", `[1,2]`, 400,
			`{"type":"error","error":{"type":"invalid_request_error","message":"There was an issue with the format or content of your request."},"request_id":"req_fake0000000000000001"}`},
		{"gemini unknown method", rewrite.Gemini, "POST", "/v1beta/models/gemini-2.5-flash:countTokens", `{}`, 404,
			`{"error":{"code":404,"message":"Method not found.","status":"NOT_FOUND"}}`},
		{"gemini malformed", rewrite.Gemini, "POST", "/v1beta/models/gemini-2.5-flash:generateContent", `not json`, 400,
			`{"error":{"code":400,"message":"Invalid JSON payload received. Unexpected token.","status":"INVALID_ARGUMENT","details":[{"@type":"type.googleapis.com/google.rpc.BadRequest","fieldViolations":[{"description":"Invalid JSON payload received. Unexpected token."}]}]}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, srv := serve(t, tc.shape, Options{})
			v.Script(Fault{Kind: Status, Status: 500})
			req, _ := http.NewRequest(tc.method, srv.URL+tc.path, stringsReader(tc.body))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body := readAll(t, resp)
			if resp.StatusCode != tc.wantStatus || body != tc.wantBody {
				t.Errorf("got %d %s\nwant %d %s", resp.StatusCode, body, tc.wantStatus, tc.wantBody)
			}
			if v.Calls() != 1 || len(v.Requests()) != 1 || v.Requests()[0].Path != tc.path {
				t.Errorf("calls %d, recorded %+v", v.Calls(), v.Requests())
			}
			// The scripted 500 is still queued for the next real request.
			if got := ask(t, srv, tc.shape, false); got.status != 500 {
				t.Errorf("next request got %d; want the scripted 500", got.status)
			}
		})
	}
}
