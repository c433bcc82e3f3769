package rewrite

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

// Bodies quoted from docs/vendors.md. Where the doc
// elides part of a JSON structure ("[…]"), the elision is filled so that the
// body stays valid JSON; elisions inside strings are kept as written.
const (
	// docs/vendors.md#openai-errors, ChatGPTNextWeb/NextChat#3664.
	openAIQuotaBody = `{"error":{"message":"You exceeded your current quota, please check your plan and billing details. For more information on this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`
	// docs/vendors.md#azure-openai-errors, vanderschaarlab/climb#1.
	azureDailyQuotaBody = `{"error":{"code":"429","message":"Requests to the ChatCompletions_Create Operation under Azure OpenAI API version 2024-08-01-preview have exceeded token rate limit of your current OpenAI S0 pricing tier. Please retry after 86400 seconds. …"}}`
	// docs/vendors.md#anthropic-errors, ant-docs /rate-limits.
	anthropicSpendBody = `{"type":"error","error":{"type":"rate_limit_error","message":"You have reached your API usage limits: your organization has crossed its monthly API usage threshold, … You will regain access on 2026-09-01 at 00:00 UTC.","details":{"error_code":"enforced_spend_limit_reached"}},"request_id":"req_018EeWyXxfu5pfWkrYcMdjWG"}`
	// docs/vendors.md#anthropic-errors, apify/tester-mcp-client#16.
	anthropicOverloadedBody = `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`
	// docs/vendors.md#gemini-errors, RooCodeInc/Roo-Code#3883; the Help links ("[…]") filled in.
	gemini429Body = `{"error":{"code":429,"message":"You exceeded your current quota, please check your plan and billing details. …","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaMetric":"generativelanguage.googleapis.com/generate_content_free_tier_input_token_count","quotaId":"GenerateContentInputTokensPerModelPerMinute-FreeTier","quotaDimensions":{"location":"global","model":"gemini-2.5-flash"},"quotaValue":"250000"}]},{"@type":"type.googleapis.com/google.rpc.Help","links":[{"description":"Learn more about Gemini API quotas","url":"https://ai.google.dev/gemini-api/docs/rate-limits"}]},{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"26s"}]}}`
	// docs/vendors.md#gemini-errors, continuedev/continue#10290 (message); the ErrorInfo detail in
	// Google's usual form.
	geminiBadKeyBody = `{"error":{"code":400,"message":"API key not valid. Please pass a valid API key.","status":"INVALID_ARGUMENT","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"API_KEY_INVALID","domain":"googleapis.com","metadata":{"service":"generativelanguage.googleapis.com"}}]}}`
	// docs/vendors.md#gemini-errors, lobehub/lobehub#9728.
	gemini503Body = `{"error":{"code":503,"message":"The model is overloaded. Please try again later.","status":"UNAVAILABLE"}}`
	// docs/vendors.md#openai-compatible-servers, llama.cpp server.
	llamaCppContextBody = `{"error":{"code":400,"message":"request (13392 tokens) exceeds the available context size (8192 tokens), try increasing it","type":"exceed_context_size_error","n_prompt_tokens":13392,"n_ctx":8192}}`
	// docs/vendors.md#openai-compatible-servers, OpenRouter mid-stream error (the "…" of the source dropped).
	openRouterMidStream = `{"id":"cmpl-abc123","object":"chat.completion.chunk","provider":"openai","error":{"code":"server_error","message":"Provider disconnected unexpectedly"},"choices":[{"index":0,"delta":{"content":""},"finish_reason":"error"}]}`
)

