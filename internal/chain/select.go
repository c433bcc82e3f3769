package chain

// Selection: which upstream of the chain goes first (routes[].select), and
// the pre-filters that take out, before anything is sent, the upstreams a
// request cannot fit (context_window) or needs more of (capabilities).
// The chain runner walks what selectChain returns exactly as it walks a
// chain as written: the chosen upstream, then the others in chain order as
// the failover order, a static upstream last. No second routing engine:
// only the order changes.

import (
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/detour-proxy/detour/internal/health"
	"github.com/detour-proxy/detour/policy"
	"github.com/detour-proxy/detour/rewrite"
	"github.com/detour-proxy/detour/rewrite/ir"
)

// selectInline is the chain length a session chooses for without
// allocating: its buffers are arrays of this size, in the session (on the
// heap already). Longer chains get slices.
const selectInline = 8

// selectState is one request's selection: the chain in the order chosen,
// the candidates' record, and the log line's summary of both. It comes from
// selectPool, so that a route that selects allocates nothing for it per
// request, and a route that does not carries none of its near-kilobyte; the
// record gives it back once its log line is written (releaseSelection).
type selectState struct {
	order [selectInline]*policy.Upstream
	elig  [selectInline]int
	cands [selectInline]SelectionCandidate
	rec   SelectionRecord
}

var selectPool = sync.Pool{New: func() any { return new(selectState) }}

// releaseSelection gives rec's selection state back to the pool, once the
// log line and OnRecord are done with it (OnRecord must not keep the
// record): rec.Selection is cleared, so that nothing points into it.
func releaseSelection(rec *Record) {
	if rec.selState == nil {
		return
	}
	rec.Selection = nil
	selectPool.Put(rec.selState)
	rec.selState = nil
}

// SelectionRecord is the log line's selection: the strategy, every upstream
// of the chain as a candidate, and the one chosen to go first.
type SelectionRecord struct {
	Strategy   string
	Candidates []SelectionCandidate
	// Chosen is the upstream put first; "" when none could be.
	Chosen string
}

// SelectionCandidate is one upstream as the selection saw it.
type SelectionCandidate struct {
	Upstream string
	// Weight is its share of first place (weighted).
	Weight float64
	// Scored reports that it was judged (scored): Score is its score over
	// the window of Samples counted attempts, from P95 and FailureRate.
	Scored      bool
	Score       float64
	Samples     int
	P95         time.Duration
	FailureRate float64
	// Trial reports that it had fewer samples than min_samples (scored):
	// not judged, and first if it was the first such with room for more.
	Trial bool
	// SkippedReason says why it could not go first: a pre-filter took it
	// out (it is also a skipped attempt), or it has no models entry for
	// the request's model.
	SkippedReason string
}

// dict is the selection as the log line writes it.
func (r *SelectionRecord) dict() *zerolog.Event {
	cands := zerolog.Arr()
	for i := range r.Candidates {
		c := &r.Candidates[i]
		d := zerolog.Dict().Str("upstream", c.Upstream)
		switch r.Strategy {
		case string(policy.SelectWeighted):
			d = d.Float64("weight", c.Weight)
		case string(policy.SelectScored):
			if c.Scored {
				d = d.Float64("score", c.Score)
			}
			if c.Trial {
				d = d.Bool("trial", true)
			}
			d = d.Int("samples", c.Samples).Float64("p95_ms", ms(c.P95)).Float64("failure_rate", c.FailureRate)
		}
		if c.SkippedReason != "" {
			d = d.Str("skipped_reason", c.SkippedReason)
		}
		cands = cands.Dict(d)
	}
	return zerolog.Dict().Str("strategy", r.Strategy).Array("candidates", cands).Str("chosen", r.Chosen)
}

// Windows is the per-upstream window scored selections read (p95, failure
// rate, samples, in flight), fed by every attempt this runner makes. It
// lives in the Runner, which lives as long as the process, so it outlives
// policy reloads as the health registry does.
func (r *Runner) Windows() *health.Windows { return &r.windows }

// price is the cost term's price of u for model: Runner.Price when set,
// else u's prices blended 3:1 input to output (the usual blend for chat
// traffic, which reads more than it writes), else 0.
func (r *Runner) price(u *policy.Upstream, model string) float64 {
	if r.Price != nil {
		return r.Price(u, model)
	}
	return BlendedPrice(u, model)
}

