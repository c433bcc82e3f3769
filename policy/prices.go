package policy

import (
	"sort"
	"strings"

	"github.com/detour-proxy/detour/rewrite"
)

// Price is what an upstream charges for the models a glob matches, in USD
// per 1M tokens. Immutable.
type Price struct {
	// Pattern is the glob of upstreams.NAME.prices.
	Pattern string
	// Input is per prompt token not read from the vendor's cache.
	Input float64
	// Output is per generated token.
	Output float64
	// CachedInput is per prompt token read from the vendor's cache; the
	// compiler sets it to Input when the policy gives none.
	CachedInput float64
}

// tokensPerUnit is the number of tokens prices are quoted for.
const tokensPerUnit = 1e6

// Cost is the USD cost of an answer's usage at this price. u.Input counts
// every prompt token, the cachedInput ones (rewrite.ExtractCachedInput)
// among them, so those are charged at CachedInput and the rest at Input.
func (p Price) Cost(u rewrite.Usage, cachedInput int64) float64 {
	cached := min(max(cachedInput, 0), max(u.Input, 0))
	fresh := max(u.Input, 0) - cached
	return (float64(fresh)*p.Input + float64(cached)*p.CachedInput + float64(max(u.Output, 0))*p.Output) / tokensPerUnit
}

// PriceFor returns the price of model on u: the most specific of its
// prices' globs that matches (most characters other than '*', then fewest
// '*', then the first in byte order; the compiler keeps them in that
// order). ok is false when none matches or u has no prices.
func (u *Upstream) PriceFor(model string) (Price, bool) {
	for _, p := range u.Prices {
		if globMatch(p.Pattern, model) {
			return p, true
		}
	}
	return Price{}, false
}

// Price returns what upstream charges for model (the model detour asks
// that upstream for, after its models mapping), by PriceFor. ok is false
// when the upstream does not exist or prices nothing that matches. It is
// the one lookup for everything that weighs cost: answers' cost_usd,
// budgets, and a selection that scores upstreams by price.
func (c *Compiled) Price(upstream, model string) (Price, bool) {
	u := c.Upstreams[upstream]
	if u == nil {
		return Price{}, false
	}
	return u.PriceFor(model)
}

// moreSpecific orders globs for PriceFor: more literal characters first,
// then fewer stars, then byte order (so that the order, and the winner of
// a tie, never depend on the map the file was decoded into).
func moreSpecific(a, b string) bool {
	sa, sb := strings.Count(a, "*"), strings.Count(b, "*")
	la, lb := len(a)-sa, len(b)-sb
	if la != lb {
		return la > lb
	}
	if sa != sb {
		return sa < sb
	}
	return a < b
}

// prices compiles an upstream's prices; p is their field path.
func (k *compiler) prices(p string, pf map[string]PriceFile) []Price {
	if len(pf) == 0 {
		return nil
	}
	out := make([]Price, 0, len(pf))
	for _, glob := range sortedKeys(pf) {
		f := pf[glob]
		gp := p + "." + glob
		if strings.TrimSpace(glob) == "" {
			k.errorf(gp, "a model glob must not be empty (use \"*\" for every model)")
			continue
		}
		pr := Price{Pattern: glob}
		ok := true
		for _, v := range []struct {
			name string
			val  *float64
			dst  *float64
		}{{"input", f.Input, &pr.Input}, {"output", f.Output, &pr.Output}, {"cached_input", f.CachedInput, &pr.CachedInput}} {
			switch {
			case v.val == nil && v.name != "cached_input":
				k.errorf(gp+"."+v.name, "required: USD per 1M %s tokens, e.g. %g (0 for a free model)", strings.ReplaceAll(v.name, "_", " "), 2.5)
				ok = false
			case v.val == nil:
			case *v.val < 0:
				k.errorf(gp+"."+v.name, "must not be negative; got %g", *v.val)
				ok = false
			default:
				*v.dst = *v.val
			}
		}
		if f.CachedInput == nil {
			pr.CachedInput = pr.Input
		}
		if ok {
			out = append(out, pr)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return moreSpecific(out[i].Pattern, out[j].Pattern) })
	return out
}
