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
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if !escapedASCII[c] {
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
		case r == '\u2028' || r == '\u2029':
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
