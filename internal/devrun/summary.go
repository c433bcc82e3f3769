package devrun

import (
	"fmt"
	"maps"
	"sort"
	"strings"
	"sync"

	"github.com/detour-proxy/detour/internal/chain"
)

// passthrough is the AnsweredBy of a request no route took (chain.Runner's
// passthrough): it went to the host the app addressed, untouched.
const passthrough = "passthrough"

// Summary counts what detour did during a run. Each request is counted once,
// in one of Direct, FailedOver, Passthrough, Errors and Cancelled.
type Summary struct {
	// Requests is every request detour intercepted (tunnelled connections
	// to other hosts are not requests: detour never sees inside them).
	Requests int
	// Direct were answered, whole, by the first upstream of their chain
	// that could take them: one passed for what the request needs (no
	// models entry for its model, a capability it lacks) was never the
	// request's to try, so going past it is routing, not a failover.
	Direct int
	// FailedOver were answered, whole, by a later upstream, because an
	// earlier one failed or was cooling down.
	FailedOver int
	// Failovers counts failed-over requests by "from→to": the chain's first
	// upstream that could take the request, and the one that answered.
	Failovers map[string]int
	// AnsweredBy counts answers by upstream name.
	AnsweredBy map[string]int
	// Passthrough went to the vendor untouched (no route, or not a POST).
	Passthrough int
	// Errors ended with an error the app saw: no upstream answered (a
	// failover that ended in an error included), a stop class (a 400 or
	// 401 passed on), a stream cut after it began, a passthrough that
	// failed.
	Errors int
	// Cut are the Errors whose stream broke off after it began: the app
	// got part of an answer and then an error event.
	Cut int
	// Cancelled were abandoned by the app before the answer was complete.
	Cancelled int
	// WaysIn counts requests by how they reached detour, by the name the
	// summary gives it (waysIn): "HTTPS_PROXY", "base URL", "transparent".
	WaysIn map[string]int
	// Unseen are the connections CMD's processes made past detour, to a
	// vendor's port, that detour never saw (bypass watcher): first sighting
	// per process and address.
	Unseen []Bypass
	// UnseenUnchecked says why Unseen was not watched for ("" when it was).
	UnseenUnchecked string
}

// waysIn names a record's Mode as the summary says it: the variable or
// mechanism that brought the request, which is what a user set or can set.
var waysIn = map[string]string{
	"proxy":       "HTTPS_PROXY",
	"base_url":    "base URL",
	"transparent": "transparent",
}

// String is the line `detour run` prints at exit, e.g.
//
//	detour: 12 requests: 9 answered directly, 3 failed over (primary→backup 3); answered by primary 9, backup 3; 0 errors
func (s Summary) String() string {
	if s.Requests == 0 {
		return "detour: no requests were intercepted (does the app call a host of the policy's routes, honour HTTPS_PROXY and trust detour's CA?)" + s.unseen()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "detour: %d %s: %d answered directly, %d failed over", s.Requests, plural(s.Requests, "request", "requests"), s.Direct, s.FailedOver)
	if len(s.Failovers) > 0 {
		fmt.Fprintf(&b, " (%s)", counts(s.Failovers))
	}
	if len(s.AnsweredBy) > 0 {
		fmt.Fprintf(&b, "; answered by %s", counts(s.AnsweredBy))
	}
	if s.Passthrough > 0 {
		fmt.Fprintf(&b, "; %d passed through", s.Passthrough)
	}
	fmt.Fprintf(&b, "; %d %s", s.Errors, plural(s.Errors, "error", "errors"))
	if s.Cut > 0 {
		fmt.Fprintf(&b, " (%d %s after it began)", s.Cut, plural(s.Cut, "stream cut", "streams cut"))
	}
	if s.Cancelled > 0 {
		fmt.Fprintf(&b, ", %d cancelled by the app", s.Cancelled)
	}
	if len(s.WaysIn) > 0 {
		fmt.Fprintf(&b, "; ways in: %s", counts(s.WaysIn))
	}
	b.WriteString(s.unseen())
	return b.String()
}

