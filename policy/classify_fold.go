package policy

// containsFoldASCII reports whether s contains lit, ignoring the case of
// ASCII letters. lit must be lower-case ASCII without 'k' or 's'.
//
// It is the necessary condition of a `(?i)` regexp whose every match
// contains lit: under Go's case folding the only non-ASCII runes that match
// an ASCII letter are U+212A KELVIN SIGN (k) and U+017F LATIN SMALL LETTER
// LONG S (s), so for every other letter a match must hold the letter itself
// in one case or the other. That is why retryAfterText filters on "hed in "
// for "replenished in".
func containsFoldASCII(s, lit string) bool {
	n := len(lit)
	for i := 0; i+n <= len(s); i++ {
		j := 0
		for j < n && lowerASCII(s[i+j]) == lit[j] {
			j++
		}
		if j == n {
			return true
		}
	}
	return false
}

// lowerASCII lower-cases an ASCII upper-case letter and leaves any other
// byte alone.
func lowerASCII(b byte) byte {
	if 'A' <= b && b <= 'Z' {
		return b + 'a' - 'A'
	}
	return b
}
