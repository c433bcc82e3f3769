package chain

import (
	"strings"

	"github.com/detour-proxy/detour/policy"
)

// HeaderTier lets an app (or whoever sets headers in front of it) choose
// the request's tier, overriding the classifier.
const HeaderTier = "X-Detour-Tier"

// pickTier decides the tier of a request on a route with tiers: the
// x-detour-tier header when it names one of the route's tiers, else the
// classifier's verdict over the prompt; a tier the route does not have
// falls back to the classifier's undecided tier. The reasons go to the log.
func (s *session) pickTier() string {
	var reasons []string
	if h := strings.ToLower(strings.TrimSpace(s.req.Header.Get(HeaderTier))); h != "" {
		if _, ok := s.route.Tiers[h]; ok {
			s.rec.Tier, s.rec.Reasons = h, []string{"header:x-detour-tier"}
			return h
		}
		reasons = append(reasons, "header:x-detour-tier names no tier of this route: "+truncate(h, 40))
	}
	c := s.pol.Classifier
	var tier string
	if req, err := s.decoded(); err != nil {
		tier = c.Undecided
		reasons = append(reasons, "prompt unreadable")
	} else {
		last, chars, files := req.PromptStats()
		var why []string
		tier, why = c.Classify(policy.TierInput{Text: last, InputChars: chars, Files: files})
		reasons = append(reasons, why...)
	}
	if _, ok := s.route.Tiers[tier]; !ok {
		reasons = append(reasons, "route has no tier "+tier+"; using "+c.Undecided)
		tier = c.Undecided
	}
	s.rec.Tier, s.rec.Reasons = tier, reasons
	return tier
}