func TestParseError(t *testing.T) {
	tests := []struct {
		name string
		body string
		want ErrorInfo
	}{
		{"openai insufficient_quota", openAIQuotaBody, ErrorInfo{Parsed: true, Type: "insufficient_quota", Code: "insufficient_quota",
			Message: "You exceeded your current quota, please check your plan and billing details. For more information on this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors."}},
		{"openai code null", `{"error":{"message":"The server had an error while processing your request…","type":"server_error","param":null,"code":null}}`,
			ErrorInfo{Parsed: true, Type: "server_error", Message: "The server had an error while processing your request…"}},
		{"azure code as status string", azureDailyQuotaBody, ErrorInfo{Parsed: true, Code: "429",
			Message: "Requests to the ChatCompletions_Create Operation under Azure OpenAI API version 2024-08-01-preview have exceeded token rate limit of your current OpenAI S0 pricing tier. Please retry after 86400 seconds. …"}},
		{"azure content filter with numeric status", `{"error":{"message":"The response was filtered due to the prompt triggering Azure OpenAI's content management policy. …","type":null,"param":"prompt","code":"content_filter","status":400,"innererror":{"code":"ResponsibleAIPolicyViolation","content_filter_result":{"sexual":{"filtered":true,"severity":"high"}}}}}`,
			ErrorInfo{Parsed: true, Code: "content_filter", Message: "The response was filtered due to the prompt triggering Azure OpenAI's content management policy. …"}},
		{"vllm numeric code", `{"error":{"message":"This model's maximum context length is 32768 tokens. However, your request has 40000 input tokens. …","type":"BadRequestError","param":null,"code":400}}`,
			ErrorInfo{Parsed: true, Type: "BadRequestError", Code: "400", Message: "This model's maximum context length is 32768 tokens. However, your request has 40000 input tokens. …"}},
		{"vllm old flat", `{"object":"error","message":"The model ` + "`llama-3`" + ` does not exist.","type":"NotFoundError","param":null,"code":404}`,
			ErrorInfo{Parsed: true, Type: "NotFoundError", Code: "404", Message: "The model `llama-3` does not exist."}},
		{"ollama native string", `{"error":"model \"llama3\" not found, try pulling it first"}`,
			ErrorInfo{Parsed: true, Message: `model "llama3" not found, try pulling it first`}},
		{"ollama openai route", `{"error":{"message":"model \"qwen2.5:7b-instruct\" not found, try pulling it first","type":"not_found_error","param":null,"code":null}}`,
			ErrorInfo{Parsed: true, Type: "not_found_error", Message: `model "qwen2.5:7b-instruct" not found, try pulling it first`}},
		{"llama.cpp", llamaCppContextBody, ErrorInfo{Parsed: true, Type: "exceed_context_size_error", Code: "400",
			Message: "request (13392 tokens) exceeds the available context size (8192 tokens), try increasing it"}},
		{"anthropic details.error_code", anthropicSpendBody, ErrorInfo{Parsed: true, Type: "rate_limit_error", Code: "enforced_spend_limit_reached",
			Message: "You have reached your API usage limits: your organization has crossed its monthly API usage threshold, … You will regain access on 2026-09-01 at 00:00 UTC."}},
		{"anthropic overloaded", anthropicOverloadedBody, ErrorInfo{Parsed: true, Type: "overloaded_error", Message: "Overloaded"}},
		{"anthropic in-stream with spaces", `{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}`,
			ErrorInfo{Parsed: true, Type: "overloaded_error", Message: "Overloaded"}},
		{"gemini quota failure and retry info", gemini429Body, ErrorInfo{Parsed: true, Type: "RESOURCE_EXHAUSTED", Code: "429",
			Message:    "You exceeded your current quota, please check your plan and billing details. …",
			QuotaIDs:   []string{"GenerateContentInputTokensPerModelPerMinute-FreeTier"},
			RetryDelay: 26 * time.Second}},
		{"gemini error info reason", geminiBadKeyBody, ErrorInfo{Parsed: true, Type: "INVALID_ARGUMENT", Code: "API_KEY_INVALID",
			Message: "API key not valid. Please pass a valid API key."}},
		{"gemini wrapped in array", "[" + geminiBadKeyBody + "]", ErrorInfo{Parsed: true, Type: "INVALID_ARGUMENT", Code: "API_KEY_INVALID",
			Message: "API key not valid. Please pass a valid API key."}},
		{"gemini fractional retry delay", `{"error":{"code":429,"message":"x","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"1.5s"}]}}`,
			ErrorInfo{Parsed: true, Type: "RESOURCE_EXHAUSTED", Code: "429", Message: "x", RetryDelay: 1500 * time.Millisecond}},
		{"gemini retry delay as message", `{"error":{"code":429,"message":"x","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":{"seconds":"3","nanos":500000000}}]}}`,
			ErrorInfo{Parsed: true, Type: "RESOURCE_EXHAUSTED", Code: "429", Message: "x", RetryDelay: 3500 * time.Millisecond}},
		{"gemini negative retry delay ignored", `{"error":{"code":429,"message":"x","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"-3s"}]}}`,
			ErrorInfo{Parsed: true, Type: "RESOURCE_EXHAUSTED", Code: "429", Message: "x"}},
		{"gemini in-stream", gemini503Body, ErrorInfo{Parsed: true, Type: "UNAVAILABLE", Code: "503", Message: "The model is overloaded. Please try again later."}},
		{"openrouter numeric code", `{"error":{"code":402,"message":"Insufficient credits","metadata":{"provider_name":null}}}`,
			ErrorInfo{Parsed: true, Code: "402", Message: "Insufficient credits"}},
		{"openrouter mid-stream chunk", openRouterMidStream, ErrorInfo{Parsed: true, Code: "server_error", Message: "Provider disconnected unexpectedly"}},
		{"responses error event", `{"type":"error","code":"rate_limit_exceeded","message":"Rate limit reached","param":null,"sequence_number":2}`,
			ErrorInfo{Parsed: true, Code: "rate_limit_exceeded", Message: "Rate limit reached"}},
		{"responses failed event", `{"type":"response.failed","sequence_number":5,"response":{"id":"resp_1","object":"response","status":"failed","error":{"code":"server_error","message":"The server had an error"}}}`,
			ErrorInfo{Parsed: true, Code: "server_error", Message: "The server had an error"}},
		{"type of the wrong kind ignored", `{"error":{"message":"m","type":42,"code":{"x":1}}}`, ErrorInfo{Parsed: true, Message: "m"}},

		{"empty", ``, ErrorInfo{}},
		{"null", `null`, ErrorInfo{}},
		{"empty array", `[]`, ErrorInfo{}},
		{"array of numbers", `[1,2]`, ErrorInfo{}},
		{"error null in a success", `{"id":"resp_1","object":"response","status":"completed","error":null}`, ErrorInfo{}},
		{"empty error object", `{"error":{}}`, ErrorInfo{}},
		{"empty error string", `{"error":""}`, ErrorInfo{}},
		{"chat completion", `{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}`, ErrorInfo{}},
		{"html", `<html><body><h1>502 Bad Gateway</h1></body></html>`, ErrorInfo{}},
		{"truncated", `{"error":{"message":"You exceeded your current quota`, ErrorInfo{}},
		{"bedrock message only", `{"message":"Too many requests, please wait before trying again."}`, ErrorInfo{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ParseError([]byte(tt.body))
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ParseError(%s)\n got %+v\nwant %+v", tt.body, got, tt.want)
			}
		})
	}
}

