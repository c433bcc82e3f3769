package policy

// This file is routes[].select (which upstream of a chain goes first) and
// the upstream fields the chain's pre-filters read (context_window,
// capabilities): their wire schema, compiled form and validation. The
// choice itself is made per request by internal/chain (select.go there),
// from this compiled form and the upstreams' recent windows.

import (
	"fmt"
	"strings"
)

// Strategy is how a route chooses the first upstream of its chain.
type Strategy string

// The selection strategies.
const (
	// SelectOrdered keeps the chain as written: its first upstream goes
	// first. The default.
	SelectOrdered Strategy = "ordered"
	// SelectWeighted draws the first upstream at random in proportion to
	// select.weights (a canary share), or by a hash of the conversation
	// when select.sticky is set.
	SelectWeighted Strategy = "weighted"
	// SelectScored puts first the upstream with the lowest score over its
	// recent window: latency·p95 + cost·price + errors·failure rate.
	SelectScored Strategy = "scored"
)

// Defaults of select.
const (
	// DefaultMinSamples is select.min_samples: the counted attempts an
	// upstream's window must hold before its score is trusted.
	DefaultMinSamples = 20
	// MaxMinSamples bounds min_samples: it is the size of the window the
	// chain keeps per upstream, so a larger guard could never be met.
	MaxMinSamples = 128
	// DefaultScoreLatency, DefaultScoreCost and DefaultScoreErrors are the
	// weights of select.score when it is absent: a second of p95 counts
	// 1, price counts nothing (prices are not known unless configured),
	// and a failure rate of 10 % counts as much as a second of p95 (a
	// failed attempt costs the app a failover, often a timeout).
	DefaultScoreLatency = 1.0
	DefaultScoreCost    = 0.0
	DefaultScoreErrors  = 10.0
)

// SelectFile is routes[].select: which upstream of the chain is tried
// first. Whatever the strategy, the upstreams not chosen keep their chain
// order after the chosen one, as the failover order, and the gates
// (cooldowns, breakers, limits) still apply to every one of them.
type SelectFile struct {
	// Strategy is "ordered" (the chain as written), "weighted" or
	// "scored". Default ordered.
	Strategy string `json:"strategy,omitempty"`
	// Weights (weighted only, required there) are the upstreams' shares
	// of first place, by upstream name, in any unit: {"openai": 95,
	// "azure": 5} sends 5 % of requests to azure first. An upstream of
	// the chain without a weight is never chosen first. Each name must be
	// in the route's chain (or one of its tiers' chains); no weight may be
	// negative, and not all may be 0.
	Weights map[string]float64 `json:"weights,omitempty"`
	// Sticky (weighted only) chooses by a hash of the app's credential and
	// the conversation's first message instead of at random, so that the
	// turns of one conversation go to the same upstream (its prompt
	// cache, its style). The credential is hashed, never stored. Default
	// false.
	Sticky bool `json:"sticky,omitempty"`
	// Score (scored only) weighs the terms of an upstream's score:
	// latency·p95 (seconds) + cost·price (USD per 1M tokens) +
	// errors·failure rate (0 to 1). The lowest score goes first; ties keep
	// chain order. Absent: DefaultScoreLatency, DefaultScoreCost,
	// DefaultScoreErrors.
	Score *ScoreFile `json:"score,omitempty"`
	// MinSamples (scored only) is how many counted attempts an upstream's
	// window must hold before it is judged by its score. An upstream with
	// fewer is on trial instead: it goes first, ahead of every judged one
	// (the first such in chain order), until its samples plus its attempts
	// in flight reach MinSamples; then it waits, in chain order, until
	// its samples are in. 0 or absent: DefaultMinSamples; at most
	// MaxMinSamples.
	MinSamples int `json:"min_samples,omitempty"`
}

// ScoreFile weighs the terms of a scored choice. Each weight is at least 0
// (0: the term does not count) and at least one is above 0. Absent fields
// are 0.
type ScoreFile struct {
	// Latency multiplies the upstream's p95 latency to the commit point,
	// in seconds, over its successful attempts in the window.
	Latency float64 `json:"latency,omitempty"`
	// Cost multiplies the upstream's price for the request's model, in USD
	// per 1M tokens (0 when no price is known).
	Cost float64 `json:"cost,omitempty"`
	// Errors multiplies the upstream's failure rate over the window, from
	// 0 to 1.
	Errors float64 `json:"errors,omitempty"`
}

