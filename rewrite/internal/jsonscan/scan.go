package jsonscan

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// MaxDepth bounds the nesting of arrays and objects, as encoding/json does
// (it accepts 10000 levels and refuses 10001), so that hostile input cannot
// exhaust the stack.
const MaxDepth = 10000

// SyntaxError says why input is not valid JSON, and where.
type SyntaxError struct {
	// Offset is the byte offset of the problem in the scanned slice.
	Offset int
	// Reason says what is wrong, in words for a log or an error body
	// ("unexpected '}'", "control character in string").
	Reason string
}

// Error implements error.
func (e *SyntaxError) Error() string {
	return fmt.Sprintf("invalid JSON: %s at offset %d", e.Reason, e.Offset)
}

// Unexpected is the error for the byte b[i], or for the end of b when i is
// past it.
func Unexpected(b []byte, i int) *SyntaxError {
	if i >= len(b) {
		return &SyntaxError{i, "unexpected end of JSON"}
	}
	return &SyntaxError{i, fmt.Sprintf("unexpected %q", b[i])}
}

// DepthError returns the error for a container opened at b[i] inside depth
// others, or nil when MaxDepth allows it.
func DepthError(i, depth int) *SyntaxError {
	if depth >= MaxDepth {
		return &SyntaxError{i, "JSON nested too deeply"}
	}
	return nil
}

// SkipSpace returns the index of the first byte at or after i that is not
// JSON whitespace (space, tab, line feed, carriage return).
func SkipSpace(b []byte, i int) int {
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

// Valid returns nil when b is exactly one JSON value, with whitespace
// around it allowed, and a *SyntaxError otherwise: the same verdict as
// json.Valid.
func Valid(b []byte) error {
	end, err := SkipValue(b, SkipSpace(b, 0), 0)
	if err != nil {
		return err
	}
	if i := SkipSpace(b, end); i < len(b) {
		return &SyntaxError{i, "data after the JSON value"}
	}
	return nil
}

// SkipValue validates the JSON value starting at b[i] (no leading space)
// and returns the index just past it. depth is the number of containers
// around the value (0 for a whole document).
func SkipValue(b []byte, i, depth int) (int, *SyntaxError) {
	if i >= len(b) {
		return i, Unexpected(b, i)
	}
	switch c := b[i]; {
	case c == '"':
		end, _, err := SkipString(b, i)
		return end, err
	case c == '{' || c == '[':
		if err := DepthError(i, depth); err != nil {
			return i, err
		}
		return skipContainer(b, i, depth+1)
	case c == '-' || c >= '0' && c <= '9':
		return SkipNumber(b, i)
	case c == 't':
		return SkipLiteral(b, i, "true")
	case c == 'f':
		return SkipLiteral(b, i, "false")
	case c == 'n':
		return SkipLiteral(b, i, "null")
	}
	return i, Unexpected(b, i)
}

// skipContainer validates the object or array opened at b[i], whose
// members are at depth depth, and returns the index past its closer. It
// checks exactly what Iter.Next does, with the same offsets and reasons.
func skipContainer(b []byte, i, depth int) (int, *SyntaxError) {
	obj := b[i] == '{'
	closer := byte(']')
	if obj {
		closer = '}'
	}
	i = SkipSpace(b, i+1)
	if i < len(b) && b[i] == closer {
		return i + 1, nil
	}
	for {
		if obj {
			if i >= len(b) || b[i] != '"' {
				return i, Unexpected(b, i)
			}
			end, _, err := SkipString(b, i)
			if err != nil {
				return end, err
			}
			i = SkipSpace(b, end)
			if i >= len(b) || b[i] != ':' {
				return i, Unexpected(b, i)
			}
			i = SkipSpace(b, i+1)
		}
		end, err := SkipValue(b, i, depth)
		if err != nil {
			return end, err
		}
		i = SkipSpace(b, end)
		if i < len(b) && b[i] == closer {
			return i + 1, nil
		}
		if i >= len(b) || b[i] != ',' {
			return i, Unexpected(b, i)
		}
		i = SkipSpace(b, i+1)
	}
}

// SkipLiteral validates the literal lit (true, false or null) at b[i].
func SkipLiteral(b []byte, i int, lit string) (int, *SyntaxError) {
	for j := 0; j < len(lit); j++ {
		if i+j >= len(b) || b[i+j] != lit[j] {
			return i + j, Unexpected(b, i+j)
		}
	}
	return i + len(lit), nil
}

// SkipString validates the string starting at the quote b[i] and returns
// the index past its closing quote, and whether it has escapes. Bytes that
// are not valid UTF-8 are allowed, as encoding/json allows them (String
// and AppendUnquoted turn them into U+FFFD).
func SkipString(b []byte, i int) (end int, escaped bool, err *SyntaxError) {
	for j := i + 1; j < len(b); j++ {
		// Most bytes of a string need no thought: skip them eight at a
		// time while a word holds none of the three bytes that do, then
		// one at a time up to the one that does.
		j = skipPlainWords(b, j)
		for j < len(b) && plainStringByte[b[j]] {
			j++
		}
		if j >= len(b) {
			break
		}
		switch c := b[j]; {
		case c == '"':
			return j + 1, escaped, nil
		case c == '\\':
			escaped = true
			j++
			if j >= len(b) {
				return j, escaped, Unexpected(b, j)
			}
			switch b[j] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				for k := 1; k <= 4; k++ {
					if j+k >= len(b) || !isHex(b[j+k]) {
						return j + k, escaped, &SyntaxError{j + k, `invalid \u escape`}
					}
				}
				j += 4
			default:
				return j, escaped, &SyntaxError{j, "invalid escape"}
			}
		default: // c < 0x20
			return j, escaped, &SyntaxError{j, "control character in string"}
		}
	}
	return len(b), escaped, Unexpected(b, len(b))
}

