package responses

import (
	"bytes"
	"unicode/utf8"

	"github.com/detour-proxy/detour/rewrite/internal/jsonscan"
	"github.com/detour-proxy/detour/rewrite/ir"
)

// Most events of a Responses stream are deltas: response.output_text.delta
// and response.function_call_arguments.delta. Decoding each with
// encoding/json into the event struct cost seven allocations an event;
// fastDelta reads the few members a delta has with jsonscan instead, and
// costs the delta's string only. Anything it does not expect (another
// member holding an object, an escaped item id) goes the slow way.

// deltaEvent is what fastDelta reads.
type deltaEvent struct {
	typ         []byte
	itemID      []byte // without quotes; never escaped
	outputIndex int
	delta       string
}

// fastDelta decodes a delta event's data; ok is false when it is not the
// plain layout the API sends.
func fastDelta(data []byte) (e deltaEvent, ok bool) {
	// Scan, not Object: the data comes from the upstream unvalidated, and
	// Scan validates each value as it is skipped (FuzzFastDelta found
	// Object's walk reaching AppendUnquoted with a cut string).
	it, isContainer := jsonscan.Scan(data)
	if !isContainer || !it.IsObject() {
		return e, false
	}
	for m, more := it.Next(); more; m, more = it.Next() {
		v := m.Value()
		switch {
		case m.KeyIs("type"):
			if !plainString(v) {
				return e, false
			}
			e.typ = v[1 : len(v)-1]
		case m.KeyIs("item_id"):
			if !plainString(v) {
				return e, false
			}
			e.itemID = v[1 : len(v)-1]
		case m.KeyIs("output_index"):
			n, isInt := jsonscan.Int(v)
			if !isInt {
				return e, false
			}
			e.outputIndex = int(n)
		case m.KeyIs("delta"):
			if len(v) == 0 || v[0] != '"' {
				return e, false
			}
			e.delta = jsonscan.String(v)
		}
	}
	return e, it.End() == nil && e.typ != nil
}

// plainString reports whether v is a JSON string whose bytes are its
// value: no escapes, valid UTF-8 (encoding/json would replace invalid
// bytes).
func plainString(v []byte) bool {
	return len(v) >= 2 && v[0] == '"' && bytes.IndexByte(v, '\\') < 0 && utf8.Valid(v)
}

// isDeltaName reports whether an event name is one fastDelta reads.
func isDeltaName(name string) bool {
	return name == "response.output_text.delta" || name == "response.function_call_arguments.delta"
}

// decodeDelta turns a delta read by fastDelta into IR events.
func (d *StreamDecoder) decodeDelta(e deltaEvent) []ir.StreamEvent {
	if e.delta == "" {
		return nil
	}
	out := d.out[:0]
	switch string(e.typ) {
	case "response.output_text.delta":
		out = append(out, ir.StreamEvent{Kind: ir.StreamText, Text: e.delta})
	case "response.function_call_arguments.delta":
		i := d.callBytes(e.itemID, e.outputIndex)
		if i < 0 {
			return nil
		}
		d.calls[i].args = true
		out = append(out, ir.StreamEvent{Kind: ir.StreamToolArgs, Index: i, Text: e.delta})
	}
	return out
}

// callBytes is call for an item id given as bytes (compared without a
// copy).
func (d *StreamDecoder) callBytes(itemID []byte, output int) int {
	for i := len(d.calls) - 1; i >= 0; i-- {
		c := &d.calls[i]
		if (len(itemID) > 0 && c.itemID == string(itemID)) || (len(itemID) == 0 && c.output == output) {
			return i
		}
	}
	return -1
}
