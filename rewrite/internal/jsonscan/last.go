package jsonscan

import "bytes"

// LastMember finds the last member of the object v, which must be valid
// JSON (whitespace around it allowed), by reading v from its end: it
// costs the length of that member, not of v. A vendor puts an answer's
// usage last, after the content, which is most of the answer. key is the
// member's key as written, between its quotes (escapes not decoded:
// escaped says whether it has any). ok is false when v is not an object
// with a member. Like Object, it does not validate: on invalid JSON it
// returns garbage or ok false, but does not panic.
func LastMember(v []byte) (key, value []byte, escaped, ok bool) {
	j := skipSpaceBack(v, len(v)-1)
	if j < 0 || v[j] != '}' {
		return nil, nil, false, false
	}
	end := skipSpaceBack(v, j-1) // the value's last byte
	if end < 0 || v[end] == '{' || v[end] == ',' {
		return nil, nil, false, false
	}
	start := valueStartBack(v, end)
	if start < 0 {
		return nil, nil, false, false
	}
	c := skipSpaceBack(v, start-1)
	if c < 0 || v[c] != ':' {
		return nil, nil, false, false
	}
	kq := skipSpaceBack(v, c-1) // the key's closing quote
	if kq < 0 || v[kq] != '"' {
		return nil, nil, false, false
	}
	ko := openingQuote(v, kq)
	if ko < 0 {
		return nil, nil, false, false
	}
	if p := skipSpaceBack(v, ko-1); p < 0 || (v[p] != ',' && v[p] != '{') {
		return nil, nil, false, false
	}
	key = v[ko+1 : kq]
	for _, b := range key {
		if b == '\\' {
			escaped = true
			break
		}
	}
	return key, v[start : end+1], escaped, true
}

// skipSpaceBack returns the index of the last byte at or before i that is
// not JSON whitespace, or -1.
func skipSpaceBack(b []byte, i int) int {
	for i >= 0 {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i--
		default:
			return i
		}
	}
	return -1
}

// openingQuote returns the index of the quote that opens the string whose
// closing quote is b[q], or -1. Inside a string a quote is always escaped,
// by an odd number of backslashes before it: the first quote before q
// with an even number (none included) opens the string.
func openingQuote(b []byte, q int) int {
	for i := q; ; {
		if i = bytes.LastIndexByte(b[:i], '"'); i < 0 {
			return -1
		}
		n := 0
		for k := i - 1; k >= 0 && b[k] == '\\'; k-- {
			n++
		}
		if n%2 == 0 {
			return i
		}
	}
}

// valueStartBack returns where the value that ends at b[end] starts, or
// -1: the opener of a container (strings inside it skipped), the opening
// quote of a string, or the first byte of a number or literal.
func valueStartBack(b []byte, end int) int {
	switch c := b[end]; {
	case c == '"':
		return openingQuote(b, end)
	case c == '}' || c == ']':
		depth := 0
		for i := end; i >= 0; i-- {
			switch b[i] {
			case '"':
				// Outside strings, a quote met going back closes one.
				if i = openingQuote(b, i); i < 0 {
					return -1
				}
			case '}', ']':
				depth++
			case '{', '[':
				if depth--; depth == 0 {
					return i
				}
			}
		}
		return -1
	}
	i := end
	for i >= 0 && literalByte(b[i]) {
		i--
	}
	if i == end {
		return -1
	}
	return i + 1
}

// literalByte reports whether c can be part of a number or of true,
// false or null.
func literalByte(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c == '-' || c == '+' || c == '.' || c == 'E'
}
