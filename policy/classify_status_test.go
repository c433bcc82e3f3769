package policy

import (
	"net/http"
	"strconv"
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

// TestRetryAfterHeaderIndexed: retryAfterHeader reads its two headers by
// indexing them with their canonical names instead of Get; for headers
// built canonically (as net/http does) and by hand in other spellings,
// with empty and several values, that reads what Get read.
func TestRetryAfterHeaderIndexed(t *testing.T) {
	t.Parallel()
	values := [][]string{nil, {}, {""}, {"  "}, {"26"}, {" 1.5 "}, {"250", "9"}, {"Fri, 21 Aug 2026 10:01:00 GMT"}}
	spellings := []string{"Retry-After", "Retry-After-Ms", "retry-after", "retry-after-ms", "RETRY-AFTER"}
	for _, n1 := range spellings {
		for _, v1 := range values {
			for _, n2 := range spellings {
				for _, v2 := range values {
					h := http.Header{}
					if v1 != nil {
						h[n1] = v1
					}
					if v2 != nil {
						h[n2] = v2
					}
					for _, name := range []string{"Retry-After", "Retry-After-Ms"} {
						if got, want := firstValue(h[name]), h.Get(name); got != want {
							t.Fatalf("%v: %s read %q, Get %q", h, name, got, want)
						}
					}
				}
			}
		}
	}
	if got := retryAfterHeader(nil, time.Now()); got != 0 {
		t.Errorf("nil header: %v", got)
	}
	if got := retryAfterHeader(http.Header{"Retry-After-Ms": {"250"}, "Retry-After": {"9"}}, time.Now()); got != 250*time.Millisecond {
		t.Errorf("retry-after-ms and retry-after: %v, want 250ms", got)
	}
}