// TestParseErrorCapsBody protects the 64 KiB cap: a valid envelope longer
// than the cap is cut, and a cut body is not Parsed.
func TestParseErrorCapsBody(t *testing.T) {
	long := `{"error":{"message":"` + strings.Repeat("x", maxParsedErrorBody) + `","type":"server_error"}}`
	if got := ParseError([]byte(long)); got.Parsed {
		t.Errorf("ParseError(%d bytes) parsed; want not parsed past the cap", len(long))
	}
	short := `{"error":{"message":"` + strings.Repeat("x", maxParsedErrorBody-100) + `","type":"server_error"}}`
	if got := ParseError([]byte(short)); !got.Parsed || got.Type != "server_error" {
		t.Errorf("ParseError(%d bytes) = %+v; want parsed under the cap", len(short), got)
	}
}

func TestStatusForClass(t *testing.T) {
	want := map[string]int{
		"rate_limited": 429, "quota_exhausted": 429, "overloaded": 503, "server_error": 502,
		"unreachable": 502, "bad_response": 502, "timeout": 504, "context_too_long": 400,
		"invalid_request": 400, "auth": 401, "content_filter": 400, "": 502, "no_such_class": 502,
	}
	for class, status := range want {
		if got := StatusForClass(class); got != status {
			t.Errorf("StatusForClass(%q) = %d; want %d", class, got, status)
		}
	}
}

