package demo

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/detour-proxy/detour/proxy/chain"
	"github.com/detour-proxy/detour/rewrite/fakevendor"
)

// tally counts what detour's request records say.
type tally struct {
	mu        sync.Mutex
	done      int
	answered  map[string]int
	failovers int
	failed    int
	classes   map[string]map[string]int // upstream → class → count
	skipped   map[string]int
	// skippedBreaker counts the skips of an open (or probing) breaker;
	// the rest of skipped are cooldowns.
	skippedBreaker map[string]int
	sample         *chain.Record
}

func newTally() *tally {
	return &tally{answered: map[string]int{}, classes: map[string]map[string]int{}, skipped: map[string]int{}, skippedBreaker: map[string]int{}}
}

func (t *tally) add(r *chain.Record) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.done++
	if r.AnsweredBy != "" {
		t.answered[r.AnsweredBy]++
	} else {
		t.failed++
	}
	fell := false
	for _, a := range r.Attempts {
		switch a.Outcome {
		case chain.OutcomeSkipped:
			t.skipped[a.Upstream]++
			if strings.HasPrefix(a.Reason, "breaker") {
				t.skippedBreaker[a.Upstream]++
			}
		case chain.OutcomeFallback:
			fell = true
			fallthrough
		default:
			if a.Class != "" {
				if t.classes[a.Upstream] == nil {
					t.classes[a.Upstream] = map[string]int{}
				}
				t.classes[a.Upstream][a.Class]++
			}
		}
	}
	if fell {
		t.failovers++
		if t.sample == nil && r.AnsweredBy != "" {
			t.sample = r
		}
	}
}

// progress redraws one terminal line with the running counts; when the
// output is not a terminal it prints a line every tenth request instead.
func (t *tally) progress(w io.Writer, total int, live bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	line := fmt.Sprintf("[%3d/%d] answered by openai %3d  backup %3d  local %3d | failovers %3d | app errors %d",
		t.done, total, t.answered["openai"], t.answered["backup"], t.answered["local"], t.failovers, t.failed)
	switch {
	case live:
		fmt.Fprint(w, "\r"+line+" ")
	case t.done%10 == 0 || t.done == total:
		fmt.Fprintln(w, line)
	}
}

func (t *tally) table(w io.Writer, vendors []*fakevendor.Vendor, elapsed time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	fmt.Fprintf(w, "\n%-8s %9s %6s %9s  %s\n", "upstream", "answered", "calls", "skipped", "failures by class")
	for i, spec := range cast {
		var parts []string
		for c, n := range t.classes[spec.name] {
			parts = append(parts, fmt.Sprintf("%s %d", c, n))
		}
		sort.Strings(parts)
		fmt.Fprintf(w, "%-8s %9d %6d %9d  %s\n", spec.name, t.answered[spec.name], vendors[i].Calls(), t.skipped[spec.name], strings.Join(parts, ", "))
	}
	fmt.Fprintf(w, "\n%d requests in %.1fs: %d failed over, %d reached the app as errors.\n", t.done, elapsed.Seconds(), t.failovers, t.failed)
	if t.sample != nil {
		fmt.Fprintf(w, "\nOne failover, as detour logged it:\n")
		for _, a := range t.sample.Attempts {
			fmt.Fprintf(w, "  %-7s %-9s %-16s %s\n", a.Upstream, a.Outcome, a.Class, a.Reason)
		}
	}
	fmt.Fprintln(w, "\nskipped = detour did not call it:")
	for _, spec := range cast {
		if n := t.skipped[spec.name]; n > 0 {
			b := t.skippedBreaker[spec.name]
			fmt.Fprintf(w, "  %-7s %d while cooling down after a quota error, %d while its circuit breaker was open after repeated failures\n", spec.name, n-b, b)
		}
	}
}
