package jsonscan

import "unicode/utf8"

// AppendString appends s to dst as a JSON string, byte for byte as
// json.Encoder writes it with SetEscapeHTML(false): \" \\ \b \f \n \r \t
// as short escapes, \u00XX for the other control characters, \u2028 and
// \u2029 escaped, each byte of invalid UTF-8 as \ufffd, and everything else
// as it is. The result never holds a raw line break, so it is safe on one
// SSE data line. It allocates nothing beyond growing dst.
//
// It is detour's one string escaper: the vendor encoders write with it,
// and the cache key's canonical form is defined as encoding/json's, so
// both produce the same bytes for the same text.
func AppendString[S ~string | ~[]byte](dst []byte, s S) []byte {
	return AppendStringIn(dst, s, Encoding)
}

// Dialect is one of the two ways detour writes a JSON string. They differ
// in two characters only, which is why one escaper serves both.
type Dialect uint8

const (
	// Encoding is encoding/json's with SetEscapeHTML(false), as
	// AppendString documents: U+2028 and U+2029 escaped, DEL as it is.
	Encoding Dialect = iota
	// Zerolog is how zerolog writes a string value: DEL escaped as
	// \u007f, U+2028 and U+2029 as they are. The chain encodes parts of
	// its log line itself and must write the bytes zerolog would have.
	Zerolog
)

// AppendStringIn is AppendString in dialect d.
func AppendStringIn[S ~string | ~[]byte](dst []byte, s S, d Dialect) []byte {
	const hex = "0123456789abcdef"
	escaped := &escapedASCII
	if d == Zerolog {
		escaped = &escapedZerolog
	}
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if !escaped[c] {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := decodeRune(s, i)
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case (r == '\u2028' || r == '\u2029') && d == Encoding:
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// StringLen is len(AppendString(nil, s)), without writing it.
func StringLen[S ~string | ~[]byte](s S) int {
	n := 2
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case !escapedASCII[c]:
				n++
			case c == '"' || c == '\\' || c == '\b' || c == '\f' || c == '\n' || c == '\r' || c == '\t':
				n += 2
			default:
				n += len(`\u0000`)
			}
			i++
			continue
		}
		r, size := decodeRune(s, i)
		switch {
		case r == utf8.RuneError && size == 1:
			n += len(`\ufffd`)
		case r == '\u2028' || r == '\u2029':
			n += len(`\u2028`)
		default:
			n += size
		}
		i += size
	}
	return n
}

// decodeRune decodes the rune at s[i]. The string conversion of at most
// utf8.UTFMax bytes does not escape, so it costs no allocation for a
// []byte either.
func decodeRune[S ~string | ~[]byte](s S, i int) (rune, int) {
	return utf8.DecodeRuneInString(string(s[i:min(i+utf8.UTFMax, len(s))]))
}

// escapedASCII marks the ASCII bytes AppendString escapes.
var escapedASCII = func() (t [utf8.RuneSelf]bool) {
	for c := range 0x20 {
		t[c] = true
	}
	t['"'], t['\\'] = true, true
	return t
}()

// escapedZerolog marks the ASCII bytes the Zerolog dialect escapes.
var escapedZerolog = func() (t [utf8.RuneSelf]bool) {
	t = escapedASCII
	t[0x7f] = true
	return t
}()
