package cli

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/detour-proxy/detour/internal/admin"
	"github.com/detour-proxy/detour/internal/chain"
	"github.com/detour-proxy/detour/internal/health"
	"github.com/detour-proxy/detour/policy"
)

// explainSelection writes the selection the runner would make for the
// sample request (chain.ExplainSelection): the strategy, each candidate
// with its weight or score (from the running detour's windows, when it
// runs this file) or why it cannot go first, and the chosen upstream —
// the fields of the log line's selection.
func explainSelection(w io.Writer, route *policy.Route, ch []*policy.Upstream, path, model string, body []byte,
	windows map[string]health.Window, liveErr error) {
	sel := route.Select
	rec, unknown := chain.ExplainSelection(chain.ExplainArgs{Select: sel, Chain: ch, App: route.Shape, Path: path,
		Model: model, Body: body, Windows: windows})
	switch policy.Strategy(rec.Strategy) {
	case policy.SelectWeighted:
		how := "drawn at random per request in proportion to the weights"
		if sel.Sticky {
			how = "drawn per conversation (sticky: a hash of the app's credential and first messages) in proportion to the weights"
		}
		fmt.Fprintf(w, "selection:\tweighted, %s\n", how)
	case policy.SelectScored:
		fmt.Fprintf(w, "selection:\tscored, lowest score first: %g·p95 s + %g·price + %g·failure rate, judged after min_samples %d\n",
			sel.Score.Latency, sel.Score.Cost, sel.Score.Errors, sel.MinSamples)
		if unknown {
			why := "no running detour answered"
			if liveErr == nil {
				why = "the running detour runs another policy, or its /status has no windows"
			}
			fmt.Fprintf(w, "\tlive stats not available (%s): the static order is shown, its first eligible upstream first\n", why)
		}
	default:
		fmt.Fprintf(w, "selection:\tordered, the chain as written\n")
	}
	total := 0.0
	for _, c := range rec.Candidates {
		total += c.Weight
	}
	for _, c := range rec.Candidates {
		var parts []string
		switch {
		case rec.Strategy == string(policy.SelectWeighted) && c.SkippedReason == "":
			share := 0.0
			if total > 0 {
				share = c.Weight / total * 100
			}
			parts = append(parts, fmt.Sprintf("weight %g (%.1f %% of first places)", c.Weight, share))
		case rec.Strategy == string(policy.SelectScored) && !unknown && c.SkippedReason == "":
			win := fmt.Sprintf("%d samples, p95 %s, failure rate %.2f", c.Samples, c.P95.Round(time.Millisecond), c.FailureRate)
			switch {
			case c.Scored:
				parts = append(parts, fmt.Sprintf("score %.4g (%s)", c.Score, win))
			case c.Trial:
				parts = append(parts, fmt.Sprintf("on trial: %s, fewer than min_samples %d", win, sel.MinSamples))
			}
		}
		if c.SkippedReason != "" {
			parts = append(parts, "skipped: "+c.SkippedReason)
		}
		if len(parts) == 0 {
			parts = append(parts, "candidate")
		}
		fmt.Fprintf(w, "  %s\t%s\n", c.Upstream, strings.Join(parts, "; "))
	}
	switch {
	case rec.Chosen != "":
		fmt.Fprintf(w, "chosen:\t%s (then the others in chain order)\n", rec.Chosen)
	case rec.Strategy == string(policy.SelectWeighted):
		fmt.Fprintf(w, "chosen:\tdrawn per request (see the shares above)\n")
	default:
		fmt.Fprintf(w, "chosen:\tnone: no upstream can take this request\n")
	}
}

// windowOf is a /status window as the selection reads it.
func windowOf(j *admin.WindowJSON) health.Window {
	w := health.Window{Samples: j.Samples, Successes: j.Successes, InFlight: j.InFlight, FailureRate: j.FailureRate}
	if j.P95Ms != nil {
		w.P95 = time.Duration(*j.P95Ms * float64(time.Millisecond))
	}
	return w
}

// recoveryNow is chain.RecoveryStep at the wall clock's now, which is the
// running detour's (its /status reports times on it).
func recoveryNow(since time.Time, recovery time.Duration) (share string, until time.Time, ok bool) {
	return chain.RecoveryStep(since, time.Now(), recovery)
}
