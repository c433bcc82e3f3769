package rewrite

import (
	"bytes"

	"github.com/detour-proxy/detour/rewrite/internal/jsonscan"
	"github.com/detour-proxy/detour/rewrite/sse"
)

// InspectCommitted classifies one stream event after the commit point,
// where content and meta no longer differ: what InspectEvent says of the
// event, with EventMeta reported as EventContent. The stream is forwarded
// event by event and only its end (EventDone) and the vendor's in-stream
// error (EventError) change what is done with an event.
//
// It is InspectEvent without the look into the content: an OpenAI chunk's
// choices and deltas, a Gemini chunk's candidates, scanned once more each
// to tell content from meta, were most of a relayed event's cost. An
// error member is found by the same scan of the event's top-level members
// as InspectEvent's, so that the two agree on every event, well-formed or
// not.
func InspectCommitted(shape Shape, ev sse.Event) EventKind {
	if ev.Comment {
		return EventContent
	}
	var k EventKind
	switch shape {
	case OpenAI:
		k = committedOpenAI(bytes.TrimSpace(ev.Data))
	case Gemini:
		k = committedGemini(ev)
	default:
		k = InspectEvent(shape, ev)
	}
	if k == EventMeta {
		return EventContent
	}
	return k
}

// committedOpenAI is inspectOpenAI without the choices' content.
func committedOpenAI(data []byte) EventKind {
	if bytes.Equal(data, openAIDoneMarker) {
		return EventDone
	}
	return topLevelError(data)
}

// committedGemini is inspectGemini without the candidates' content, for
// an object; an array (errors wrapped in one) is left to inspectGemini.
func committedGemini(ev sse.Event) EventKind {
	data := bytes.TrimSpace(ev.Data)
	if len(data) > 0 && data[0] == '{' {
		return topLevelError(data)
	}
	return InspectEvent(Gemini, ev)
}

var (
	errorKey      = []byte(`"error"`)
	unicodeEscape = []byte(`\u`)
)

// topLevelError reports EventError when the JSON object data has a
// member "error" that is not empty, found before the scan of its members
// ends (at the object's end or where it stops being JSON), and
// EventContent otherwise.
func topLevelError(data []byte) EventKind {
	if !bytes.Contains(data, errorKey) && !bytes.Contains(data, unicodeEscape) {
		// No member can be named error: its name would be there as is,
		// or hold a \u escape (none of its letters has a short one).
		// Most events are judged here, without a scan.
		return EventContent
	}
	it, ok := jsonscan.Scan(data)
	if !ok || !it.IsObject() {
		return EventContent
	}
	for {
		m, ok := it.Next()
		if !ok {
			return EventContent
		}
		if m.KeyIs("error") && !isEmptyJSONValue(m.Value()) {
			return EventError
		}
	}
}
