package jsonscan

// Iter walks the members of one object or the elements of one array. It
// allocates nothing; a callback-based walk would make what the callback
// captures escape. Use it as
//
//	it, ok := jsonscan.Scan(data)
//	for m, ok := it.Next(); ok; m, ok = it.Next() { … }
//	if err := it.End(); err != nil { … }
type Iter struct {
	b     []byte
	pos   int // the next byte to read; past the closer when done
	count int
	obj   bool
	done  bool
	// valid says b is known to be valid JSON: Next only finds where
	// values end, and never fails.
	valid bool
	err   *SyntaxError
}

// Member is one member of an object (or one element of an array, which
// has no key) found by Iter.Next. It refers to the walked slice.
type Member struct {
	b                []byte
	keyStart, keyEnd int // the key's bytes between its quotes
	keyEscaped       bool
	valStart, valEnd int
}

// Scan starts a validating walk over v, an object or an array with
// whitespace around it allowed. ok is false when v is neither (then the
// walk yields nothing). Each member's value is validated as Next skips
// it, so a walk to the end validates v whole; End then reports the first
// syntax error, or data after the container.
func Scan(v []byte) (it Iter, ok bool) {
	i := SkipSpace(v, 0)
	if i >= len(v) || (v[i] != '{' && v[i] != '[') {
		return Iter{done: true}, false
	}
	return Iter{b: v, pos: i + 1, obj: v[i] == '{'}, true
}

// Object starts a walk over the members of v, which must be valid JSON
// (checked with Valid, or by encoding/json), with whitespace around it
// allowed. ok is false, and the walk yields nothing, when v is not an
// object. The walk does not validate: on invalid JSON it stops or yields
// garbage, but does not panic.
func Object(v []byte) (it Iter, ok bool) {
	return walkValid(v, '{')
}

// Array is Object for the elements of an array.
func Array(v []byte) (it Iter, ok bool) {
	return walkValid(v, '[')
}

func walkValid(v []byte, opener byte) (Iter, bool) {
	i := SkipSpace(v, 0)
	if i >= len(v) || v[i] != opener {
		return Iter{done: true}, false
	}
	return Iter{b: v, pos: i + 1, obj: opener == '{', valid: true}, true
}

// IsObject reports whether the walk is over an object's members (rather
// than an array's elements).
func (it *Iter) IsObject() bool { return it.obj }

// Count returns the number of members Next has returned.
func (it *Iter) Count() int { return it.count }

// Next returns the next member. ok is false at the end of the container,
// or at a syntax error (see End).
func (it *Iter) Next() (m Member, ok bool) {
	if it.done {
		return m, false
	}
	b := it.b
	i := SkipSpace(b, it.pos)
	closer := byte(']')
	if it.obj {
		closer = '}'
	}
	if i < len(b) && b[i] == closer {
		it.pos, it.done = i+1, true
		return m, false
	}
	if it.count > 0 {
		if i >= len(b) || b[i] != ',' {
			return m, it.fail(Unexpected(b, i))
		}
		i = SkipSpace(b, i+1)
	}
	m.b = b
	if it.obj {
		if i >= len(b) || b[i] != '"' {
			return m, it.fail(Unexpected(b, i))
		}
		var end int
		var esc bool
		if it.valid {
			end, esc = skipValidString(b, i)
		} else {
			var err *SyntaxError
			if end, esc, err = SkipString(b, i); err != nil {
				return m, it.fail(err)
			}
		}
		m.keyStart, m.keyEnd, m.keyEscaped = i+1, end-1, esc
		i = SkipSpace(b, end)
		if i >= len(b) || b[i] != ':' {
			return m, it.fail(Unexpected(b, i))
		}
		i = SkipSpace(b, i+1)
	}
	var end int
	if it.valid {
		if end = skipValid(b, i); end == i {
			return m, it.fail(Unexpected(b, i))
		}
	} else {
		var err *SyntaxError
		if end, err = SkipValue(b, i, 1); err != nil {
			return m, it.fail(err)
		}
	}
	m.valStart, m.valEnd = i, end
	it.pos = end
	it.count++
	return m, true
}

func (it *Iter) fail(err *SyntaxError) bool {
	it.err, it.done = err, true
	return false
}

// End reports, once Next has returned false, whether the walk stopped at a
// syntax error, or found something other than whitespace after the
// container. It is nil for a walk that ended cleanly.
func (it *Iter) End() *SyntaxError {
	if it.err != nil {
		return it.err
	}
	if i := SkipSpace(it.b, it.pos); it.done && i < len(it.b) {
		reason := "data after the JSON array"
		if it.obj {
			reason = "data after the JSON object"
		}
		return &SyntaxError{i, reason}
	}
	return nil
}

// Key returns the member's key as written, between its quotes (escapes
// not decoded); nil for an array element.
func (m *Member) Key() []byte { return m.b[m.keyStart:m.keyEnd] }

// KeyIs reports whether the member's key is name, decoding the key's
// escapes only when it has any (rare; "mod\u0065l" is still "model"), as
// encoding/json does. name is a field name: valid UTF-8 without U+FFFD, so
// that a key without escapes can be compared as it is. Case matters:
// encoding/json would also match a key that differs from a field's name in
// case only, which no vendor sends.
func (m *Member) KeyIs(name string) bool {
	key := m.b[m.keyStart:m.keyEnd]
	if !m.keyEscaped {
		return string(key) == name
	}
	var buf [64]byte // decoded on the stack: keys are short
	return string(AppendUnquoted(buf[:0], key)) == name
}

// Value returns the member's value.
func (m *Member) Value() []byte { return m.b[m.valStart:m.valEnd] }

// ValueSpan returns where the member's value starts and ends in the
// walked slice.
func (m *Member) ValueSpan() (start, end int) { return m.valStart, m.valEnd }
