package jsonscan

import (
	"encoding/json"
	"testing"
)

// TestLongStringsEveryPosition puts each byte that matters to a string
// (a quote, a backslash, every control character, and bytes that do not
// matter but sit near the tests' thresholds) at every position of strings
// long enough for skipPlainWords' word-at-a-time and 32-byte loops, and
// holds Valid and SkipString to encoding/json.
func TestLongStringsEveryPosition(t *testing.T) {
	t.Parallel()
	special := []byte{'"', '\\', 0x7f, 0x80, 0xc3, 0xff, ' ', '!', '#', '[', ']'}
	for c := byte(0); c < 0x20; c++ {
		special = append(special, c)
	}
	for n := 0; n <= 80; n++ {
		for pos := 0; pos < n; pos++ {
			for _, c := range special {
				s := make([]byte, 0, n+2)
				s = append(s, '"')
				for i := 0; i < n; i++ {
					if i == pos {
						s = append(s, c)
					} else {
						s = append(s, 'a'+byte(i%26))
					}
				}
				s = append(s, '"')
				want := json.Valid(s)
				if got := Valid(s) == nil; got != want {
					t.Fatalf("Valid(%q) = %v, json.Valid %v", s, got, want)
				}
				if end, _, err := SkipString(s, 0); want && (err != nil || end != len(s)) {
					t.Fatalf("SkipString(%q) = %d, %v; want %d", s, end, err, len(s))
				}
			}
		}
	}
}