// skipPlainWords returns the index of the first 8-byte word at or after
// b[j] that holds a quote, a backslash or a control character (or of the
// tail shorter than a word): the bytes before it are all plain string
// bytes. A model's answer is mostly one long string, and a byte at a time
// it costs more than everything else the answer's checks do together.
//
// The first word is tested for all three; a string that goes on past it
// is a long one, whose end the vectorised byte search finds (the next
// quote, and a backslash before it), so that only control characters
// are left to look for, a word at a time and with one test instead of
// three.
func skipPlainWords(b []byte, j int) int {
	const (
		ones  = 0x0101010101010101
		highs = 0x8080808080808080
	)
	if j+8 > len(b) {
		return j
	}
	x := binary.LittleEndian.Uint64(b[j:])
	// The classic tests for "a byte below n" and "a zero byte", one per
	// byte to find (below 0x20; '"' and '\\' are zero after an XOR):
	// each is exact about whether the word has such a byte, which is all
	// that is used; where it is, the byte loop finds.
	q, bs := x^(ones*'"'), x^(ones*'\\')
	if ((x-ones*0x20)&^x|(q-ones)&^q|(bs-ones)&^bs)&highs != 0 {
		return j
	}
	j += 8
	end := len(b)
	if k := bytes.IndexByte(b[j:], '"'); k >= 0 {
		end = j + k
	}
	if k := bytes.IndexByte(b[j:end], '\\'); k >= 0 {
		end = j + k
	}
	// Four words a test while they last: the bounds checks and the branch
	// are paid once for 32 bytes.
	for ; j+32 <= end; j += 32 {
		w := b[j : j+32 : j+32]
		x0, x1 := binary.LittleEndian.Uint64(w[0:8]), binary.LittleEndian.Uint64(w[8:16])
		x2, x3 := binary.LittleEndian.Uint64(w[16:24]), binary.LittleEndian.Uint64(w[24:32])
		if ((x0-ones*0x20)&^x0|(x1-ones*0x20)&^x1|(x2-ones*0x20)&^x2|(x3-ones*0x20)&^x3)&highs != 0 {
			break // the word loop finds which
		}
	}
	for j+8 <= end {
		if x := binary.LittleEndian.Uint64(b[j:]); (x-ones*0x20)&^x&highs != 0 {
			return j
		}
		j += 8
	}
	return j
}

// plainStringByte marks the bytes that stand for themselves inside a JSON
// string: not a quote, a backslash or a control character.
var plainStringByte = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// SkipNumber validates -?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)? at b[i].
func SkipNumber(b []byte, i int) (int, *SyntaxError) {
	digits := func(j int) (int, *SyntaxError) {
		k := j
		for k < len(b) && b[k] >= '0' && b[k] <= '9' {
			k++
		}
		if k == j {
			return k, Unexpected(b, k)
		}
		return k, nil
	}
	if b[i] == '-' {
		i++
	}
	var err *SyntaxError
	if i < len(b) && b[i] == '0' {
		i++
	} else if i, err = digits(i); err != nil {
		return i, err
	}
	if i < len(b) && b[i] == '.' {
		if i, err = digits(i + 1); err != nil {
			return i, err
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i, err = digits(i); err != nil {
			return i, err
		}
	}
	return i, nil
}

// ---- over valid JSON ----

// skipValid returns the index past the value at b[i], which must be valid
// JSON: it only looks for where the value ends.
func skipValid(b []byte, i int) int {
	if i >= len(b) {
		return i
	}
	switch b[i] {
	case '"':
		end, _ := skipValidString(b, i)
		return end
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			for j < len(b) && !structuralByte[b[j]] {
				j++
			}
			if j >= len(b) {
				break
			}
			switch b[j] {
			case '"':
				end, _ := skipValidString(b, j)
				j = end - 1
			case '{', '[':
				depth++
			default: // '}', ']'
				if depth--; depth == 0 {
					return j + 1
				}
			}
		}
		return len(b)
	}
	// A number or a literal.
	j := i
	for j < len(b) && !scalarEndByte[b[j]] {
		j++
	}
	return j
}

// skipValidString returns the index past the valid string at the quote
// b[i], and whether it has escapes. It looks for the quote and the
// backslashes with bytes.IndexByte, so that a long string costs little.
func skipValidString(b []byte, i int) (end int, escaped bool) {
	j := i + 1
	q := -1 // the next quote at or after j, once found
	for j < len(b) {
		if q < j {
			k := bytes.IndexByte(b[j:], '"')
			if k < 0 {
				break
			}
			q = j + k
		}
		k := bytes.IndexByte(b[j:q], '\\')
		if k < 0 {
			return q + 1, escaped
		}
		escaped = true
		j += k + 2 // the backslash and the byte it escapes, maybe a quote
	}
	return len(b), escaped
}

var (
	// structuralByte marks the bytes skipValid stops at inside a
	// container.
	structuralByte = byteSet(`"{}[]`)
	// scalarEndByte marks the bytes that can follow a number or literal.
	scalarEndByte = byteSet(",}] \t\n\r")
)

func byteSet(s string) (t [256]bool) {
	for i := 0; i < len(s); i++ {
		t[s[i]] = true
	}
	return t
}
