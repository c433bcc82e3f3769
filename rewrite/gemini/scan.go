package gemini

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// Stream chunks are decoded without encoding/json's reflection: a chunk is
// checked once with json.Valid (which allocates nothing), and then walked
// with the helpers below, which assume valid JSON and build only the
// strings the IR events carry. A text chunk then costs two allocations (its
// text and the event slice) instead of eighteen, and a third of the time
// (BenchmarkStreamDecodeText). Keys are matched exactly, as Gemini spells
// them; FuzzStreamChunkOracle holds this path to the encoding/json one.

// skipSpace returns the index of the first non-space byte at or after i.
func skipSpace(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// skipString returns the index just past the string starting at the quote
// b[i].
func skipString(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return len(b)
}

// skipValue returns the index just past the JSON value starting at b[i].
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return i
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				j = skipString(b, j) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1
				}
			}
		}
		return len(b)
	}
	j := i
	for j < len(b) {
		switch b[j] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return j
		}
		j++
	}
	return j
}

// objectIter walks the members of a JSON object (valid JSON) without
// allocating: a callback would make what it captures escape.
type objectIter struct {
	b []byte
	i int
}

// iterObject returns an iterator over obj's members; one over nothing when
// obj is not an object.
func iterObject(obj []byte) objectIter {
	i := skipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return objectIter{}
	}
	return objectIter{b: obj, i: i + 1}
}

// next returns the next member's raw key, without its quotes, and raw value.
func (it *objectIter) next() (key, val []byte, ok bool) {
	b := it.b
	i := skipSpace(b, it.i)
	if i >= len(b) || b[i] != '"' {
		return nil, nil, false
	}
	kEnd := skipString(b, i)
	key = b[i+1 : kEnd-1]
	i = skipSpace(b, kEnd)
	i = skipSpace(b, i+1) // past ':'
	vEnd := skipValue(b, i)
	val = b[i:vEnd]
	i = skipSpace(b, vEnd)
	if i < len(b) && b[i] == ',' {
		i++
	} else {
		i = len(b)
	}
	it.i = i
	return key, val, true
}

// arrayIter walks the elements of a JSON array (valid JSON).
type arrayIter struct {
	b []byte
	i int
}

// iterArray returns an iterator over arr's elements; one over nothing when
// arr is not an array.
func iterArray(arr []byte) arrayIter {
	i := skipSpace(arr, 0)
	if i >= len(arr) || arr[i] != '[' {
		return arrayIter{}
	}
	return arrayIter{b: arr, i: i + 1}
}

// next returns the next element's raw value.
func (it *arrayIter) next() (val []byte, ok bool) {
	b := it.b
	i := skipSpace(b, it.i)
	if i >= len(b) || b[i] == ']' {
		return nil, false
	}
	end := skipValue(b, i)
	val = b[i:end]
	i = skipSpace(b, end)
	if i < len(b) && b[i] == ',' {
		i++
	} else {
		i = len(b)
	}
	it.i = i
	return val, true
}

// keyIs reports whether the raw key equals name.
func keyIs(key []byte, name string) bool {
	if bytes.IndexByte(key, '\\') < 0 {
		return string(key) == name
	}
	var k string
	quoted := make([]byte, 0, len(key)+2)
	quoted = append(append(append(quoted, '"'), key...), '"')
	return json.Unmarshal(quoted, &k) == nil && k == name
}

// str returns the raw value as a string when it is a JSON string, else "".
// A plain string costs one allocation; escapes and invalid UTF-8 go through
// encoding/json, so the result is what json.Unmarshal gives.
func str(val []byte) string {
	if len(val) < 2 || val[0] != '"' {
		return ""
	}
	inner := val[1 : len(val)-1]
	if bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
		return string(inner)
	}
	var s string
	_ = json.Unmarshal(val, &s)
	return s
}

// integer returns the raw value as an int64 when it is a number that
// encoding/json would put in an int64, else 0.
func integer(val []byte) int64 {
	n, err := strconv.ParseInt(string(val), 10, 64)
	if err != nil {
		return 0
	}
	return n
}

// isTrue reports whether the raw value is the literal true.
func isTrue(val []byte) bool { return string(val) == "true" }

// isNullValue reports whether the raw value is absent or null.
func isNullValue(val []byte) bool { return len(val) == 0 || string(val) == "null" }
