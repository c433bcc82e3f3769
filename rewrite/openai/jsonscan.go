package openai

import (
	"errors"
	"math"
)

// A small JSON reader for the stream decoder's hot path: a stream sends a
// chunk per token, and encoding/json's reflection costs several
// microseconds and a dozen allocations per chunk. The reader validates a
// document once (validJSON), then walks the members of the objects it
// cares about (members, elements) over the already valid bytes. It follows
// encoding/json's rules wherever the decoder relies on them: the last of
// duplicate keys wins, null is "not set", integers must be integer
// literals that fit, strings decode as encoding/json decodes them (see
// unquote). Keys match exactly; encoding/json would also accept keys that
// differ in case, which no server sends.

// maxJSONDepth is encoding/json's nesting limit.
const maxJSONDepth = 10000

var (
	errJSONSyntax = errors.New("invalid JSON")
	errJSONDepth  = errors.New("JSON nested too deeply")
)

// validJSON reports whether b is exactly one valid JSON value, optionally
// surrounded by whitespace.
func validJSON(b []byte) error {
	i, err := scanValue(b, skipSpace(b, 0), 0)
	if err != nil {
		return err
	}
	if skipSpace(b, i) != len(b) {
		return errJSONSyntax
	}
	return nil
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func skipSpace(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}

// scanValue validates the value starting at b[i] and returns the index
// just after it.
func scanValue(b []byte, i, depth int) (int, error) {
	if i >= len(b) {
		return 0, errJSONSyntax
	}
	switch c := b[i]; {
	case c == '{':
		if depth >= maxJSONDepth {
			return 0, errJSONDepth
		}
		i = skipSpace(b, i+1)
		if i < len(b) && b[i] == '}' {
			return i + 1, nil
		}
		for {
			if i >= len(b) || b[i] != '"' {
				return 0, errJSONSyntax
			}
			var err error
			if i, err = scanString(b, i); err != nil {
				return 0, err
			}
			i = skipSpace(b, i)
			if i >= len(b) || b[i] != ':' {
				return 0, errJSONSyntax
			}
			if i, err = scanValue(b, skipSpace(b, i+1), depth+1); err != nil {
				return 0, err
			}
			i = skipSpace(b, i)
			if i >= len(b) {
				return 0, errJSONSyntax
			}
			if b[i] == '}' {
				return i + 1, nil
			}
			if b[i] != ',' {
				return 0, errJSONSyntax
			}
			i = skipSpace(b, i+1)
		}
	case c == '[':
		if depth >= maxJSONDepth {
			return 0, errJSONDepth
		}
		i = skipSpace(b, i+1)
		if i < len(b) && b[i] == ']' {
			return i + 1, nil
		}
		for {
			var err error
			if i, err = scanValue(b, i, depth+1); err != nil {
				return 0, err
			}
			i = skipSpace(b, i)
			if i >= len(b) {
				return 0, errJSONSyntax
			}
			if b[i] == ']' {
				return i + 1, nil
			}
			if b[i] != ',' {
				return 0, errJSONSyntax
			}
			i = skipSpace(b, i+1)
		}
	case c == '"':
		return scanString(b, i)
	case c == '-' || c >= '0' && c <= '9':
		return scanNumber(b, i)
	case c == 't':
		return scanLiteral(b, i, "true")
	case c == 'f':
		return scanLiteral(b, i, "false")
	case c == 'n':
		return scanLiteral(b, i, "null")
	}
	return 0, errJSONSyntax
}

func scanLiteral(b []byte, i int, lit string) (int, error) {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return 0, errJSONSyntax
	}
	return i + len(lit), nil
}

