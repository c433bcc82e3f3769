package anthropic

import (
	"bytes"

	"github.com/detour-proxy/detour/rewrite/internal/jsonscan"
)

// The deltas make up nearly every event of a stream, and the API writes
// them in one fixed layout:
//
//	{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi!"}}
//
// fastDelta reads exactly that layout without encoding/json, which costs
// about nine allocations per event; anything else (other field order,
// spaces, extra fields) goes the general way.
var (
	deltaHead  = []byte(`{"type":"content_block_delta","index":`)
	deltaMid   = []byte(`,"delta":{"type":"`)
	deltaKinds = [...]struct {
		typ  string
		tail []byte // the rest of the delta up to its string value
	}{
		{"text_delta", []byte(`text_delta","text":`)},
		{"input_json_delta", []byte(`input_json_delta","partial_json":`)},
		{"thinking_delta", []byte(`thinking_delta","thinking":`)},
	}
)

// maxFastIndex bounds the index digits fastDelta reads (maxBlocks fits).
const maxFastIndex = 6

// fastDelta decodes a text, input_json or thinking delta written in the
// API's own layout. ok is false for anything else, which the caller then
// decodes with encoding/json; when ok is true the result is what
// encoding/json would have produced.
func fastDelta(data []byte) (index int, typ, text string, ok bool) {
	rest, ok := bytes.CutPrefix(data, deltaHead)
	if !ok {
		return 0, "", "", false
	}
	n := 0
	for n < len(rest) && n <= maxFastIndex && rest[n] >= '0' && rest[n] <= '9' {
		index = index*10 + int(rest[n]-'0')
		n++
	}
	if n == 0 || n > maxFastIndex || (n > 1 && rest[0] == '0') {
		return 0, "", "", false
	}
	if rest, ok = bytes.CutPrefix(rest[n:], deltaMid); !ok {
		return 0, "", "", false
	}
	for _, k := range deltaKinds {
		if v, found := bytes.CutPrefix(rest, k.tail); found {
			v, found = bytes.CutSuffix(v, []byte("}}"))
			if !found {
				return 0, "", "", false
			}
			text, ok = jsonscan.Unquote(v)
			return index, k.typ, text, ok
		}
	}
	return 0, "", "", false
}
