package sim

import (
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"
)

// table is a markdown table, padded so that it also reads as plain text.
type table struct {
	head []string
	// right marks the columns aligned right (numbers).
	right []bool
	rows  [][]string
}

func newTable(head ...string) *table {
	t := &table{head: head, right: make([]bool, len(head))}
	for i := 1; i < len(head); i++ {
		t.right[i] = true
	}
	return t
}

func (t *table) add(cells ...string) { t.rows = append(t.rows, cells) }

func (t *table) write(w io.Writer) {
	width := make([]int, len(t.head))
	for i, h := range t.head {
		width[i] = max(3, utf8.RuneCountInString(h))
	}
	for _, r := range t.rows {
		for i, c := range r {
			width[i] = max(width[i], utf8.RuneCountInString(c))
		}
	}
	line := func(cells []string) {
		var b strings.Builder
		b.WriteString("|")
		for i, c := range cells {
			pad := strings.Repeat(" ", width[i]-utf8.RuneCountInString(c))
			if t.right[i] {
				fmt.Fprintf(&b, " %s%s |", pad, c)
			} else {
				fmt.Fprintf(&b, " %s%s |", c, pad)
			}
		}
		fmt.Fprintln(w, b.String())
	}
	line(t.head)
	sep := make([]string, len(t.head))
	for i := range sep {
		if t.right[i] {
			sep[i] = strings.Repeat("-", width[i]-1) + ":"
		} else {
			sep[i] = strings.Repeat("-", width[i])
		}
	}
	line(sep)
	for _, r := range t.rows {
		line(r)
	}
}

// percent formats a fraction as a percentage with three decimals.
func percent(x float64) string { return fmt.Sprintf("%.3f %%", 100*x) }

// ratio is n/d, or 0 when d is 0.
func ratio(n, d int) float64 {
	if d == 0 {
		return 0
	}
	return float64(n) / float64(d)
}

// shortDuration is d without zero units: 1h, 10m, 1m30s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