// scanString validates the string starting at b[i] (a quote) and returns
// the index after its closing quote. Bytes that are not valid UTF-8 are
// allowed, as encoding/json allows them (and replaces them on decoding).
func scanString(b []byte, i int) (int, error) {
	i++
	for i < len(b) {
		c := b[i]
		switch {
		case c == '"':
			return i + 1, nil
		case c < 0x20:
			return 0, errJSONSyntax
		case c == '\\':
			if i+1 >= len(b) {
				return 0, errJSONSyntax
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if len(b)-i < 6 {
					return 0, errJSONSyntax
				}
				for _, h := range b[i+2 : i+6] {
					if !isHex(h) {
						return 0, errJSONSyntax
					}
				}
				i += 6
			default:
				return 0, errJSONSyntax
			}
		default:
			i++
		}
	}
	return 0, errJSONSyntax
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// scanNumber validates a number: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
func scanNumber(b []byte, i int) (int, error) {
	if b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	default:
		return 0, errJSONSyntax
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || !isDigit(b[i]) {
			return 0, errJSONSyntax
		}
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || !isDigit(b[i]) {
			return 0, errJSONSyntax
		}
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	return i, nil
}

// skipValid returns the index after the value at b[i], which must be
// valid: it only finds the value's end.
func skipValid(b []byte, i int) int {
	switch b[i] {
	case '"':
		return skipValidString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				i = skipValidString(b, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return i
	}
	for i < len(b) && b[i] != ',' && b[i] != '}' && b[i] != ']' && !isSpace(b[i]) {
		i++
	}
	return i
}

func skipValidString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return i
}

// members iterates over the members of a valid JSON object.
type members struct {
	b []byte
	i int
}

// objectMembers starts iterating over v, a valid JSON value; ok is false
// when v is not an object.
func objectMembers(v []byte) (m members, ok bool) {
	if len(v) == 0 || v[0] != '{' {
		return members{}, false
	}
	return members{b: v, i: 1}, true
}

// next returns the next member's raw key (with its quotes) and value.
func (m *members) next() (key, val []byte, ok bool) {
	i := skipSpace(m.b, m.i)
	if i < len(m.b) && m.b[i] == ',' {
		i = skipSpace(m.b, i+1)
	}
	if i >= len(m.b) || m.b[i] != '"' {
		return nil, nil, false
	}
	end := skipValidString(m.b, i)
	key = m.b[i:end]
	i = skipSpace(m.b, end)
	i = skipSpace(m.b, i+1) // the colon
	end = skipValid(m.b, i)
	m.i = end
	return key, m.b[i:end], true
}

// elements iterates over the elements of a valid JSON array.
type elements struct {
	b []byte
	i int
}

// arrayElements starts iterating over v, a valid JSON value; ok is false
// when v is not an array.
func arrayElements(v []byte) (e elements, ok bool) {
	if len(v) == 0 || v[0] != '[' {
		return elements{}, false
	}
	return elements{b: v, i: 1}, true
}

// next returns the next element.
func (e *elements) next() (val []byte, ok bool) {
	i := skipSpace(e.b, e.i)
	if i < len(e.b) && e.b[i] == ',' {
		i = skipSpace(e.b, i+1)
	}
	if i >= len(e.b) || e.b[i] == ']' {
		return nil, false
	}
	end := skipValid(e.b, i)
	e.i = end
	return e.b[i:end], true
}

// keyIs reports whether the raw key (with quotes) is name. A key written
// with escapes is decoded first, as encoding/json does.
func keyIs(key []byte, name string) bool {
	if len(key) == len(name)+2 && string(key[1:len(key)-1]) == name {
		return true
	}
	for _, c := range key {
		if c == '\\' {
			s, err := unquote(key)
			return err == nil && s == name
		}
	}
	return false
}

// isNull reports whether a valid value is null (or absent).
func isNull(v []byte) bool { return len(v) == 0 || v[0] == 'n' }

// jsonStringOrNull decodes a value that must be a string or null.
func jsonStringOrNull(v []byte) (string, error) {
	switch {
	case isNull(v):
		return "", nil
	case v[0] == '"':
		return unquote(v)
	}
	return "", errJSONType
}

var errJSONType = errors.New("JSON value of the wrong type")

// jsonInt decodes a value that must be an integer literal that fits in an
// int64, or null (ok false), as encoding/json decodes into an int.
func jsonInt(v []byte) (n int64, ok bool, err error) {
	if isNull(v) {
		return 0, false, nil
	}
	neg := v[0] == '-'
	digits := v
	if neg {
		digits = v[1:]
	}
	if len(digits) == 0 {
		return 0, false, errJSONType
	}
	var u uint64
	for _, c := range digits {
		if !isDigit(c) {
			return 0, false, errJSONType // a string, a fraction, an exponent, true…
		}
		if u > (math.MaxUint64-9)/10 {
			return 0, false, errJSONType
		}
		u = u*10 + uint64(c-'0')
	}
	switch {
	case !neg && u > math.MaxInt64, neg && u > math.MaxInt64+1:
		return 0, false, errJSONType
	case neg:
		return -int64(u), true, nil
	}
	return int64(u), true, nil
}
