package rewrite

import "github.com/detour-proxy/detour/rewrite/internal/jsonscan"

// ExtractAnswerUsage is ExtractUsageAndCached for a whole non-stream
// answer already known to be valid JSON: one policy.Classify accepted,
// since it checks every 2xx answer with ValidJSON. The walk then only
// finds where members end (a long string is skipped with a byte search)
// instead of validating the answer a second time. On data that is not
// valid JSON its results mean nothing, but it does not panic.
func ExtractAnswerUsage(shape Shape, data []byte) (u Usage, ok bool, cached int64, cachedOK bool) {
	if shape == OpenAIResponses || !mayHoldUsage(data) {
		return ExtractUsageAndCached(shape, data)
	}
	it, isObject := jsonscan.Object(data)
	usage, message, whole := usageMembersOf(shape, &it, isObject)
	if !whole {
		return Usage{}, false, 0, false
	}
	u, ok = usageOf(shape, usage, message)
	cached, cachedOK = cachedOf(shape, usage, message)
	return u, ok, cached, cachedOK
}