// Selection is a compiled routes[].select. The zero value is ordered.
type Selection struct {
	Strategy Strategy
	// Weights are the shares of first place by upstream name (weighted).
	Weights map[string]float64
	// Sticky chooses by the conversation's hash (weighted).
	Sticky bool
	// Score weighs the terms of the score (scored).
	Score Score
	// MinSamples is the window an upstream needs to be judged (scored).
	MinSamples int
}

// Score is the compiled select.score.
type Score struct {
	Latency, Cost, Errors float64
}

// Ordered reports whether the chain is used as written.
func (s Selection) Ordered() bool { return s.Strategy == "" || s.Strategy == SelectOrdered }

// Capabilities is a set of features a request may need and an upstream may
// claim (upstreams.NAME.capabilities).
type Capabilities uint8

// The capabilities.
const (
	// CapTools: function tools declared, or tool calls and results in the
	// conversation.
	CapTools Capabilities = 1 << iota
	// CapVision: images or documents in the conversation.
	CapVision
	// CapJSON: a JSON response format asked for.
	CapJSON
)

// capabilityNames are the capabilities' names in the policy, in bit order.
var capabilityNames = [...]string{"tools", "vision", "json"}

// String lists the capabilities' names, comma-separated.
func (c Capabilities) String() string {
	var parts []string
	for i, n := range capabilityNames {
		if c&(1<<i) != 0 {
			parts = append(parts, n)
		}
	}
	return strings.Join(parts, ",")
}

// Lacks returns the capabilities of need that u does not claim; none when
// u makes no claim (capabilities absent).
func (u *Upstream) Lacks(need Capabilities) Capabilities {
	if !u.KnowsCapabilities {
		return 0
	}
	return need &^ u.Capabilities
}

// selection compiles routes[i].select into r.Select (p is its path); false
// when it is invalid. It runs after the route's chain or tiers.
func (k *compiler) selection(p string, sf *SelectFile, rf RouteFile, r *Route) bool {
	if sf == nil {
		return true
	}
	before := len(k.src.errs)
	sel := Selection{Strategy: Strategy(sf.Strategy)}
	if sel.Strategy == "" {
		sel.Strategy = SelectOrdered
	}
	switch sel.Strategy {
	case SelectOrdered, SelectWeighted, SelectScored:
	default:
		k.errorf(p+".strategy", "must be one of ordered, weighted, scored; got %q", sf.Strategy)
	}
	only := func(field string, s Strategy, set bool) {
		if set && sel.Strategy != s {
			k.errorf(p+"."+field, "applies to strategy %q only; this route's strategy is %q", s, sel.Strategy)
		}
	}
	only("weights", SelectWeighted, sf.Weights != nil || k.present(p+".weights"))
	only("sticky", SelectWeighted, sf.Sticky)
	only("score", SelectScored, sf.Score != nil)
	only("min_samples", SelectScored, sf.MinSamples != 0)

	if sel.Strategy == SelectWeighted {
		sel.Weights, sel.Sticky = k.weights(p+".weights", sf.Weights, rf), sf.Sticky
	}
	if sel.Strategy == SelectScored {
		sel.Score = Score{Latency: DefaultScoreLatency, Cost: DefaultScoreCost, Errors: DefaultScoreErrors}
		if sf.Score != nil {
			sel.Score = Score{Latency: sf.Score.Latency, Cost: sf.Score.Cost, Errors: sf.Score.Errors}
			for _, t := range []struct {
				name string
				v    float64
			}{{"latency", sf.Score.Latency}, {"cost", sf.Score.Cost}, {"errors", sf.Score.Errors}} {
				if t.v < 0 {
					k.errorf(p+".score."+t.name, "must not be negative (0: the term does not count); got %g", t.v)
				}
			}
			if sel.Score.Latency <= 0 && sel.Score.Cost <= 0 && sel.Score.Errors <= 0 {
				k.errorf(p+".score", "at least one of latency, cost, errors must be above 0, or every upstream would score the same")
			}
		}
		switch {
		case sf.MinSamples < 0:
			k.errorf(p+".min_samples", "must not be negative (0 or absent: the default, %d); got %d", DefaultMinSamples, sf.MinSamples)
		case sf.MinSamples > MaxMinSamples:
			k.errorf(p+".min_samples", "must be at most %d, the size of the window kept per upstream; got %d", MaxMinSamples, sf.MinSamples)
		case sf.MinSamples == 0:
			sel.MinSamples = DefaultMinSamples
		default:
			sel.MinSamples = sf.MinSamples
		}
	}
	if len(k.src.errs) > before {
		return false
	}
	r.Select = sel
	return true
}

