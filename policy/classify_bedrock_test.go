package policy

import (
	"net/http"
	"testing"
	"time"

	"github.com/detour-proxy/detour/rewrite"
)

// TestClassifyBedrock: Bedrock's error answers as detour reads them (the
// x-amzn-ErrorType added to the body as __type by internal/cloud) and its
// in-stream exceptions, with the bodies of docs/vendors.md#amazon-bedrock-upstream.
func TestClassifyBedrock(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		status   int
		body     string
		inStream bool
		want     Class
	}{
		{429, `{"__type":"ThrottlingException","message":"Too many requests, please wait before trying again."}`, false, ClassRateLimited},
		{400, `{"__type":"ServiceQuotaExceededException","message":"Your request exceeds the service quota for your account. You can view your quotas at Viewing service quotas. You can resubmit your request later."}`, false, ClassQuotaExhausted},
		{429, `{"__type":"ModelNotReadyException","message":"Model is not ready to serve inference requests. The AWS SDK will automatically retry the operation up to 5 times."}`, false, ClassOverloaded},
		{408, `{"__type":"ModelTimeoutException","message":"Model has timed out in processing the request. Try your request again."}`, false, ClassTimeout},
		{424, `{"__type":"ModelErrorException","message":"Received error from model"}`, false, ClassServerError},
		{400, `{"__type":"ValidationException","message":"Input is too long for requested model."}`, false, ClassContextTooLong},
		{400, `{"__type":"ValidationException","message":"The provided model identifier is invalid."}`, false, ClassInvalidRequest},
		{404, `{"__type":"ResourceNotFoundException","message":"Model not found."}`, false, ClassInvalidRequest},
		{403, `{"__type":"AccessDeniedException","message":"You don't have access to the model with the specified model ID."}`, false, ClassAuth},
		{403, `{"__type":"UnrecognizedClientException","message":"The security token included in the request is invalid."}`, false, ClassAuth},
		{503, `{"__type":"ServiceUnavailableException","message":"Bedrock is unable to process your request."}`, false, ClassOverloaded},
		{200, `{"__type":"throttlingException","message":"Too many tokens, please wait before trying again."}`, true, ClassRateLimited},
		{200, `{"__type":"modelStreamErrorException","message":"Received error from model","originalStatusCode":500}`, true, ClassServerError},
		{200, `{"__type":"serviceUnavailableException","message":"x"}`, true, ClassOverloaded},
		{200, `{"__type":"validationException","message":"x"}`, true, ClassInvalidRequest},
	} {
		o := Outcome{Shape: rewrite.Bedrock, Status: tc.status, Body: []byte(tc.body), InStream: tc.inStream, Header: http.Header{}}
		if tc.inStream {
			o.Status = 200
		}
		if v := Classify(o, now); v.Class != tc.want {
			t.Errorf("%d %s: class %s (%s); want %s", tc.status, tc.body, v.Class, v.Reason, tc.want)
		}
	}
}

// TestClassifyAzureContentFilterUpstream: the Azure fake's prompt-filter
// body is content_filter, as it is for any OpenAI-shaped upstream.
func TestClassifyAzureContentFilterUpstream(t *testing.T) {
	t.Parallel()
	body := `{"error":{"message":"The response was filtered due to the prompt triggering Azure OpenAI's content management policy. Please modify your prompt and retry.","type":null,"param":"prompt","code":"content_filter","status":400,"innererror":{"code":"ResponsibleAIPolicyViolation"}}}`
	if v := Classify(Outcome{Shape: rewrite.OpenAI, Status: 400, Body: []byte(body)}, time.Now()); v.Class != ClassContentFilter {
		t.Errorf("class %s", v.Class)
	}
}