func TestErrorBody(t *testing.T) {
	tests := []struct {
		name       string
		shape      Shape
		e          AppError
		wantStatus int
		wantBody   string
	}{
		{"openai rate limit", OpenAI, AppError{Status: 429, Class: "rate_limited", Message: "slow down"}, 429,
			`{"error":{"message":"slow down","type":"requests","param":null,"code":"rate_limit_exceeded"}}`},
		{"openai quota", OpenAI, AppError{Class: "quota_exhausted", Message: "no quota"}, 429,
			`{"error":{"message":"no quota","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`},
		{"openai overloaded", OpenAI, AppError{Class: "overloaded", Message: "busy"}, 503,
			`{"error":{"message":"busy","type":"server_error","param":null,"code":"server_is_overloaded"}}`},
		{"openai unreachable", OpenAI, AppError{Class: "unreachable", Message: "down"}, 502,
			`{"error":{"message":"down","type":"server_error","param":null,"code":null}}`},
		{"openai timeout", OpenAI, AppError{Class: "timeout", Message: "slow"}, 504,
			`{"error":{"message":"slow","type":"timeout","param":null,"code":null}}`},
		{"openai context", OpenAI, AppError{Class: "context_too_long", Message: "too long"}, 400,
			`{"error":{"message":"too long","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`},
		{"openai auth", OpenAI, AppError{Class: "auth", Message: "bad key"}, 401,
			`{"error":{"message":"bad key","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`},
		{"openai content filter", OpenAI, AppError{Class: "content_filter", Message: "blocked"}, 400,
			`{"error":{"message":"blocked","type":"invalid_request_error","param":null,"code":"content_policy_violation"}}`},
		{"openai no class, status 0", OpenAI, AppError{Message: "x"}, 502,
			`{"error":{"message":"x","type":"server_error","param":null,"code":null}}`},
		{"openai no class, 413", OpenAI, AppError{Status: 413, Message: "too big"}, 413,
			`{"error":{"message":"too big","type":"invalid_request_error","param":null,"code":null}}`},
		{"openai default message", OpenAI, AppError{Class: "overloaded"}, 503,
			`{"error":{"message":"Overloaded","type":"server_error","param":null,"code":"server_is_overloaded"}}`},
		{"openai escaping", OpenAI, AppError{Status: 400, Class: "invalid_request", Message: "bad \"json\"\n<tag> & \\ é"}, 400,
			`{"error":{"message":"bad \"json\"\n<tag> & \\ é","type":"invalid_request_error","param":null,"code":null}}`},

		{"anthropic overloaded is 529", Anthropic, AppError{Status: 503, Class: "overloaded", Message: "Overloaded"}, 529,
			`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`},
		{"anthropic rate limit", Anthropic, AppError{Class: "rate_limited", Message: "r"}, 429,
			`{"type":"error","error":{"type":"rate_limit_error","message":"r"}}`},
		{"anthropic quota is billing_error 402", Anthropic, AppError{Status: 429, Class: "quota_exhausted", Message: "q"}, 402,
			`{"type":"error","error":{"type":"billing_error","message":"q"}}`},
		{"anthropic server error", Anthropic, AppError{Class: "server_error", Message: "s"}, 502,
			`{"type":"error","error":{"type":"api_error","message":"s"}}`},
		{"anthropic timeout", Anthropic, AppError{Class: "timeout", Message: "t"}, 504,
			`{"type":"error","error":{"type":"timeout_error","message":"t"}}`},
		{"anthropic auth 401", Anthropic, AppError{Class: "auth", Message: "a"}, 401,
			`{"type":"error","error":{"type":"authentication_error","message":"a"}}`},
		{"anthropic auth 403", Anthropic, AppError{Status: 403, Class: "auth", Message: "a"}, 403,
			`{"type":"error","error":{"type":"permission_error","message":"a"}}`},
		{"anthropic not found", Anthropic, AppError{Status: 404, Class: "invalid_request", Message: "model: x"}, 404,
			`{"type":"error","error":{"type":"not_found_error","message":"model: x"}}`},
		{"anthropic context keeps the >", Anthropic, AppError{Class: "context_too_long", Message: "prompt is too long: 205351 tokens > 200000 maximum"}, 400,
			`{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 205351 tokens > 200000 maximum"}}`},

		{"gemini rate limit", Gemini, AppError{Class: "rate_limited", Message: "r"}, 429,
			`{"error":{"code":429,"message":"r","status":"RESOURCE_EXHAUSTED"}}`},
		{"gemini prepaid credits 402", Gemini, AppError{Status: 402, Class: "quota_exhausted", Message: "q"}, 402,
			`{"error":{"code":402,"message":"q","status":"RESOURCE_EXHAUSTED"}}`},
		{"gemini overloaded", Gemini, AppError{Class: "overloaded", Message: "o"}, 503,
			`{"error":{"code":503,"message":"o","status":"UNAVAILABLE"}}`},
		{"gemini 502 is 500 INTERNAL", Gemini, AppError{Status: 502, Class: "bad_response", Message: "b"}, 500,
			`{"error":{"code":500,"message":"b","status":"INTERNAL"}}`},
		{"gemini timeout", Gemini, AppError{Class: "timeout", Message: "t"}, 504,
			`{"error":{"code":504,"message":"t","status":"DEADLINE_EXCEEDED"}}`},
		{"gemini invalid", Gemini, AppError{Class: "invalid_request", Message: "i"}, 400,
			`{"error":{"code":400,"message":"i","status":"INVALID_ARGUMENT"}}`},
		{"gemini not found", Gemini, AppError{Status: 404, Message: "n"}, 404,
			`{"error":{"code":404,"message":"n","status":"NOT_FOUND"}}`},
		{"gemini auth", Gemini, AppError{Class: "auth", Message: "a"}, 401,
			`{"error":{"code":401,"message":"a","status":"UNAUTHENTICATED"}}`},
		{"gemini permission", Gemini, AppError{Status: 403, Message: "p"}, 403,
			`{"error":{"code":403,"message":"p","status":"PERMISSION_DENIED"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body := ErrorBody(tt.shape, tt.e)
			if status != tt.wantStatus {
				t.Errorf("status = %d; want %d", status, tt.wantStatus)
			}
			if string(body) != tt.wantBody {
				t.Errorf("body\n got %s\nwant %s", body, tt.wantBody)
			}
		})
	}
}

// TestErrorBodyRoundTrip protects the contract between the two halves: what
// detour writes for an app, detour (or the app's SDK) reads back as the same
// type and message.
func TestErrorBodyRoundTrip(t *testing.T) {
	classes := []string{"", "rate_limited", "quota_exhausted", "overloaded", "server_error", "timeout",
		"unreachable", "context_too_long", "invalid_request", "auth", "content_filter", "bad_response"}
	messages := []string{"", "plain", "quotes \" and \\ and\nnewlines\r\t", "<script>&amp;</script>", "emoji 🚦 and \u2028 separators \u2029", "日本語のエラー"}
	for _, shape := range Shapes {
		for _, class := range classes {
			for _, msg := range messages {
				e := AppError{Class: class, Message: msg}
				status, body := ErrorBody(shape, e)
				v := vendorErrorFor(shape, e)
				info := ParseError(body)
				if !info.Parsed || info.Type != v.typ || info.Message != v.message {
					t.Errorf("%s/%s/%q: ParseError(%s) = %+v; want type %q message %q", shape, class, msg, body, info, v.typ, v.message)
				}
				if msg != "" && info.Message != msg {
					t.Errorf("%s/%s: message %q came back as %q", shape, class, msg, info.Message)
				}
				if shape == Gemini && info.Code != itoa(status) {
					t.Errorf("%s/%s: error.code %q; want the HTTP status %d", shape, class, info.Code, status)
				}
				ev := StreamErrorEvent(shape, e)
				data := ev[bytes.Index(ev, []byte("data: "))+len("data: ") : len(ev)-2]
				if !bytes.Equal(data, body) {
					t.Errorf("%s/%s: stream event data %s; want the HTTP body %s", shape, class, data, body)
				}
				if bytes.Count(ev, []byte("\n\n")) != 1 || !bytes.HasSuffix(ev, []byte("\n\n")) {
					t.Errorf("%s/%s: event %q is not exactly one SSE event", shape, class, ev)
				}
			}
		}
	}
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// TestStreamErrorEventGolden pins the exact bytes each SDK's stream reader
// is fed.
func TestStreamErrorEventGolden(t *testing.T) {
	tests := []struct {
		shape Shape
		e     AppError
		want  string
	}{
		{OpenAI, AppError{Class: "server_error", Message: "The server had an error while processing your request. Sorry about that!"},
			"data: {\"error\":{\"message\":\"The server had an error while processing your request. Sorry about that!\",\"type\":\"server_error\",\"param\":null,\"code\":null}}\n\n"},
		{OpenAI, AppError{Class: "overloaded", Message: "Overloaded"},
			"data: {\"error\":{\"message\":\"Overloaded\",\"type\":\"server_error\",\"param\":null,\"code\":\"server_is_overloaded\"}}\n\n"},
		{Anthropic, AppError{Class: "overloaded", Message: "Overloaded"},
			"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n"},
		{Anthropic, AppError{Class: "timeout", Message: "line one\nline two"},
			"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"timeout_error\",\"message\":\"line one\\nline two\"}}\n\n"},
		{Gemini, AppError{Class: "overloaded", Message: "The model is overloaded. Please try again later."},
			"data: {\"error\":{\"code\":503,\"message\":\"The model is overloaded. Please try again later.\",\"status\":\"UNAVAILABLE\"}}\n\n"},
		{Gemini, AppError{Class: "rate_limited", Message: "r"},
			"data: {\"error\":{\"code\":429,\"message\":\"r\",\"status\":\"RESOURCE_EXHAUSTED\"}}\n\n"},
	}
	for _, tt := range tests {
		if got := string(StreamErrorEvent(tt.shape, tt.e)); got != tt.want {
			t.Errorf("StreamErrorEvent(%s, %+v)\n got %q\nwant %q", tt.shape, tt.e, got, tt.want)
		}
	}
}

func FuzzParseError(f *testing.F) {
	for _, s := range []string{
		openAIQuotaBody, azureDailyQuotaBody, anthropicSpendBody, anthropicOverloadedBody, gemini429Body,
		geminiBadKeyBody, "[" + geminiBadKeyBody + "]", gemini503Body, llamaCppContextBody, openRouterMidStream,
		`{"error":"x"}`, `{"object":"error","message":"m","code":400}`, `{"type":"response.failed","response":{"error":{"code":"c"}}}`,
		`{"error":{"code":1e999,"details":[{"@type":"google.rpc.RetryInfo","retryDelay":{"seconds":"99999999999999999999"}}]}}`,
		``, `[`, `[[`, `{"error":[]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		info := ParseError(body)
		if !info.Parsed && !reflect.DeepEqual(info, ErrorInfo{}) {
			t.Errorf("not parsed but fields set: %+v", info)
		}
		if info.RetryDelay < 0 {
			t.Errorf("negative RetryDelay %v", info.RetryDelay)
		}
	})
}
