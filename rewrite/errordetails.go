package rewrite

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"time"
)

// GeminiErrorDetails returns the error.details array of a Gemini
// google.rpc.Status body (also in its array-wrapped form), for an error
// detour reports in the app's Gemini envelope in the vendor's place: the
// QuotaFailure, Help and ErrorInfo messages tell the app which quota ran out
// and where to read about it, and are kept verbatim. It returns nil when the
// body is not a Gemini error or has no details.
//
// retryDelay, when positive, replaces the retryDelay of every
// google.rpc.RetryInfo (in whole seconds, rounded up): detour may know
// better than the vendor when to come back — it keeps an upstream out of its
// chains for the length of its cooldown, so the vendor's "26s" on a daily
// quota would only send the app back to the same error — and the details
// must say what the retry-after header says.
func GeminiErrorDetails(body []byte, retryDelay time.Duration) json.RawMessage {
	if len(body) > maxParsedErrorBody {
		return nil
	}
	body = bytes.TrimSpace(body)
	if len(body) > 0 && body[0] == '[' {
		var arr []json.RawMessage
		if json.Unmarshal(body, &arr) != nil || len(arr) == 0 {
			return nil
		}
		body = arr[0]
	}
	var env struct {
		Error *struct {
			Details []json.RawMessage `json:"details"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &env) != nil || env.Error == nil || len(env.Error.Details) == 0 {
		return nil
	}
	out := make([]json.RawMessage, 0, len(env.Error.Details))
	for _, d := range env.Error.Details {
		var fields map[string]json.RawMessage
		if json.Unmarshal(d, &fields) != nil {
			// Not a google.protobuf.Any: no client can read it.
			continue
		}
		t := errorString(fields["@type"])
		if retryDelay > 0 && t[strings.LastIndexByte(t, '/')+1:] == "google.rpc.RetryInfo" {
			fields["retryDelay"] = json.RawMessage(strconv.Quote(strconv.FormatInt(RetryAfterSeconds(retryDelay), 10) + "s"))
			d, _ = json.Marshal(fields) // map of raw JSON values: cannot fail
		}
		out = append(out, d)
	}
	if len(out) == 0 {
		return nil
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil
	}
	return b
}

// RetryAfterSeconds is d as the whole seconds of a retry-after header,
// rounded up: an app told to wait less than the wait detour has in mind
// would come back too early.
func RetryAfterSeconds(d time.Duration) int64 {
	return int64((d + time.Second - 1) / time.Second)
}
