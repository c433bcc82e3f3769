package policy

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestStatusTextIsItoa: the status prefix of every verdict's reason is
// strconv.Itoa's, the constants of the success statuses included.
func TestStatusTextIsItoa(t *testing.T) {
	t.Parallel()
	for s := -1; s < 1000; s++ {
		if got, want := statusText(s), strconv.Itoa(s); got != want {
			t.Fatalf("statusText(%d) = %q, want %q", s, got, want)
		}
	}
}

// retryAfterHeaderGet is retryAfterHeader as it read the header before:
// through http.Header.Get.
func retryAfterHeaderGet(h http.Header, now time.Time) time.Duration {
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 && ms <= float64(maxRetryHint/time.Millisecond) {
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseFloat(v, 64); err == nil {
		if !(secs >= 0 && secs <= maxRetryHint.Seconds()) {
			return 0
		}
		return time.Duration(secs * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 && d <= maxRetryHint {
			return d
		}
	}
	return 0
}

// TestRetryAfterHeaderIndexed: indexing the header by its canonical names
// reads what Get read, for headers built canonically (as net/http does) and
// by hand in other spellings, empty values and several values included.
func TestRetryAfterHeaderIndexed(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 8, 21, 10, 0, 0, 0, time.UTC)
	values := [][]string{nil, {}, {""}, {"  "}, {"26"}, {" 1.5 "}, {"-1"}, {"NaN"}, {"1e12"}, {"250", "9"},
		{now.Add(time.Minute).Format(http.TimeFormat)}, {"soon"}}
	names := []string{"Retry-After", "Retry-After-Ms", "retry-after", "retry-after-ms", "RETRY-AFTER"}
	for _, n1 := range names {
		for _, v1 := range values {
			for _, n2 := range names {
				for _, v2 := range values {
					h := http.Header{}
					if v1 != nil {
						h[n1] = v1
					}
					if v2 != nil {
						h[n2] = v2
					}
					if got, want := retryAfterHeader(h, now), retryAfterHeaderGet(h, now); got != want {
						t.Fatalf("%v: got %v, want %v", h, got, want)
					}
				}
			}
		}
	}
	if got := retryAfterHeader(nil, now); got != 0 {
		t.Errorf("nil header: %v", got)
	}
}
