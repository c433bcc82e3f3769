package rewrite

import "github.com/detour-proxy/detour/rewrite/internal/jsonscan"

// ExtractCachedInput reads, from one stream event's data or a whole
// non-stream body of the given shape, how many of the prompt tokens the
// vendor reports as read from its prompt cache, which vendors bill at a
// lower price: OpenAI's usage.prompt_tokens_details.cached_tokens,
// Anthropic's cache_read_input_tokens (in message_start's message, or at
// the top of a message), Gemini's usageMetadata.cachedContentTokenCount.
// They are part of Usage.Input. ok is false when data reports none.
//
// It is apart from ExtractUsage so that Usage keeps its two fields (a
// vendor that reports no cache costs nothing more: the same byte search
// rejects most events first). A stream's reports merge like Usage's: the
// last non-zero one wins.
func ExtractCachedInput(shape Shape, data []byte) (n int64, ok bool) {
	if !mayHoldUsage(data) {
		return 0, false
	}
	usage, message, ok := usageMembers(shape, data)
	if !ok {
		return 0, false
	}
	return cachedOf(shape, usage, message)
}

// cachedOf reads the cached-input count from the members usageMembers
// found.
func cachedOf(shape Shape, usage, message []byte) (n int64, ok bool) {
	if message != nil {
		if inner, found := memberValue(message, "usage"); found {
			usage = inner
		}
	}
	var v []byte
	ok = true
	switch shape {
	case OpenAI:
		details, found := memberValue(usage, "prompt_tokens_details")
		if !found {
			return 0, false
		}
		v, ok = memberValue(details, "cached_tokens")
	case Anthropic:
		v, ok = memberValue(usage, "cache_read_input_tokens")
	case Gemini:
		v, ok = memberValue(usage, "cachedContentTokenCount")
	}
	if !ok {
		return 0, false
	}
	n, ok = jsonscan.Int(v)
	return n, ok && n > 0
}

// ExtractUsageAndCached is ExtractUsage and ExtractCachedInput of the same
// data, for the caller that wants both (every answer and stream event
// detour forwards), with the data scanned once rather than twice.
func ExtractUsageAndCached(shape Shape, data []byte) (u Usage, ok bool, cached int64, cachedOK bool) {
	if !mayHoldUsage(data) {
		return Usage{}, false, 0, false
	}
	if shape == OpenAIResponses {
		// Its usage is read apart (extractResponsesUsage).
		u, ok = extractResponsesUsage(data)
		cached, cachedOK = ExtractCachedInput(shape, data)
		return u, ok, cached, cachedOK
	}
	usage, message, whole := usageMembers(shape, data)
	if !whole {
		return Usage{}, false, 0, false
	}
	u, ok = usageOf(shape, usage, message)
	cached, cachedOK = cachedOf(shape, usage, message)
	return u, ok, cached, cachedOK
}
