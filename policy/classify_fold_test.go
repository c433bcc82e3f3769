package policy

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// retryAfterTextOracle is retryAfterText as it was before its literal
// prefilter: the three regexps run on every message. The prefilter must
// never change the answer.
func retryAfterTextOracle(msg string) time.Duration {
	if m := retryAfterSeconds.FindStringSubmatch(msg); m != nil {
		if n, err := strconv.Atoi(m[1]); err == nil {
			if d := time.Duration(n) * time.Second; d <= maxRetryHint {
				return d
			}
		}
	}
	if m := replenishedIn.FindStringSubmatch(msg); m != nil {
		h, _ := strconv.Atoi(m[1])
		mi, _ := strconv.Atoi(m[2])
		sec, _ := strconv.Atoi(m[3])
		if d := time.Duration(h)*time.Hour + time.Duration(mi)*time.Minute + time.Duration(sec)*time.Second; d > 0 && d <= maxRetryHint {
			return d
		}
	}
	if m := tryAgainIn.FindStringSubmatch(msg); m != nil {
		if d, err := time.ParseDuration(strings.ToLower(m[1])); err == nil && d > 0 && d <= maxRetryHint {
			return d
		}
	}
	return 0
}

// retryTextSeeds are messages with and without each hint, in every case,
// with the two non-ASCII runes that case-fold to an ASCII letter.
var retryTextSeeds = []string{
	"",
	"Please retry after 86400 seconds.",
	"PLEASE RETRY AFTER 6 SECONDS",
	"retry after 1 second",
	"Retry After 7 ſeconds", // U+017F folds to s
	"retry after 9999999999 seconds",
	"Out of call volume quota. Quota will be replenished in 00:00:59.",
	"QUOTA WILL BE REPLENISHED IN 23:59:12",
	"repleniſhed in 01:02:03",
	"replenished in 00:00:00",
	"Please try again in 18.642s.",
	"please TRY AGAIN IN 6m0s",
	"try again in 20ms",
	"try again in 1h2m3ſ",
	"try again in 5K", // U+212A folds to k, which no unit is
	"Rate limit reached for gpt-4o on tokens per min (TPM): Limit 30000, Used 14567, Requested 24754.",
	"retry after", "hed in", "try again in",
}

func TestRetryAfterTextMatchesItsOracle(t *testing.T) {
	t.Parallel()
	for _, msg := range retryTextSeeds {
		for _, m := range []string{msg, strings.ToLower(msg), strings.ToUpper(msg)} {
			if got, want := retryAfterText(m), retryAfterTextOracle(m); got != want {
				t.Errorf("retryAfterText(%q) = %v; the regexps alone say %v", m, got, want)
			}
		}
	}
}

func FuzzRetryAfterText(f *testing.F) {
	for _, msg := range retryTextSeeds {
		f.Add(msg)
	}
	f.Fuzz(func(t *testing.T, msg string) {
		if got, want := retryAfterText(msg), retryAfterTextOracle(msg); got != want {
			t.Errorf("retryAfterText(%q) = %v; the regexps alone say %v", msg, got, want)
		}
	})
}

func TestContainsFoldASCII(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		s, lit string
		want   bool
	}{
		{"", "", true},
		{"abc", "", true},
		{"", "a", false},
		{"Please RETRY after 5", "retry after ", true},
		{"retry afte", "retry after ", false},
		{"xxhed in ", "hed in ", true},
		{"HED IN ", "hed in ", true},
		{"hed\tin ", "hed in ", false},
		{"[", "{", false}, // '[' | 0x20 is '{': only letters fold
		{"tRy AgAiN iN", "try again in", true},
	} {
		if got := containsFoldASCII(tc.s, tc.lit); got != tc.want {
			t.Errorf("containsFoldASCII(%q, %q) = %t; want %t", tc.s, tc.lit, got, tc.want)
		}
	}
}
