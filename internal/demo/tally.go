package demo

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/detour-proxy/detour/internal/chain"
	"github.com/detour-proxy/detour/internal/fakevendor"
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
	// skippedWhy counts skips by cause (skipCooldown, skipBreaker,
	// skipOther) per upstream.
	skippedWhy map[string]map[string]int
	sample     *chain.Record
	// recorded is signalled after each record (wait).
	recorded chan struct{}
}

// The causes of a skip, as the table words them.
const (
	skipCooldown = "while cooling down after a quota error"
	skipBreaker  = "while its circuit breaker was open after repeated failures"
	skipOther    = "for another reason (the log says which)"
)

func newTally() *tally {
	return &tally{answered: map[string]int{}, classes: map[string]map[string]int{}, skipped: map[string]int{},
		skippedWhy: map[string]map[string]int{}, recorded: make(chan struct{}, 1)}
}

// skipCause sorts a skipped attempt's reason into the table's causes.
func skipCause(reason string) string {
	switch {
	case strings.HasPrefix(reason, "cooling down"):
		return skipCooldown
	case strings.HasPrefix(reason, "breaker"):
		return skipBreaker
	}
	return skipOther
}

func (t *tally) add(r *chain.Record) {
	defer func() {
		select {
		case t.recorded <- struct{}{}:
		default:
		}
	}()
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
			if t.skippedWhy[a.Upstream] == nil {
				t.skippedWhy[a.Upstream] = map[string]int{}
			}
			t.skippedWhy[a.Upstream][skipCause(a.Reason)]++
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

// wait returns once n records have been counted.
func (t *tally) wait(ctx context.Context, n int) error {
	for {
		t.mu.Lock()
		done := t.done
		t.mu.Unlock()
		if done >= n {
			return nil
		}
		select {
		case <-t.recorded:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// progress redraws one terminal line with the running counts and the time
// so far. Off a terminal it prints nothing: a log or a pipe gets the table
// alone, the same for the same seed.
func (t *tally) progress(w io.Writer, total int, live bool, elapsed time.Duration) {
	if !live {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	fmt.Fprintf(w, "\r[%3d/%d] answered by openai %3d  backup %3d  local %3d | failovers %3d | app errors %d | %.1fs ",
		t.done, total, t.answered["openai"], t.answered["backup"], t.answered["local"], t.failovers, t.failed, elapsed.Seconds())
}

func (t *tally) table(w io.Writer, vendors []*fakevendor.Vendor) {
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
	fmt.Fprintf(w, "\n%d requests: %d failed over, %d reached the app as errors.\n", t.done, t.failovers, t.failed)
	if t.sample != nil {
		fmt.Fprintf(w, "\nOne failover, as detour logged it:\n")
		for _, a := range t.sample.Attempts {
			fmt.Fprintf(w, "  %-7s %-9s %-16s %s\n", a.Upstream, a.Outcome, a.Class, a.Reason)
		}
	}
	if len(t.skippedWhy) == 0 {
		return
	}
	fmt.Fprintln(w, "\nskipped = detour did not call it:")
	for _, spec := range cast {
		// Only the causes that happened: "0 while cooling down" would
		// read as a cooldown that skipped nothing.
		var parts []string
		for _, cause := range []string{skipCooldown, skipBreaker, skipOther} {
			if n := t.skippedWhy[spec.name][cause]; n > 0 {
				parts = append(parts, fmt.Sprintf("%d %s", n, cause))
			}
		}
		if len(parts) > 0 {
			fmt.Fprintf(w, "  %-7s %s\n", spec.name, strings.Join(parts, ", "))
		}
	}
}
