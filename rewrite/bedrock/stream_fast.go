package bedrock

import "github.com/detour-proxy/detour/rewrite/internal/jsonscan"

// fastTextDelta reads a contentBlockDelta whose delta is text alone,
// {"contentBlockIndex":N,"delta":{"text":"…"},"p":"…"} in any member order,
// with an allocation-free scan instead of encoding/json: the text deltas
// are almost every event of a stream. ok is false for anything else (a
// tool or reasoning delta, invalid JSON), which the full decode handles.
func fastTextDelta(data []byte) (text string, ok bool) {
	it, isContainer := jsonscan.Scan(data)
	if !isContainer || !it.IsObject() {
		return "", false
	}
	var delta []byte
	for {
		m, more := it.Next()
		if !more {
			break
		}
		if m.KeyIs("delta") {
			delta = m.Value()
		}
	}
	if it.End() != nil || delta == nil {
		return "", false
	}
	dit, isObj := jsonscan.Object(delta)
	if !isObj {
		return "", false
	}
	var value []byte
	for {
		m, more := dit.Next()
		if !more {
			break
		}
		if !m.KeyIs("text") || value != nil {
			return "", false
		}
		value = m.Value()
	}
	if len(value) == 0 || value[0] != '"' {
		return "", false
	}
	return jsonscan.Unquote(value)
}
