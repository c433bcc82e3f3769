package jsonscan

import (
	"math/rand/v2"
	"testing"
)

// TestSkipPlainWords holds the word-at-a-time skip to the byte loop it
// stands in front of: it stops at the word holding the first byte that is
// not a plain string byte, for every byte value at every position, and on
// random words.
func TestSkipPlainWords(t *testing.T) {
	t.Parallel()
	// naive is where skipPlainWords must stop: the start of the word that
	// holds the first byte needing thought, or of the short tail.
	naive := func(b []byte, j int) int {
		for ; j+8 <= len(b); j += 8 {
			for _, c := range b[j : j+8] {
				if !plainStringByte[c] {
					return j
				}
			}
		}
		return j
	}
	check := func(b []byte, j int) {
		t.Helper()
		if got, want := skipPlainWords(b, j), naive(b, j); got != want {
			t.Fatalf("skipPlainWords(%q, %d) = %d; want %d", b, j, got, want)
		}
	}
	plain := []byte("abcdefghijklmnopqrstuvwxyz0123456789")
	for c := 0; c < 256; c++ {
		for pos := 0; pos < len(plain); pos++ {
			b := append([]byte(nil), plain...)
			b[pos] = byte(c)
			for j := 0; j < 9; j++ {
				check(b, j)
			}
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		b := make([]byte, rng.IntN(40))
		for i := range b {
			// Mostly plain bytes (high ones too), now and then any byte.
			b[i] = byte(0x20 + rng.IntN(0xe0))
			if rng.IntN(16) == 0 {
				b[i] = byte(rng.IntN(256))
			}
		}
		check(b, 0)
	}
}