// BlendedPrice is the cost term's price of u for model when the Runner has
// no Price of its own: u's prices blended 3:1 input to output, USD per 1M
// tokens; 0 when u has none for model.
func BlendedPrice(u *policy.Upstream, model string) float64 {
	if p, ok := u.PriceFor(model); ok {
		return (3*p.Input + p.Output) / 4
	}
	return 0
}

// random is a uniform 64-bit number: Runner.Rand, or math/rand/v2's.
func (r *Runner) random() uint64 {
	if r.Rand != nil {
		return r.Rand()
	}
	return rand.Uint64()
}

// needsFilter reports whether some upstream of chain declares what the
// pre-filters compare the request with. Only then is the request decoded
// for them: a chain that declares nothing pays nothing.
func needsFilter(chain []*policy.Upstream) bool {
	for _, u := range chain {
		if u.ContextWindow > 0 || u.KnowsCapabilities {
			return true
		}
	}
	return false
}

// selectChain returns chain as this request walks it: without the
// upstreams a pre-filter took out (each recorded as a skipped attempt), and
// with the upstream the route's strategy chose first. ok is false when the
// pre-filters took out every upstream: the app has been answered 400.
func (s *session) selectChain(chain []*policy.Upstream) (out []*policy.Upstream, ok bool) {
	sel := &s.route.Select
	filtering := needsFilter(chain)
	if sel.Ordered() && !filtering {
		return chain, true
	}
	st := selectPool.Get().(*selectState)
	s.rec.selState = st
	n := len(chain)
	cands, elig, order := st.cands[:0], st.elig[:0], st.order[:0]
	if n > selectInline {
		cands, elig, order = make([]SelectionCandidate, 0, n), make([]int, 0, n), make([]*policy.Upstream, 0, n)
	}
	var need policy.Capabilities
	tokens, maxTokens, known := 0, 0, false
	if filtering {
		need, tokens, maxTokens, known = s.requestNeeds()
	}
	static, filtered, tooLong := -1, 0, 0
	for i, u := range chain {
		cands = append(cands, SelectionCandidate{Upstream: u.Name})
		if u.Static {
			static = i
			continue
		}
		if known {
			if why, class := filterReason(u, need, tokens, maxTokens); why != "" {
				cands[i].SkippedReason = why
				s.skipRouting(u.Name, class, why)
				filtered++
				if class == policy.ClassContextTooLong {
					tooLong++
				}
				continue
			}
		}
		elig = append(elig, i)
	}
	if len(elig) == 0 && static < 0 && filtered > 0 {
		s.noneFits(cands, filtered, tooLong)
		return nil, false
	}

	chosen := -1
	switch sel.Strategy {
	case policy.SelectWeighted:
		chosen = s.chooseWeighted(chain, elig, cands)
	case policy.SelectScored:
		chosen = s.chooseScored(chain, elig, cands)
	}
	if chosen < 0 && len(elig) > 0 {
		chosen = elig[0]
	}
	if chosen >= 0 {
		order = append(order, chain[chosen])
	}
	for _, i := range elig {
		if i != chosen {
			order = append(order, chain[i])
		}
	}
	if static >= 0 {
		order = append(order, chain[static])
	}
	st.rec = SelectionRecord{Strategy: string(sel.Strategy), Candidates: cands}
	if st.rec.Strategy == "" {
		st.rec.Strategy = string(policy.SelectOrdered)
	}
	if chosen >= 0 {
		st.rec.Chosen = chain[chosen].Name
	}
	s.rec.Selection = &st.rec
	return order, true
}

// mappable reports whether u serves the request's model; an upstream that
// does not is never chosen first (the walk skips it, as it would anyway).
func (s *session) mappable(u *policy.Upstream, c *SelectionCandidate) (string, bool) {
	m, ok := u.MapModel(s.model)
	if !ok {
		c.SkippedReason = noModelsEntry
	}
	return m, ok
}

// noModelsEntry is the skipped reason of a candidate that does not serve
// the request's model.
const noModelsEntry = "no models entry matches the request's model"

