package jsonscan

import (
	"bytes"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// String decodes v, a valid JSON value, when it is a string; "" for any
// other value. The result is what json.Unmarshal gives: a plain string
// costs one copy; escapes are decoded and invalid UTF-8 becomes U+FFFD
// (see AppendUnquoted).
func String(v []byte) string {
	if len(v) < 2 || v[0] != '"' {
		return ""
	}
	inner := v[1 : len(v)-1]
	if bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
		return string(inner)
	}
	var buf [128]byte // most escaped strings are short stream fragments
	return string(AppendUnquoted(buf[:0], inner))
}

// Unquote decodes q when it is exactly one valid JSON string (quotes
// included, nothing around them), as String does; ok is false otherwise.
// It is String for input nobody has validated.
func Unquote(q []byte) (s string, ok bool) {
	if len(q) == 0 || q[0] != '"' {
		return "", false
	}
	if end, _, err := SkipString(q, 0); err != nil || end != len(q) {
		return "", false
	}
	return String(q), true
}

// AppendUnquoted appends the text that s stands for, where s is what is
// between the quotes of a valid JSON string, exactly as encoding/json
// decodes it: escapes decoded, a surrogate pair joined, and invalid UTF-8
// and unpaired surrogates turned into U+FFFD.
func AppendUnquoted(dst, s []byte) []byte {
	for r := 0; r < len(s); {
		ch := s[r]
		switch {
		case ch == '\\':
			switch e := s[r+1]; e {
			case 'b':
				dst = append(dst, '\b')
			case 'f':
				dst = append(dst, '\f')
			case 'n':
				dst = append(dst, '\n')
			case 'r':
				dst = append(dst, '\r')
			case 't':
				dst = append(dst, '\t')
			case 'u':
				rr := hex4(s[r+2:])
				r += 6
				if utf16.IsSurrogate(rr) {
					if r+6 <= len(s) && s[r] == '\\' && s[r+1] == 'u' {
						if dec := utf16.DecodeRune(rr, hex4(s[r+2:])); dec != unicode.ReplacementChar {
							r += 6
							dst = utf8.AppendRune(dst, dec)
							continue
						}
					}
					rr = unicode.ReplacementChar
				}
				dst = utf8.AppendRune(dst, rr)
				continue
			default: // '"', '\\', '/'
				dst = append(dst, e)
			}
			r += 2
		case ch < utf8.RuneSelf:
			dst = append(dst, ch)
			r++
		default:
			rr, size := utf8.DecodeRune(s[r:])
			dst = utf8.AppendRune(dst, rr)
			r += size
		}
	}
	return dst
}

// hex4 reads the four hex digits at the start of s (validated).
func hex4(s []byte) rune {
	var r rune
	for _, ch := range s[:4] {
		switch {
		case ch >= '0' && ch <= '9':
			ch -= '0'
		case ch >= 'a' && ch <= 'f':
			ch -= 'a' - 10
		default:
			ch -= 'A' - 10
		}
		r = r<<4 | rune(ch)
	}
	return r
}

// Int reads v, a valid JSON value, when it is an integer literal that fits
// in an int64 (what json.Unmarshal puts in an int64 without an error); ok
// is false, and n 0, for anything else: a fraction, an exponent, a value
// out of range, a string, null.
func Int(v []byte) (n int64, ok bool) {
	digits := v
	neg := len(v) > 0 && v[0] == '-'
	if neg {
		digits = v[1:]
	}
	if len(digits) == 0 {
		return 0, false
	}
	var u uint64
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
		if u > (1<<63)/10 { // u*10 is out of range, and might wrap
			return 0, false
		}
		u = u*10 + uint64(c-'0')
		if u > 1<<63 {
			return 0, false
		}
	}
	switch {
	case neg:
		return -int64(u), true // -(1<<63) converts exactly
	case u == 1<<63:
		return 0, false
	}
	return int64(u), true
}

// IsNull reports whether v, a valid JSON value or nothing, is absent or
// null: encoding/json's "not set".
func IsNull(v []byte) bool { return len(v) == 0 || string(v) == "null" }
