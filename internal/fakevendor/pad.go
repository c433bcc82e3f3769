package fakevendor

import (
	"fmt"
	"strconv"
	"strings"
)

// zeroPad is fmt.Sprintf("%0*d", width, n) without fmt, whose cost showed in
// every fake answer (each carries ids built from the call number).
func zeroPad(n, width int) string {
	if n < 0 {
		return fmt.Sprintf("%0*d", width, n)
	}
	s := strconv.Itoa(n)
	if len(s) >= width {
		return s
	}
	return strings.Repeat("0", width-len(s)) + s
}
