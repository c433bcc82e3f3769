package fakevendor

import (
	"fmt"
	"math"
	"testing"
)

func TestZeroPadIsSprintf(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, 1, 9, 10, 99999, 999999, 1000000, 1234567, math.MaxInt, -1, -99999, -100000, math.MinInt} {
		for _, width := range []int{6, 16} {
			if got, want := zeroPad(n, width), fmt.Sprintf("%0*d", width, n); got != want {
				t.Errorf("zeroPad(%d, %d) = %q; Sprintf says %q", n, width, got, want)
			}
		}
	}
}

func FuzzZeroPad(f *testing.F) {
	f.Add(7, 6)
	f.Fuzz(func(t *testing.T, n, width int) {
		width = width & 31
		if got, want := zeroPad(n, width), fmt.Sprintf("%0*d", width, n); got != want {
			t.Errorf("zeroPad(%d, %d) = %q; Sprintf says %q", n, width, got, want)
		}
	})
}
