package rewrite

import "github.com/detour-proxy/detour/rewrite/internal/jsonscan"

// ExtractAnswerUsage is ExtractUsageAndCached for a whole non-stream
// answer already known to be valid JSON: one policy.Classify accepted,
// since it checks every 2xx answer with ValidJSON. The walk then only
// finds where members end (a long string is skipped with a byte search)
// instead of validating the answer a second time. On data that is not
// valid JSON its results mean nothing, but it does not panic.
func ExtractAnswerUsage(shape Shape, data []byte) (u Usage, ok bool, cached int64, cachedOK bool) {
	if shape == OpenAI {
		// OpenAI, and the servers that speak its shape, put the usage
		// last, after the choices, which are most of the answer: read
		// from the end, it is found without walking past them. The last
		// member wins over any earlier "usage", as in the walk.
		if key, usage, escaped, found := jsonscan.LastMember(data); found && !escaped && string(key) == "usage" {
			return openAIAnswerUsage(usage)
		}
	}
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

// openAIAnswerUsage is usageOf and cachedOf for an OpenAI usage object
// that is part of valid JSON, in one walk that does not validate it again:
// the token counts, and the cached part of the prompt
// (prompt_tokens_details.cached_tokens). As there, the last of duplicate
// members wins and a count that is not an integer counts 0.
func openAIAnswerUsage(usage []byte) (u Usage, ok bool, cached int64, cachedOK bool) {
	it, isObj := jsonscan.Object(usage)
	if !isObj {
		return Usage{}, false, 0, false
	}
	var details []byte
	hasDetails := false
	for m, more := it.Next(); more; m, more = it.Next() {
		switch {
		case m.KeyIs("prompt_tokens"):
			u.Input, _ = jsonscan.Int(m.Value())
		case m.KeyIs("completion_tokens"):
			u.Output, _ = jsonscan.Int(m.Value())
		case m.KeyIs("prompt_tokens_details"):
			details, hasDetails = m.Value(), true
		}
	}
	if !hasDetails {
		return u, true, 0, false
	}
	dt, isObj := jsonscan.Object(details)
	if !isObj {
		return u, true, 0, false
	}
	var v []byte
	found := false
	for m, more := dt.Next(); more; m, more = dt.Next() {
		if m.KeyIs("cached_tokens") {
			v, found = m.Value(), true
		}
	}
	if !found {
		return u, true, 0, false
	}
	cached, cachedOK = jsonscan.Int(v)
	return u, true, cached, cachedOK && cached > 0
}