// unseen is the summary's part about connections detour never saw: each one
// (the live warning gave the hint already), or why they were not looked for.
func (s Summary) unseen() string {
	if s.UnseenUnchecked != "" {
		return "; connections past detour not checked (" + s.UnseenUnchecked + ")"
	}
	if len(s.Unseen) == 0 {
		return ""
	}
	parts := make([]string, len(s.Unseen))
	for i, u := range s.Unseen {
		parts[i] = fmt.Sprintf("%s (pid %d) → %s", u.Runtime, u.PID, u.Remote)
	}
	n := len(s.Unseen)
	return fmt.Sprintf("; warning: %d %s detour never saw: %s", n, plural(n, "connection", "connections"), strings.Join(parts, ", "))
}

// counts renders m as "a 3, b 1": most first, then by name, so the line is
// the same on every run with the same counts.
func counts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if m[keys[i]] != m[keys[j]] {
			return m[keys[i]] > m[keys[j]]
		}
		return keys[i] < keys[j]
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// tally builds a Summary from detour's request records, as they finish.
type tally struct {
	mu sync.Mutex
	s  Summary
}

func newTally() *tally {
	return &tally{s: Summary{Failovers: map[string]int{}, AnsweredBy: map[string]int{}, WaysIn: map[string]int{}}}
}

// add counts one finished request. It is chain.Runner's OnRecord, which
// must not keep the record: only counts are taken from it.
func (t *tally) add(r *chain.Record) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := &t.s
	s.Requests++
	if r.Mode != "" {
		way, ok := waysIn[r.Mode]
		if !ok {
			way = r.Mode
		}
		s.WaysIn[way]++
	}
	switch {
	case cancelled(r):
		s.Cancelled++
	case r.Error != "" || r.AnsweredBy == "":
		// An answer that began and broke off has an AnsweredBy too: it is
		// an error all the same, and no failover that worked.
		s.Errors++
		if wasCut(r) {
			s.Cut++
		}
	case r.AnsweredBy == passthrough:
		s.Passthrough++
	case firstCandidate(r) != r.AnsweredBy:
		s.FailedOver++
		s.Failovers[firstCandidate(r)+"→"+r.AnsweredBy]++
		s.AnsweredBy[r.AnsweredBy]++
	default:
		s.Direct++
		s.AnsweredBy[r.AnsweredBy]++
	}
}

// firstCandidate is the first upstream the request was for: the chain's
// first that was tried or skipped for its state, past those skipped for
// what the request needs. The answering upstream when there is none.
func firstCandidate(r *chain.Record) string {
	for _, a := range r.Attempts {
		if !a.Routing {
			return a.Upstream
		}
	}
	return r.AnsweredBy
}

// cancelled reports whether the app went away before its answer was
// complete: that is the app's doing, not a failure of detour or a vendor.
// The chain says so with status 499, an attempt's client_gone, or (an
// answer being written when the app hung up) only in the record's error.
func cancelled(r *chain.Record) bool {
	if r.Status == 499 || strings.HasPrefix(r.Error, "client went away") {
		return true
	}
	for _, a := range r.Attempts {
		if a.Outcome == chain.OutcomeClientGone {
			return true
		}
	}
	return false
}

// wasCut reports whether the answering attempt broke off after its stream
// began.
func wasCut(r *chain.Record) bool {
	for _, a := range r.Attempts {
		if a.Outcome == chain.OutcomeCut {
			return true
		}
	}
	return false
}

// summary returns a copy of the counts so far.
func (t *tally) summary() Summary {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.s
	s.Failovers = maps.Clone(s.Failovers)
	s.AnsweredBy = maps.Clone(s.AnsweredBy)
	s.WaysIn = maps.Clone(s.WaysIn)
	return s
}
