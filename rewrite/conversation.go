package rewrite

import "github.com/detour-proxy/detour/rewrite/internal/jsonscan"

// ConversationStart returns the bytes that identify a conversation in a
// request body of shape: its messages ("messages"; Gemini "contents"; an
// OpenAI Responses "input") from the first up to and including the first
// user turn, as the app wrote them. Every later turn of the same
// conversation repeats them, so a hash of them (with the app's credential)
// keeps a conversation on one upstream. A system prompt alone would not do:
// it is the same for every conversation of an app. The result is a slice
// of body (nothing is copied); nil when the body has no such array. body
// must be valid JSON (PeekRequest checked it).
func ConversationStart(shape Shape, body []byte) []byte {
	it, ok := jsonscan.Object(body)
	if !ok {
		return nil
	}
	var msgs []byte
	for m, ok := it.Next(); ok; m, ok = it.Next() {
		switch {
		case shape == Gemini && m.KeyIs("contents"),
			shape != Gemini && m.KeyIs("messages"),
			shape == OpenAI && m.KeyIs("input"):
			msgs = m.Value()
		}
	}
	if len(msgs) == 0 {
		return nil
	}
	if msgs[0] == '"' {
		// Responses' input as one string: the conversation's first turn.
		return msgs
	}
	arr, ok := jsonscan.Array(msgs)
	if !ok {
		return nil
	}
	end := 0
	for el, ok := arr.Next(); ok; el, ok = arr.Next() {
		_, end = el.ValueSpan()
		if isUserTurn(el.Value()) {
			break
		}
	}
	if end == 0 {
		return nil
	}
	return msgs[:end]
}

// isUserTurn reports whether a message object's "role" is "user".
func isUserTurn(msg []byte) bool {
	it, ok := jsonscan.Object(msg)
	if !ok {
		return false
	}
	for m, ok := it.Next(); ok; m, ok = it.Next() {
		if m.KeyIs("role") {
			return string(m.Value()) == `"user"`
		}
	}
	return false
}
