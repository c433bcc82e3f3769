package rewrite

import (
	"bytes"

	"github.com/detour-proxy/detour/rewrite/internal/jsonscan"
)

// inspectResponses classifies one event of a Responses stream. The event
// name is its type (the API sends both); without one, the JSON's type
// member decides. The lifecycle events before any output
// (response.created, response.in_progress, response.queued) and the
// opening of an empty item or part are meta; error and response.failed are
// errors; everything else — deltas, done events, response.completed — is
// content.
func inspectResponses(name string, data []byte) EventKind {
	if len(data) == 0 {
		return EventMeta
	}
	typ := name
	if typ == "" || typ == "message" {
		typ = ""
		it, ok := jsonscan.Scan(data)
		if !ok || !it.IsObject() {
			return EventContent
		}
		for m, more := it.Next(); more; m, more = it.Next() {
			if m.KeyIs("type") {
				v := m.Value()
				if len(v) >= 2 && v[0] == '"' {
					typ = string(v[1 : len(v)-1])
				}
			}
		}
	}
	switch typ {
	case "response.created", "response.in_progress", "response.queued", "response.content_part.added":
		return EventMeta
	case "response.output_item.added":
		// A message or reasoning item opens empty; a function call names
		// its tool, which is content.
		if bytes.Contains(data, []byte(`"type":"function_call"`)) {
			return EventContent
		}
		return EventMeta
	case "error", "response.failed":
		return EventError
	}
	return EventContent
}

// responsesUsageFields are the Responses usage object's counts: input
// includes the cached tokens, output the reasoning ones.
var responsesUsageFields = usageFields{
	input:  []string{"input_tokens"},
	output: []string{"output_tokens"},
}

// extractResponsesUsage reads the usage of a whole response object, or of
// a stream event's response member (response.completed carries it there).
func extractResponsesUsage(data []byte) (Usage, bool) {
	if resp, ok := memberValue(data, "response"); ok && len(resp) > 0 && resp[0] == '{' {
		data = resp
	}
	usage, ok := memberValue(data, "usage")
	if !ok {
		return Usage{}, false
	}
	return usageCounts(usage, &responsesUsageFields)
}
