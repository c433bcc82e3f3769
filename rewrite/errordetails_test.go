package rewrite

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestGeminiErrorDetails(t *testing.T) {
	t.Parallel()
	const (
		quota = `{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaMetric":"generativelanguage.googleapis.com/generate_content_free_tier_input_token_count","quotaId":"GenerateContentInputTokensPerModelPerMinute-FreeTier","quotaDimensions":{"location":"global","model":"gemini-2.5-flash"},"quotaValue":"250000"}]}`
		help  = `{"@type":"type.googleapis.com/google.rpc.Help","links":[{"description":"Learn more about Gemini API quotas","url":"https://ai.google.dev/gemini-api/docs/rate-limits"}]}`
	)
	tests := []struct {
		name  string
		body  string
		delay time.Duration
		want  string
	}{
		{"kept verbatim without a delay of detour's", gemini429Body, 0,
			`[` + quota + `,` + help + `,{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"26s"}]`},
		{"RetryInfo says detour's delay, rounded up", gemini429Body, 599*time.Second + time.Millisecond,
			`[` + quota + `,` + help + `,{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"600s"}]`},
		{"array-wrapped Status", "[" + geminiBadKeyBody + "]", 0,
			`[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"API_KEY_INVALID","domain":"googleapis.com","metadata":{"service":"generativelanguage.googleapis.com"}}]`},
		{"no details", gemini503Body, time.Minute, ""},
		{"not Gemini", openAIQuotaBody, time.Minute, ""},
		{"not JSON", "<html>", time.Minute, ""},
		{"a detail that is not an object is dropped", `{"error":{"code":429,"details":[7,` + help + `]}}`, 0, `[` + help + `]`},
	}
	for _, tt := range tests {
		got := string(GeminiErrorDetails([]byte(tt.body), tt.delay))
		if got != tt.want {
			t.Errorf("%s:\n got %s\nwant %s", tt.name, got, tt.want)
		}
	}
}

// TestErrorBodyCarriesGeminiDetails: the details reach the Gemini envelope
// whole, and no other shape's (they have no field for them).
func TestErrorBodyCarriesGeminiDetails(t *testing.T) {
	t.Parallel()
	details := GeminiErrorDetails([]byte(gemini429Body), 0)
	e := AppError{Class: "quota_exhausted", Message: "m"}
	status, body := ErrorBodyWithDetails(Gemini, e, details)
	var got struct {
		Error struct {
			Code    int              `json:"code"`
			Status  string           `json:"status"`
			Details []map[string]any `json:"details"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	if status != 429 || got.Error.Code != 429 || got.Error.Status != "RESOURCE_EXHAUSTED" || len(got.Error.Details) != 3 {
		t.Errorf("%d %s; want 429 RESOURCE_EXHAUSTED with 3 details", status, body)
	}
	for _, shape := range []Shape{OpenAI, Anthropic} {
		if _, body := ErrorBodyWithDetails(shape, e, details); strings.Contains(string(body), "QuotaFailure") {
			t.Errorf("%s envelope carries Gemini details: %s", shape, body)
		}
	}
	if _, body := ErrorBodyWithDetails(Gemini, AppError{Class: "overloaded"}, json.RawMessage(`{"not":"an array"}`)); strings.Contains(string(body), "details") {
		t.Errorf("details that are not an array were sent: %s", body)
	}
}

func TestRetryAfterSeconds(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]int64{0: 0, time.Millisecond: 1, time.Second: 1, 1500 * time.Millisecond: 2, 10 * time.Minute: 600} {
		if got := RetryAfterSeconds(d); got != want {
			t.Errorf("RetryAfterSeconds(%v) = %d; want %d", d, got, want)
		}
	}
}