// chooseWeighted draws the first upstream in proportion to its weight: at
// random, or, when sticky, by rendezvous hashing of the conversation, which
// keeps a conversation's upstream when weights change or another upstream
// is filtered out, and moves only the share that must move. -1: no eligible
// upstream has a weight.
func (s *session) chooseWeighted(chain []*policy.Upstream, elig []int, cands []SelectionCandidate) int {
	weights := s.route.Select.Weights
	total := 0.0
	for _, i := range elig {
		w := weights[chain[i].Name]
		cands[i].Weight = w
		if _, ok := s.mappable(chain[i], &cands[i]); !ok {
			cands[i].Weight = 0
			continue
		}
		total += cands[i].Weight
	}
	if total <= 0 {
		return -1
	}
	if s.route.Select.Sticky {
		key := s.conversationKey()
		best, bestKey := -1, math.Inf(1)
		for _, i := range elig {
			w := cands[i].Weight
			if w <= 0 {
				continue
			}
			// A uniform draw in (0, 1) per upstream and conversation:
			// the smallest −ln(u)/w wins with probability w/total.
			h := mix64(key ^ hashString(fnvOffset, chain[i].Name))
			u := (float64(h>>11) + 0.5) / (1 << 53)
			if k := -math.Log(u) / w; k < bestKey {
				best, bestKey = i, k
			}
		}
		return best
	}
	x := float64(s.r.random()>>11) / (1 << 53) * total
	last := -1
	for _, i := range elig {
		w := cands[i].Weight
		if w <= 0 {
			continue
		}
		last = i
		if x < w {
			return i
		}
		x -= w
	}
	// Rounding left x at the very top: the last weighted upstream.
	return last
}

// chooseScored puts first the upstream on trial that still has room (its
// samples plus attempts in flight below min_samples), the first such in
// chain order; else the judged upstream with the lowest score, ties to the
// earlier in chain order. -1: none is either.
func (s *session) chooseScored(chain []*policy.Upstream, elig []int, cands []SelectionCandidate) int {
	now := s.r.now()
	return scoredChoice(&s.route.Select, chain, elig, cands, s.model,
		func(name string) health.Window { return s.r.windows.Read(name, now) }, s.r.price)
}

// scoredChoice is chooseScored on windows read by window and prices by
// price: the one place the rules of a scored choice live, for the runner
// and for `detour policy explain` (ExplainSelection) alike.
func scoredChoice(sel *policy.Selection, chain []*policy.Upstream, elig []int, cands []SelectionCandidate, appModel string,
	window func(name string) health.Window, price func(u *policy.Upstream, model string) float64) int {
	best, bestScore, trial := -1, 0.0, -1
	for _, i := range elig {
		u, c := chain[i], &cands[i]
		model, ok := u.MapModel(appModel)
		if !ok {
			c.SkippedReason = noModelsEntry
			continue
		}
		w := window(u.Name)
		c.Samples, c.P95, c.FailureRate = w.Samples, w.P95, w.FailureRate
		if w.Samples < sel.MinSamples {
			c.Trial = true
			if trial < 0 && w.Samples+w.InFlight < sel.MinSamples {
				trial = i
			}
			continue
		}
		p := 0.0
		if sel.Score.Cost > 0 {
			// Only when it counts: a price is a glob match per upstream.
			p = price(u, model)
		}
		score := Score(sel.Score, u, w, p)
		c.Scored, c.Score = true, score
		if best < 0 || score < bestScore {
			best, bestScore = i, score
		}
	}
	if trial >= 0 {
		return trial
	}
	return best
}

// Score is a scored selection's score of u over its window w at price (USD
// per 1M tokens, Runner.Price's meaning): weights.Latency·p95 (seconds) +
// weights.Errors·failure rate + weights.Cost·price. Lower wins. An upstream
// with no success in its window is charged its first_byte timeout as p95:
// what it costs is waiting for it to fail.
func Score(weights policy.Score, u *policy.Upstream, w health.Window, price float64) float64 {
	p95 := w.P95
	if w.Successes == 0 {
		p95 = u.Timeouts.FirstByte
	}
	score := weights.Latency*p95.Seconds() + weights.Errors*w.FailureRate
	if weights.Cost > 0 {
		score += weights.Cost * price
	}
	return score
}

// requestNeeds reads, from the app's request decoded, the capabilities it
// needs and the tokens it may take: input characters / 4, rounded up (the
// usual ratio for English; it undercounts code and CJK and leaves tool
// declarations and media out, so that it errs towards trying an upstream
// rather than skipping one that fits), and its max_tokens. known is false
// when the request does not decode: the upstream is left to judge it.
func (s *session) requestNeeds() (need policy.Capabilities, tokens, maxTokens int, known bool) {
	req, err := s.decoded()
	if err != nil || req == nil {
		return 0, 0, 0, false
	}
	need, tokens, maxTokens = needsOf(req)
	return need, tokens, maxTokens, true
}

