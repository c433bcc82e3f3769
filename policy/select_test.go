package policy

import (
	"slices"
	"testing"
)

func selectRoute(sel string) policyParts {
	return policyParts{routes: `
    {"name": "r", "match": {"host": "api.openai.com"}, "chain": ["o", "a", "sorry"], "select": ` + sel + `}`}
}

func TestSelectCompiles(t *testing.T) {
	for _, tc := range []struct {
		name, sel string
		want      Selection
	}{
		{"ordered by default", `{}`, Selection{Strategy: SelectOrdered}},
		{"weighted", `{"strategy": "weighted", "weights": {"o": 95, "a": 5}, "sticky": true}`,
			Selection{Strategy: SelectWeighted, Weights: map[string]float64{"o": 95, "a": 5}, Sticky: true}},
		{"weighted with a zero", `{"strategy": "weighted", "weights": {"o": 1, "a": 0}}`,
			Selection{Strategy: SelectWeighted, Weights: map[string]float64{"o": 1, "a": 0}}},
		{"scored, defaults", `{"strategy": "scored"}`,
			Selection{Strategy: SelectScored, Score: Score{Latency: DefaultScoreLatency, Cost: DefaultScoreCost, Errors: DefaultScoreErrors}, MinSamples: DefaultMinSamples}},
		{"scored, given", `{"strategy": "scored", "score": {"latency": 1, "cost": 0.5, "errors": 2}, "min_samples": 5}`,
			Selection{Strategy: SelectScored, Score: Score{Latency: 1, Cost: 0.5, Errors: 2}, MinSamples: 5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := compileParts(t, selectRoute(tc.sel)).Routes[0].Select
			if got.Strategy != tc.want.Strategy || got.Sticky != tc.want.Sticky || got.Score != tc.want.Score || got.MinSamples != tc.want.MinSamples || len(got.Weights) != len(tc.want.Weights) {
				t.Fatalf("got %+v; want %+v", got, tc.want)
			}
			for k, v := range tc.want.Weights {
				if got.Weights[k] != v {
					t.Errorf("weight %s = %g; want %g", k, got.Weights[k], v)
				}
			}
		})
	}
	if c := compileParts(t, policyParts{}); !c.Routes[0].Select.Ordered() {
		t.Errorf("a route without select is %+v; want ordered", c.Routes[0].Select)
	}
}

