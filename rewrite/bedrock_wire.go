package rewrite

import (
	"encoding/json"
	"strings"
)

// inspectBedrock classifies a ConverseStream event by its name (the
// :event-type, or the :exception-type of an exception message): the
// opening messageStart carries nothing; every content, stop and metadata
// event is content; an exception is an error.
func inspectBedrock(name string) EventKind {
	switch {
	case name == "messageStart":
		return EventMeta
	case strings.HasSuffix(name, "Exception"):
		return EventError
	}
	return EventContent
}

// bedrockUsageFields are Converse's usage members (inputTokens excludes the
// cache, as Anthropic's input_tokens does).
var bedrockUsageFields = usageFields{
	input:  []string{"inputTokens", "cacheReadInputTokens", "cacheWriteInputTokens"},
	output: []string{"outputTokens"},
}

// parseAWSError reads AWS's JSON error shape, {"__type": …, "message": …}:
// the awsJson protocols send it as is; Bedrock's REST protocol puts the
// type in the x-amzn-ErrorType header instead, and internal/cloud adds it
// to the body as __type (as it does to a ConverseStream exception's
// payload) so that the body alone says what failed. The type may carry a
// namespace ("com.amazon.coral.service#ThrottlingException") or a URI
// suffix ("ThrottlingException:http://internal.amazon.com/…"), both
// dropped.
func parseAWSError(top map[string]json.RawMessage) (ErrorInfo, bool) {
	typ := errorString(top["__type"])
	if typ == "" {
		return ErrorInfo{}, false
	}
	info := ErrorInfo{Type: AWSErrorType(typ), Message: errorString(top["message"])}
	if info.Message == "" {
		info.Message = errorString(top["Message"])
	}
	info = withParsed(info)
	return info, info.Parsed
}

// AWSErrorType returns the bare exception name of an x-amzn-ErrorType
// header or __type member.
func AWSErrorType(t string) string {
	if i := strings.LastIndexByte(t, '#'); i >= 0 {
		t = t[i+1:]
	}
	t, _, _ = strings.Cut(t, ":")
	return strings.TrimSpace(t)
}