// needsOf is requestNeeds of a decoded request.
func needsOf(req *ir.Request) (need policy.Capabilities, tokens, maxTokens int) {
	if len(req.Tools) > 0 {
		need |= policy.CapTools
	}
	if req.ResponseFormat != nil {
		need |= policy.CapJSON
	}
	for i := range req.Messages {
		m := &req.Messages[i]
		if m.Role == ir.RoleTool {
			need |= policy.CapTools
		}
		for j := range m.Parts {
			switch m.Parts[j].Kind {
			case ir.PartToolCall, ir.PartToolResult:
				need |= policy.CapTools
			case ir.PartImage, ir.PartDocument:
				need |= policy.CapVision
			}
		}
	}
	_, chars, _ := req.PromptStats()
	return need, (chars + 3) / 4, req.MaxTokens
}

// filterReason says why u cannot take the request, and the class of the
// skip: context_too_long for a request over its context_window (what the
// vendor's 400 would have said), invalid_request for a capability it
// lacks. "" when it can.
func filterReason(u *policy.Upstream, need policy.Capabilities, tokens, maxTokens int) (string, policy.Class) {
	if u.ContextWindow > 0 && tokens+maxTokens > u.ContextWindow {
		return fmt.Sprintf("estimated %d input tokens + %d max_tokens exceed its context_window %d", tokens, maxTokens, u.ContextWindow), policy.ClassContextTooLong
	}
	if lack := u.Lacks(need); lack != 0 {
		return "lacks capability " + lack.String() + " that the request needs (capabilities)", policy.ClassInvalidRequest
	}
	return "", ""
}

// noneFits answers the app when the pre-filters took out every upstream:
// a 400 in its vendor's envelope saying why each could not take the
// request (context_too_long when none had the room, else invalid_request).
func (s *session) noneFits(cands []SelectionCandidate, filtered, tooLong int) {
	parts := make([]string, 0, len(cands))
	for _, c := range cands {
		parts = append(parts, c.Upstream+": "+c.SkippedReason)
	}
	class := policy.ClassInvalidRequest
	if tooLong == filtered {
		class = policy.ClassContextTooLong
	}
	s.rec.Error = "no upstream can take this request"
	s.rec.Selection = &SelectionRecord{Strategy: string(s.route.Select.Strategy), Candidates: cands}
	if s.rec.Selection.Strategy == "" {
		s.rec.Selection.Strategy = string(policy.SelectOrdered)
	}
	s.writeAppError(http.StatusBadRequest, class,
		"detour: no upstream of route "+s.route.Name+" can take this request; "+strings.Join(parts, "; "), 0)
}

// conversationKey hashes what identifies the app's conversation: its
// credential (every credential header and a Gemini key= parameter) and its
// first turns (rewrite.ConversationStart). FNV-1a: stable across processes
// and replicas, so a conversation sticks to one upstream fleet-wide. The
// hash is used for this request's choice only, and never kept.
func (s *session) conversationKey() uint64 {
	h := fnvOffset
	for _, name := range stickyHeaders {
		for _, v := range s.req.Header[name] {
			h = hashString(h, v)
			h = hashByte(h, 0)
		}
	}
	if q := s.req.URL.RawQuery; q != "" {
		h = hashString(h, queryKey(q))
	}
	h = hashByte(h, 0xff)
	return hashBytes(h, rewrite.ConversationStart(s.app, s.body))
}

// stickyHeaders are the headers that carry an app's credential
// (policy.CredentialHeaders, without the proxy's own).
var stickyHeaders = [...]string{"Authorization", "X-Api-Key", "Api-Key", "X-Goog-Api-Key"}

// queryKey is the value of a key= query parameter (Gemini's API key), raw.
func queryKey(q string) string {
	for q != "" {
		var part string
		part, q, _ = strings.Cut(q, "&")
		if v, ok := strings.CutPrefix(part, "key="); ok {
			return v
		}
	}
	return ""
}

const (
	fnvOffset uint64 = 14695981039346656037
	fnvPrime  uint64 = 1099511628211
)

func hashByte(h uint64, b byte) uint64 { return (h ^ uint64(b)) * fnvPrime }

func hashString(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		h = (h ^ uint64(s[i])) * fnvPrime
	}
	return h
}

func hashBytes(h uint64, b []byte) uint64 {
	for _, c := range b {
		h = (h ^ uint64(c)) * fnvPrime
	}
	return h
}

// mix64 is splitmix64's finalizer: FNV's low bits are weak, and the
// rendezvous draw needs all 53 it uses to be uniform.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
