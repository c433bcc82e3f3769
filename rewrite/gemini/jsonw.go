package gemini

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"

	"github.com/detour-proxy/detour/rewrite"
)

// appendString appends s to dst as a JSON string (rewrite.AppendJSONString).
func appendString(dst []byte, s string) []byte { return rewrite.AppendJSONString(dst, s) }

// object is a JSON object that keeps its keys in order, so that a schema
// translated from one vendor to another keeps the property order the app
// wrote (models generate properties in schema order; Gemini's default order
// is alphabetical unless propertyOrdering says otherwise).
type object struct {
	keys []string
	vals []any // *object, []any, json.Number, string, bool or nil
}

// get returns the value of key and whether it is present.
func (o *object) get(key string) (any, bool) {
	for i, k := range o.keys {
		if k == key {
			return o.vals[i], true
		}
	}
	return nil, false
}

// set sets key to v, in place when present, else at the end.
func (o *object) set(key string, v any) {
	for i, k := range o.keys {
		if k == key {
			o.vals[i] = v
			return
		}
	}
	o.keys = append(o.keys, key)
	o.vals = append(o.vals, v)
}

// errTrailing is returned by parseOrdered for data after the value.
var errTrailing = errors.New("invalid JSON: data after the top-level value")

// parseOrdered parses raw into an ordered tree: objects become *object,
// numbers json.Number (kept exactly as written). encoding/json's Decoder
// bounds the nesting depth.
func parseOrdered(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	v, err := parseValue(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errTrailing
	}
	return v, nil
}

func parseValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			o := &object{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k, _ := kt.(string)
				v, err := parseValue(dec)
				if err != nil {
					return nil, err
				}
				// As with encoding/json, the last of duplicate keys wins.
				o.set(k, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return o, nil
		case '[':
			a := []any{}
			for dec.More() {
				v, err := parseValue(dec)
				if err != nil {
					return nil, err
				}
				a = append(a, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return a, nil
		}
		return nil, errors.New("invalid JSON: unexpected delimiter")
	}
	return tok, nil
}

// appendOrdered appends v, a tree from parseOrdered, as compact JSON.
func appendOrdered(dst []byte, v any) []byte {
	switch t := v.(type) {
	case *object:
		dst = append(dst, '{')
		for i, k := range t.keys {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendString(dst, k)
			dst = append(dst, ':')
			dst = appendOrdered(dst, t.vals[i])
		}
		return append(dst, '}')
	case []any:
		dst = append(dst, '[')
		for i, e := range t {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendOrdered(dst, e)
		}
		return append(dst, ']')
	case string:
		return appendString(dst, t)
	case json.Number:
		return append(dst, t...)
	case bool:
		return strconv.AppendBool(dst, t)
	case float64:
		return strconv.AppendFloat(dst, t, 'g', -1, 64)
	case int:
		return strconv.AppendInt(dst, int64(t), 10)
	}
	return append(dst, "null"...)
}

// compactObject returns raw compacted when it is a JSON object, else nil.
// Tool-call arguments and function responses must be objects on the
// Gemini wire (go-genai decodes them into map[string]any).
func compactObject(raw []byte) []byte {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' || !json.Valid(raw) {
		return nil
	}
	var buf bytes.Buffer
	buf.Grow(len(raw))
	if json.Compact(&buf, raw) != nil {
		return nil
	}
	return buf.Bytes()
}