// Every mistake is refused with its field (and, by compileErrs, a line).
func TestSelectRefusals(t *testing.T) {
	for _, tc := range []struct {
		name, sel string
		want      []fieldErr
	}{
		{"unknown strategy", `{"strategy": "fastest"}`,
			[]fieldErr{{"routes[0].select.strategy", `must be one of ordered, weighted, scored; got "fastest"`}}},
		{"weights naming an upstream not in the chain", `{"strategy": "weighted", "weights": {"o": 9, "azure": 1}}`,
			[]fieldErr{{"routes[0].select.weights.azure", `upstream "azure" is not in this route's chain (chain: o, a, sorry)`}}},
		{"negative weight", `{"strategy": "weighted", "weights": {"o": 9, "a": -1}}`,
			[]fieldErr{{"routes[0].select.weights.a", "must not be negative (0: never chosen first); got -1"}}},
		{"all-zero weights", `{"strategy": "weighted", "weights": {"o": 0, "a": 0}}`,
			[]fieldErr{{"routes[0].select.weights", "every weight is 0: no upstream could be chosen first"}}},
		{"weighted without weights", `{"strategy": "weighted"}`,
			[]fieldErr{{"routes[0].select.weights", `required for strategy "weighted": a share per upstream, e.g. {"openai": 95, "azure": 5}`}}},
		{"a weight on the static upstream", `{"strategy": "weighted", "weights": {"o": 1, "sorry": 1}}`,
			[]fieldErr{{"routes[0].select.weights.sorry", `upstream "sorry" is static: it answers only when every other upstream has failed, never first`}}},
		{"weights without weighted", `{"strategy": "scored", "weights": {"o": 1}}`,
			[]fieldErr{{"routes[0].select.weights", `applies to strategy "weighted" only; this route's strategy is "scored"`}}},
		{"sticky without weighted", `{"sticky": true}`,
			[]fieldErr{{"routes[0].select.sticky", `applies to strategy "weighted" only; this route's strategy is "ordered"`}}},
		{"min_samples below 0", `{"strategy": "scored", "min_samples": -1}`,
			[]fieldErr{{"routes[0].select.min_samples", "must not be negative (0 or absent: the default, 20); got -1"}}},
		{"min_samples over the window", `{"strategy": "scored", "min_samples": 129}`,
			[]fieldErr{{"routes[0].select.min_samples", "must be at most 128, the size of the window kept per upstream; got 129"}}},
		{"min_samples without scored", `{"strategy": "weighted", "weights": {"o": 1}, "min_samples": 3}`,
			[]fieldErr{{"routes[0].select.min_samples", `applies to strategy "scored" only; this route's strategy is "weighted"`}}},
		{"negative score weight", `{"strategy": "scored", "score": {"latency": -1, "errors": 1}}`,
			[]fieldErr{{"routes[0].select.score.latency", "must not be negative (0: the term does not count); got -1"}}},
		{"all-zero score", `{"strategy": "scored", "score": {}}`,
			[]fieldErr{{"routes[0].select.score", "at least one of latency, cost, errors must be above 0, or every upstream would score the same"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := compileErrs(t, selectRoute(tc.sel)); !slices.Equal(got, tc.want) {
				t.Errorf("errors\n got %v\nwant %v", got, tc.want)
			}
		})
	}
}

func TestSelectWeightsMayNameAnyTiersUpstream(t *testing.T) {
	c := compileParts(t, policyParts{routes: `
    {"name": "r", "match": {"host": "api.openai.com"}, "tiers": {"hard": ["o", "a"], "easy": ["a"]},
     "select": {"strategy": "weighted", "weights": {"o": 1, "a": 1}}}`})
	if c.Routes[0].Select.Strategy != SelectWeighted {
		t.Fatalf("select = %+v", c.Routes[0].Select)
	}
}

func TestUpstreamFiltersCompile(t *testing.T) {
	c := compileParts(t, policyParts{upstreams: `
    "o": {"shape": "openai", "base_url": "https://api.openai.com/v1", "auth": {"from": "client"}, "context_window": 128000, "capabilities": ["tools", "json"]},
    "a": {"shape": "anthropic", "base_url": "https://api.anthropic.com", "auth": {"env": "BACKUP_KEY"}, "models": {"*": "claude-haiku-4-5"}, "capabilities": []},
    "sorry": {"shape": "static", "text": "Busy."}`})
	o, a, sorry := c.Upstreams["o"], c.Upstreams["a"], c.Upstreams["sorry"]
	if o.ContextWindow != 128000 || o.Capabilities != CapTools|CapJSON || !o.KnowsCapabilities {
		t.Errorf("o: window %d, capabilities %v (known %v)", o.ContextWindow, o.Capabilities, o.KnowsCapabilities)
	}
	if got := o.Lacks(CapTools | CapVision); got != CapVision {
		t.Errorf("o lacks %v; want vision", got)
	}
	if got := a.Lacks(CapTools); got != CapTools || !a.KnowsCapabilities {
		t.Errorf("a (capabilities []) lacks %v; want tools", got)
	}
	if got := sorry.Lacks(CapTools | CapVision | CapJSON); got != 0 {
		t.Errorf("a static upstream lacks %v; want nothing", got)
	}
}

func TestUpstreamFilterRefusals(t *testing.T) {
	got := compileErrs(t, policyParts{upstreams: `
    "o": {"shape": "openai", "base_url": "https://api.openai.com/v1", "auth": {"from": "client"}, "context_window": -1, "capabilities": ["tools", "audio", "tools"]},
    "a": {"shape": "anthropic", "base_url": "https://api.anthropic.com", "auth": {"env": "BACKUP_KEY"}, "models": {"*": "claude-haiku-4-5"}},
    "sorry": {"shape": "static", "text": "Busy.", "context_window": 1000, "capabilities": ["tools"]}`})
	want := []fieldErr{
		{"upstreams.o.context_window", "must not be negative (0 or absent: unknown, never skipped for it); got -1"},
		{"upstreams.o.capabilities[1]", `must be one of tools, vision, json; got "audio"`},
		{"upstreams.o.capabilities[2]", `"tools" is listed twice`},
		{"upstreams.sorry.context_window", "a static upstream sends no request, so it takes no context_window: it answers every request"},
		{"upstreams.sorry.capabilities", "a static upstream sends no request, so it takes no capabilities: it answers every request"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("errors\n got %v\nwant %v", got, want)
	}
}