// weights checks select.weights against the route's chains.
func (k *compiler) weights(p string, w map[string]float64, rf RouteFile) map[string]float64 {
	if len(w) == 0 {
		k.errorf(p, `required for strategy "weighted": a share per upstream, e.g. {"openai": 95, "azure": 5}`)
		return nil
	}
	inChain := map[string]bool{}
	for _, n := range rf.Chain {
		inChain[n] = true
	}
	for _, ch := range rf.Tiers {
		for _, n := range ch {
			inChain[n] = true
		}
	}
	before, total := len(k.src.errs), 0.0
	for _, name := range sortedKeys(w) {
		v := w[name]
		switch {
		case !inChain[name]:
			k.errorf(p+"."+name, "upstream %q is not in this route's chain (chain: %s)", name, strings.Join(chainNames(rf), ", "))
		case v < 0:
			k.errorf(p+"."+name, "must not be negative (0: never chosen first); got %g", v)
		case k.c.Upstreams[name] != nil && k.c.Upstreams[name].Static:
			k.errorf(p+"."+name, "upstream %q is static: it answers only when every other upstream has failed, never first", name)
		default:
			total += v
		}
	}
	if total <= 0 && len(k.src.errs) == before {
		k.errorf(p, "every weight is 0: no upstream could be chosen first")
	}
	return w
}

// chainNames lists a route's upstream names, chain or tiers, for messages.
func chainNames(rf RouteFile) []string {
	if len(rf.Chain) > 0 {
		return rf.Chain
	}
	var out []string
	seen := map[string]bool{}
	for _, t := range sortedKeys(rf.Tiers) {
		for _, n := range rf.Tiers[t] {
			if !seen[n] {
				seen[n] = true
				out = append(out, n)
			}
		}
	}
	return out
}

// upstreamFilters compiles every upstream's context_window and
// capabilities into the compiled upstreams.
func (k *compiler) upstreamFilters(ups map[string]UpstreamFile) {
	for _, name := range sortedKeys(ups) {
		uf := ups[name]
		p := "upstreams." + name
		hasCaps := uf.Capabilities != nil || k.present(p+".capabilities")
		if uf.Shape == string(ShapeStatic) {
			for _, f := range []struct {
				name string
				set  bool
			}{{"context_window", uf.ContextWindow != 0}, {"capabilities", hasCaps}} {
				if f.set {
					k.errorf(p+"."+f.name, "a static upstream sends no request, so it takes no %s: it answers every request", f.name)
				}
			}
			continue
		}
		if uf.ContextWindow < 0 {
			k.errorf(p+".context_window", "must not be negative (0 or absent: unknown, never skipped for it); got %d", uf.ContextWindow)
		}
		var caps Capabilities
		for i, c := range uf.Capabilities {
			bit := Capabilities(0)
			for j, n := range capabilityNames {
				if c == n {
					bit = 1 << j
				}
			}
			switch {
			case bit == 0:
				k.errorf(fmt.Sprintf("%s.capabilities[%d]", p, i), "must be one of %s; got %q", strings.Join(capabilityNames[:], ", "), c)
			case caps&bit != 0:
				k.errorf(fmt.Sprintf("%s.capabilities[%d]", p, i), "%q is listed twice", c)
			}
			caps |= bit
		}
		if u := k.c.Upstreams[name]; u != nil {
			u.ContextWindow = max(uf.ContextWindow, 0)
			u.Capabilities, u.KnowsCapabilities = caps, hasCaps
		}
	}
}
