package chain

import (
	"strings"

	"github.com/detour-proxy/detour/policy"
	"github.com/detour-proxy/detour/rewrite/ir"
)

// HeaderTier lets an app (or whoever sets headers in front of it) choose
// the request's tier, overriding the classifier.
const HeaderTier = "X-Detour-Tier"

// pickTier decides the tier of a request on a route with tiers (see Tier)
// and puts it and its reasons on the record.
func (s *session) pickTier() string {
	tier, reasons := Tier(s.pol, s.route, s.req.Header.Get(HeaderTier), s.decoded)
	s.rec.Tier, s.rec.Reasons = tier, reasons
	return tier
}

// Tier decides the tier of a request on a route with tiers: the
// x-detour-tier header when it names one of the route's tiers, else the
// classifier's verdict over the prompt (decode gives the request in
// neutral form); a tier the route does not have falls back to the
// classifier's undecided tier. The reasons are safe to log. `detour policy
// explain` uses it too, so that it says what the chain would do.
func Tier(c *policy.Compiled, route *policy.Route, header string, decode func() (*ir.Request, error)) (string, []string) {
	var reasons []string
	if h := strings.ToLower(strings.TrimSpace(header)); h != "" {
		if _, ok := route.Tiers[h]; ok {
			return h, []string{"header:x-detour-tier"}
		}
		reasons = append(reasons, "header:x-detour-tier names no tier of this route: "+truncate(h, 40))
	}
	k := c.Classifier
	var tier string
	if req, err := decode(); err != nil {
		tier = k.Undecided
		reasons = append(reasons, "prompt unreadable")
	} else {
		last, chars, files := req.PromptStats()
		var why []string
		tier, why = k.Classify(policy.TierInput{Text: last, InputChars: chars, Files: files})
		reasons = append(reasons, why...)
	}
	if _, ok := route.Tiers[tier]; !ok {
		reasons = append(reasons, "route has no tier "+tier+"; using "+k.Undecided)
		tier = k.Undecided
	}
	return tier, reasons
}
