package chain

// The selection a request would get, computed outside a request: for
// `detour policy explain`, from the windows a running detour's /status
// reports. It walks the same steps as session.selectChain — the same
// pre-filters (filterReason), the same weights, the same scored choice
// (scoredChoice, Score) — so that what explain says is what the runner
// does, except for what is drawn per request (a weighted, unsticky choice).

import (
	"strings"

	"github.com/detour-proxy/detour/internal/health"
	"github.com/detour-proxy/detour/policy"
	"github.com/detour-proxy/detour/rewrite"
	"github.com/detour-proxy/detour/rewrite/translate"
)

// ExplainArgs is a sample request and what ExplainSelection judges it by.
type ExplainArgs struct {
	// Select is the route's selection; Chain the chain (or the tier's
	// chain) the request walks.
	Select policy.Selection
	Chain  []*policy.Upstream
	// App is the app's shape, Path its request path, Model its model and
	// Body its body, as the app would send them.
	App   rewrite.Shape
	Path  string
	Model string
	Body  []byte
	// Windows are the upstreams' windows by name (a running detour's
	// /status); nil when none are known: a scored choice then falls back
	// to the chain order, and ExplainSelection says so in Chosen.
	Windows map[string]health.Window
}

// ExplainSelection is the selection the runner would make for a.
// Chosen is "" when the first upstream is drawn per request (weighted,
// not sticky: the weights give each one's share) or, for scored, when no
// windows are known (liveUnknown is then true, and Chosen is the first
// eligible upstream, the static order). The candidates' pre-filter
// reasons are the runner's own.
func ExplainSelection(a ExplainArgs) (rec SelectionRecord, liveUnknown bool) {
	sel := &a.Select
	rec.Strategy = string(sel.Strategy)
	if rec.Strategy == "" {
		rec.Strategy = string(policy.SelectOrdered)
	}
	rec.Candidates = make([]SelectionCandidate, len(a.Chain))
	known := false
	var need policy.Capabilities
	var tokens, maxTokens int
	if needsFilter(a.Chain) {
		if req, err := translate.DecodeRequest(a.App, a.Body, strings.TrimPrefix(a.Path, a.App.APIRoot())); err == nil && req != nil {
			need, tokens, maxTokens = needsOf(req)
			known = true
		}
	}
	var elig []int
	for i, u := range a.Chain {
		rec.Candidates[i].Upstream = u.Name
		if u.Static {
			continue
		}
		if known {
			if why, _ := filterReason(u, need, tokens, maxTokens); why != "" {
				rec.Candidates[i].SkippedReason = why
				continue
			}
		}
		elig = append(elig, i)
	}
	chosen := -1
	switch sel.Strategy {
	case policy.SelectWeighted:
		for _, i := range elig {
			c := &rec.Candidates[i]
			c.Weight = sel.Weights[a.Chain[i].Name]
			if _, ok := a.Chain[i].MapModel(a.Model); !ok {
				c.Weight, c.SkippedReason = 0, noModelsEntry
			}
		}
		// Drawn per request, or, when sticky, by the conversation's hash
		// (which needs the app's credential): not chosen here.
		return rec, false
	case policy.SelectScored:
		if a.Windows == nil {
			if len(elig) > 0 {
				rec.Chosen = a.Chain[elig[0]].Name
			}
			return rec, true
		}
		chosen = scoredChoice(sel, a.Chain, elig, rec.Candidates, a.Model,
			func(name string) health.Window { return a.Windows[name] }, BlendedPrice)
	}
	if chosen < 0 && len(elig) > 0 {
		chosen = elig[0]
	}
	if chosen >= 0 {
		rec.Chosen = a.Chain[chosen].Name
	}
	return rec, false
}
