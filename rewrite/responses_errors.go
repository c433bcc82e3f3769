package rewrite

import "strconv"

// ResponsesErrorCode returns the code and message of e as the Responses
// API spells them in its stream's error event and in a failed response's
// error: OpenAI's error code where it has one (rate_limit_exceeded,
// insufficient_quota…), else its error type (server_error…).
func ResponsesErrorCode(e AppError) (code, message string) {
	v := vendorErrorFor(OpenAI, e)
	if v.code != "" {
		return v.code, v.message
	}
	return v.typ, v.message
}

// AppendResponsesErrorEvent appends e as the Responses stream's error
// event (docs/vendors.md#openai-responses), with sequence number seq:
//
//	event: error
//	data: {"type":"error","sequence_number":N,"code":…,"message":…,"param":null}
//
// openai-go yields it as a ResponseStreamEventUnion of type "error" (its
// stream treats only a top-level "error" member as a transport error).
func AppendResponsesErrorEvent(dst []byte, e AppError, seq int64) []byte {
	code, msg := ResponsesErrorCode(e)
	dst = append(dst, "event: error\ndata: {\"type\":\"error\",\"sequence_number\":"...)
	dst = strconv.AppendInt(dst, seq, 10)
	dst = append(dst, `,"code":`...)
	dst = AppendJSONString(dst, code)
	dst = append(dst, `,"message":`...)
	dst = AppendJSONString(dst, msg)
	return append(dst, ",\"param\":null}\n\n"...)
}
