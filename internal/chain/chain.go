// Package chain runs one app request through its route's chain of
// upstreams: select, rewrite, round trip, classify, then fall over, stop or
// answer; and, for streams, hold the response back until its commit point.
//
// chain works on a plain *http.Request and http.ResponseWriter, so it is
// tested without goproxy; the proxy package adapts its listeners to it.
// chain imports policy, rewrite and health, never proxy.
package chain

import (
	"cmp"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httputil"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/rs/zerolog"

	"github.com/detour-proxy/detour/internal/health"
	"github.com/detour-proxy/detour/internal/telemetry"
	"github.com/detour-proxy/detour/policy"
	"github.com/detour-proxy/detour/rewrite"
	"github.com/detour-proxy/detour/rewrite/ir"
	"github.com/detour-proxy/detour/rewrite/translate"
)

// Response headers detour adds to every answer.
const (
	HeaderRequestID  = "X-Detour-Request-Id"
	HeaderAnsweredBy = "X-Detour-Answered-By"
	HeaderAttempts   = "X-Detour-Attempts"
)

// DefaultMaxBodyBytes bounds a request body detour buffers for replay. The
// largest vendor limit is Anthropic's 32 MB request size.
const DefaultMaxBodyBytes = 32 << 20

// maxErrorBody bounds how much of an upstream error body is read to
// classify it; error envelopes are small, HTML pages may not be.
const maxErrorBody = 1 << 20

// maxResponseBody bounds a non-streaming upstream answer held before it is
// forwarded (it is held whole so that a 200 with an HTML page can still fall
// over).
const maxResponseBody = 64 << 20

// maxPending bounds the stream bytes held before the commit point. A stream
// that sends this much without content is committed anyway rather than
// buffered without limit.
const maxPending = 1 << 20

// Target is where the app addressed its request.
type Target struct {
	// Host is the vendor host, lower case, without port.
	Host string
	// Port is the port the app connected to ("443" when empty).
	Port string
	// Mode is how the request reached detour: "proxy" or "base_url".
	Mode string
	// Plain is set when the app spoke plain HTTP to Host (a redirected
	// connection to port 80): a request no route takes is passed on in
	// plain HTTP, as the app sent it, to Port ("80" when empty). Routed
	// requests are unaffected: upstreams are reached at their base_url.
	Plain bool
}

// Runner runs requests through chains. One Runner serves the whole process;
// it is safe for concurrent use.
type Runner struct {
	// Policy returns the current policy; called once per request.
	Policy func() *policy.Compiled
	// Health holds cooldowns by upstream name, across reloads.
	Health *health.Registry
	// Transports reach the upstreams.
	Transports *Transports
	// Passthrough forwards requests that no route takes to the host the app
	// addressed, unchanged. It must verify TLS.
	Passthrough http.RoundTripper
	// Log receives the canonical log line of every request.
	Log zerolog.Logger
	// Now is the clock for every decision the chain takes on time: the
	// request's deadline, the phase bounds of an attempt (first_byte
	// counted from its start, what is left of the deadline), the hedge
	// delay, retry plans, cooldowns, breakers and limits; default time.Now.
	// The record's durations (attempt ms, ttfb, total) are measurements
	// and stay on the wall clock. The phase and hedge timers are the
	// runtime's, armed with lengths computed from Now: under
	// testing/synctest they run on the bubble's clock.
	Now func() time.Time
	// Sleep waits d or until ctx ends (retry backoff and retry-after);
	// default a real timer. The simulation swaps both for a virtual clock.
	Sleep func(ctx context.Context, d time.Duration) error
	// MaxBodyBytes bounds request bodies; default DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// OnRecord, when set, is called with every finished record (metrics,
	// the `detour run` summary, tests). It must not keep the record.
	OnRecord func(*Record)
	// Drain, when set, ends every request still running when it is done:
	// a committed stream gets an in-stream error event in the app's shape,
	// a request not yet answered a 503; both are logged with outcome
	// drained. detour serve ends it when its drain timeout runs out.
	Drain context.Context
	// Price, when set, is the cost term of a scored selection: u's price
	// for model, in USD per 1M tokens. Nil: the upstream's own prices,
	// blended 3:1 input to output (0 for an upstream without prices).
	Price func(u *policy.Upstream, model string) float64
	// Rand, when set, draws a weighted selection's uniform 64-bit numbers
	// (a seeded generator makes a canary's split reproducible); default
	// math/rand/v2.
	Rand func() uint64
	// Tracer exports the requests' and attempts' spans when the policy
	// turns tracing on; nil: never.
	Tracer *telemetry.Tracer
	// ParkFirstWriters keeps the helpers that write the streams' commit
	// points parked between streams, so that a stream's first content
	// does not wait for a helper to start (stream_first.go). The process's
	// Runner sets it. A Runner inside a testing/synctest bubble must not:
	// a helper parked by one bubble would write another's stream.
	ParkFirstWriters bool

	cacheState
	// windows are the upstreams' recent windows that scored selections
	// judge them by (select.go).
	windows health.Windows
	// drain holds what the drain ends (drain.go).
	drain drainList
	// budget counts the request body bytes held by requests in flight
	// (limits.buffered_bytes).
	budget bodyBudget
	// timers keeps attempt timers between attempts (attempt.go).
	timers timerPool
}

func (r *Runner) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// until is how long from the runner's now to t.
func (r *Runner) until(t time.Time) time.Duration { return t.Sub(r.now()) }

func (r *Runner) sleep(ctx context.Context, d time.Duration) error {
	if r.Sleep != nil {
		return r.Sleep(ctx, d)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Serve answers one app request addressed to t.
func (r *Runner) Serve(w http.ResponseWriter, req *http.Request, t Target) {
	pol := r.Policy()
	// The request's deadline runs on the Runner's clock, from here: the
	// time the body takes to arrive counts against it.
	start, begun := r.clocks()
	// The record and the session are one allocation (served).
	sv := &served{rec: Record{
		Mode:   t.Mode,
		Host:   t.Host,
		Method: req.Method,
		Path:   req.URL.Path,
		Policy: pol.Version,
		Start:  start,
		Cache:  CacheOff,
	}}
	rec := &sv.rec
	rec.ID = rec.newID()
	// Assigned rather than Set, with the value's slice in the record: a
	// Set allocates it. (The name is canonical.)
	rec.idValue[0] = rec.ID
	w.Header()[HeaderRequestID] = rec.idValue[:]
	r.startTrace(req, pol, rec)
	defer r.finish(rec)

	route := pol.Route(t.Host, req.URL.Path)
	if route == nil || req.Method != http.MethodPost {
		// Only POSTs carry completions; model listings and the like go to
		// the vendor the app addressed, untouched.
		r.unrouted(w, req, t, rec, pol, route)
		return
	}
	rec.Route = route.Name
	s := &sv.s
	s.r, s.pol, s.route, s.rec, s.w, s.req = r, pol, route, rec, w, req
	s.app, s.begun = rewrite.AppShape(route.Shape, req.URL.Path), begun
	s.run()
}

// served is what one request holds from Serve to its log line: its record
// and, when a route takes it, its session, in one allocation rather than
// two. Nothing keeps either beyond the request (OnRecord must not keep the
// record), so neither outlives the other by more than the request.
type served struct {
	rec Record
	s   session
}

// finish completes a request's record and writes its log line.
func (r *Runner) finish(rec *Record) {
	rec.Total = time.Since(rec.Start)
	slices.SortStableFunc(rec.Attempts, func(a, b AttemptRecord) int { return cmp.Compare(a.seq, b.seq) })
	rec.Log(r.Log)
	rec.endTrace()
	if r.OnRecord != nil {
		r.OnRecord(rec)
	}
	releaseSelection(rec)
}

// unrouted passes on a request no route takes (or one that is not a POST).
// A method of its own, so that Serve's frame, which every open stream
// holds, does not carry it.
func (r *Runner) unrouted(w http.ResponseWriter, req *http.Request, t Target, rec *Record, pol *policy.Compiled, route *policy.Route) {
	if route != nil {
		rec.Route = route.Name
	}
	r.passthrough(w, req, t, rec, passthroughShape(pol, route, t.Host))
}

// passthrough forwards a request to the host the app addressed, with its own
// credentials (they are going where the app sent them). A host it cannot
// reach is reported in shape's error envelope.
func (r *Runner) passthrough(w http.ResponseWriter, req *http.Request, t Target, rec *Record, shape rewrite.Shape) {
	host, scheme, defaultPort := t.Host, "https", "443"
	if t.Plain {
		scheme, defaultPort = "http", "80"
	}
	if t.Port != "" && t.Port != defaultPort {
		host += ":" + t.Port
	}
	// A passthrough still running when the drain ends is cut with a cause
	// of its own, so that it is told from an app that went away.
	ctx, undrain := r.drainable(req.Context(), nil)
	defer undrain()
	if ctx != req.Context() {
		req = req.WithContext(ctx)
	}
	sw := &statusWriter{ResponseWriter: w}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme = scheme
			pr.Out.URL.Host = host
			pr.Out.Host = host
			// The app's request reached detour as a proxy request; do not
			// announce detour to the vendor, nor pass on detour's own
			// request headers (x-detour-tier).
			pr.Out.Header.Del("X-Forwarded-For")
			for k := range pr.Out.Header {
				if strings.HasPrefix(k, "X-Detour-") {
					pr.Out.Header.Del(k)
				}
			}
		},
		Transport:     r.Passthrough,
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, req *http.Request, err error) {
			if errors.Is(context.Cause(req.Context()), errDrained) {
				rec.Error = "drained: still waiting for " + host + " when the drain timeout ran out"
				http.Error(w, drainedMessage, http.StatusServiceUnavailable)
				return
			}
			if req.Context().Err() != nil {
				rec.Status = 499
				rec.Error = "client went away"
				return
			}
			rec.Error = "passthrough: " + err.Error()
			writePassthroughError(w, shape, host, err)
		},
	}
	rp.ServeHTTP(sw, req)
	rec.AnsweredBy = "passthrough"
	if rec.Status == 0 {
		rec.Status = sw.status
	}
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(p []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(p)
}

func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// newID makes the request's id: 8 random bytes in hex, encoded into the
// record's own idBytes. The string shares that array rather than copying
// it: the record is on the heap and the array is never written again, so
// the string stays valid (and keeps the record's memory alive) for as long
// as anything holds it, which spares an allocation per request.
//
// The bytes come from math/rand/v2's generator, which is the runtime's
// (ChaCha8, seeded from the system's entropy, per thread): an id only has
// to be unpredictable and unique, not secret, and crypto/rand's reader
// (the kernel's getrandom through the vDSO, behind the FIPS module's
// checks) cost a request several times as much.
func (r *Record) newID() string {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], rand.Uint64())
	hex.Encode(r.idBytes[:], b[:])
	return unsafe.String(&r.idBytes[0], len(r.idBytes))
}

// session is one app request on its way through a chain.
type session struct {
	r     *Runner
	pol   *policy.Compiled
	route *policy.Route
	rec   *Record
	w     http.ResponseWriter
	req   *http.Request
	app   rewrite.Shape

	body []byte
	// reserved is what this request holds of the process's body budget;
	// bodyRead is set once the whole body was read (kept or thrown away).
	reserved int64
	bodyRead bool
	model    string
	stream   bool
	// begun is when the request reached the Runner, on its clock; the
	// deadline is counted from it.
	begun    time.Time
	deadline time.Time
	// cutByDrain is set when the drain ended the request (drained).
	cutByDrain atomic.Bool
	// mu guards what concurrent (hedged) attempts share: rec.Attempts,
	// failures, soonest, limited and the claim on the app's response.
	mu       sync.Mutex
	failures []*failure
	// soonest is the earliest time a skipped upstream comes back, for the
	// app's retry-after when nothing answered.
	soonest time.Time
	// limited is set when an upstream was skipped for detour's own limits.
	limited bool
	// outOfQuota and unavailable count the upstreams skipped for a
	// cooldown after running out of quota, and for any other cooldown or
	// an open breaker.
	outOfQuota, unavailable int
	// lanes are the upstreams running for this request (more than one
	// only when hedging); winner is the one that wrote to the app.
	lanes  []*lane
	winner *lane
	// solo is the lane of a chain walked one upstream at a time.
	solo lane
	// decided is closed by the winning claim (hedged runs only).
	decided chan struct{}
	seqs    atomic.Int64

	// ireq is the app's request decoded, made on demand (tiers, static
	// answers, the cache).
	ireq    *ir.Request
	ireqErr error
	// cacheable: the response cache may store and serve this request;
	// cacheKey is its key.
	cacheable bool
	cacheKey  cacheKey

	// priority is the request's priority (priority.go) and hedge its
	// hedge_after (0: no hedging).
	priority policy.Priority
	hedge    time.Duration

	// first is the request's first attempt, once firstTaken (newAttempt).
	first      attempt
	firstTaken atomic.Bool
}

// failure is one failed attempt, kept to build the app's answer when the
// chain runs out.
type failure struct {
	upstream string
	verdict  policy.Verdict
	status   int
	header   http.Header
	body     []byte
	// inStream: body is the raw SSE error event; prefix the events before it.
	inStream bool
	prefix   []byte
	// foreign: body is in the upstream's shape, not the app's, and must be
	// translated before the app sees it.
	foreign bool
}

func (s *session) run() {
	// The buffered body is held for replay until the request is over, a
	// stream's last event included.
	defer func() { s.r.budget.release(s.reserved, s.pol.Bounds.BufferedBytes) }()
	// Cost and budgets count the answer once it is over (spend.go).
	defer s.settle()
	if !s.readRequestBody() {
		return
	}
	if !s.parseRequest() {
		return
	}
	s.deadline = s.begun.Add(s.pol.Deadline)
	s.prepareCache()

	chain := s.route.Chain
	if s.route.Tiers != nil {
		chain = s.route.ChainFor(s.pickTier())
	}
	s.pickPriority()
	chain, ok := s.selectChain(chain)
	if !ok {
		return
	}
	var done bool
	if s.hedge > 0 && len(chain) > 1 {
		done = s.runHedged(chain)
	} else {
		done = s.runSequential(chain)
	}
	if !done {
		s.writeExhausted()
	}
}

func (s *session) maxBody() int64 {
	if s.r.MaxBodyBytes > 0 {
		return s.r.MaxBodyBytes
	}
	return DefaultMaxBodyBytes
}

// parseRequest reads the model and stream flag, answering a malformed
// request with a 400 in the app's shape (and sending it nowhere).
func (s *session) parseRequest() bool {
	if s.app == rewrite.Gemini {
		model, method, ok := rewrite.GeminiModelFromPath(s.req.URL.Path)
		if !ok {
			s.writeAppError(http.StatusNotFound, policy.ClassInvalidRequest, "detour: not a Gemini model endpoint: "+s.req.URL.Path, 0)
			s.rec.Error = "bad gemini path"
			return false
		}
		s.model = model
		s.stream = method == "streamGenerateContent"
		if _, err := rewrite.PeekRequest(s.body); err != nil {
			s.badRequest(err)
			return false
		}
	} else {
		f, err := rewrite.PeekRequest(s.body)
		if err != nil {
			s.badRequest(err)
			return false
		}
		s.model, s.stream = f.Model, f.Stream
	}
	s.rec.Model, s.rec.Stream = s.model, s.stream
	if s.pol.LogPrompts {
		s.rec.Prompt = truncate(string(s.body), 4096)
	}
	return true
}

func (s *session) badRequest(err error) {
	s.writeAppError(http.StatusBadRequest, policy.ClassInvalidRequest, "detour: the request body is not valid JSON: "+err.Error(), 0)
	s.rec.Error = "malformed request body"
}

func (s *session) skip(upstream, reason string) {
	s.skipClass(upstream, "", reason)
}

func (s *session) skipClass(upstream string, class policy.Class, reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rec.addAttempt(AttemptRecord{Upstream: upstream, Class: string(class), Outcome: OutcomeSkipped, Reason: reason, seq: s.nextSeq()})
}

// skipRouting records an upstream that cannot take this request at all
// (AttemptRecord.Routing).
func (s *session) skipRouting(upstream string, class policy.Class, reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rec.addAttempt(AttemptRecord{Upstream: upstream, Class: string(class), Outcome: OutcomeSkipped, Reason: reason, Routing: true, seq: s.nextSeq()})
}

// nextSeq numbers attempts in the order they start.
func (s *session) nextSeq() int64 { return s.seqs.Add(1) }

func (s *session) clientGone(why string) {
	// Hedged lanes may all see the app go away at once.
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rec.Status = 499
	s.rec.Error = "client went away: " + why
}

// cooldown starts the cooldown a verdict's class calls for: the class's
// configured length, or the vendor's own reset time when it names one
// (capped by max_cooldown).
func (s *session) cooldown(upstream string, v policy.Verdict) string {
	act := s.pol.Action(v.Class)
	if act.Cooldown <= 0 {
		// The class's cooldown is the switch: "0s" turns cooldowns off,
		// the vendor's reset time included.
		return ""
	}
	now := s.r.now()
	until := now.Add(act.Cooldown)
	if v.ResetAt.After(now) {
		// The vendor said when the quota comes back: that long, sooner
		// or later than the configured cooldown, up to max_cooldown.
		until = v.ResetAt
		if limit := now.Add(act.MaxCooldown); until.After(limit) {
			until = limit
		}
	}
	cd := s.r.Health.StartCooldownClass(upstream, until, string(v.Class), v.Reason)
	return "cooldown until " + cd.Until.UTC().Format(time.RFC3339)
}

// writeAppError answers the app with detour's own error in its envelope.
func (s *session) writeAppError(status int, class policy.Class, msg string, retryAfter time.Duration) {
	s.writeError(rewrite.AppError{Status: status, Class: string(class), Message: msg}, nil, retryAfter)
}

func (s *session) setDetourHeaders(answeredBy string) {
	h := s.w.Header()
	// Assigned rather than Set: the values are shared, built once (the
	// names are already canonical).
	h[HeaderAnsweredBy] = answeredByValue(answeredBy)
	s.mu.Lock()
	n := s.rec.sentAttempts()
	s.mu.Unlock()
	h[HeaderAttempts] = attemptsValue(n)
}

// writeExhausted answers when no upstream answered: an error in the app's
// envelope whose class (and so status and vendor error type) is the last
// failure's, whose message carries the last vendor's own words and a
// summary of the chain (and, for a Gemini app, the vendor's details), with
// retry-after when detour knows when some upstream may answer again.
func (s *session) writeExhausted() {
	if s.serveCached() {
		return
	}
	if len(s.failures) == 0 {
		// Nothing was sent: every upstream was skipped.
		if s.writeBudgetSpent() {
			return
		}
		if !s.soonest.IsZero() {
			s.rec.Error = "every upstream is cooling down or has its breaker open"
			// Out of quota everywhere is not a passing overload: the app
			// hears its vendor's quota error (and when to come back).
			class, status := policy.ClassOverloaded, http.StatusServiceUnavailable
			if s.outOfQuota > 0 && s.unavailable == 0 {
				class, status = policy.ClassQuotaExhausted, rewrite.StatusForClass(string(policy.ClassQuotaExhausted))
			}
			s.writeAppError(status, class,
				"detour: every upstream of route "+s.route.Name+" is cooling down or has its breaker open; "+s.summary(), s.r.until(s.soonest))
			return
		}
		if s.limited {
			// The SDKs back off and retry a 429 by themselves, which is
			// what a local limit asks for.
			s.rec.Error = "every upstream is at its local limit"
			s.writeAppError(http.StatusTooManyRequests, policy.ClassRateLimited,
				"detour: every upstream of route "+s.route.Name+" is at its local limit (limits.rpm, limits.concurrency); "+s.summary(), time.Second)
			return
		}
		s.rec.Error = "no upstream serves model " + s.model
		s.writeAppError(http.StatusBadRequest, policy.ClassInvalidRequest,
			fmt.Sprintf("detour: no upstream of route %s serves model %q (check the upstreams' models mappings)", s.route.Name, s.model), 0)
		return
	}
	last := s.failures[len(s.failures)-1]
	retry := s.exhaustedRetryAfter()
	msg := "detour: every upstream failed: " + s.summary()
	if m := last.verdict.Info.Message; m != "" {
		msg = m + " (" + msg + ")"
	}
	s.rec.Error = "every upstream failed"
	class := last.verdict.Class
	s.writeError(rewrite.AppError{Status: rewrite.StatusForClass(string(class)), Class: string(class), Message: msg},
		s.exhaustedDetails(last, retry), retry)
}

// summary lists each attempt's upstream and reason, for error messages.
func (s *session) summary() string {
	parts := make([]string, 0, len(s.rec.Attempts))
	for _, a := range s.rec.Attempts {
		parts = append(parts, a.Upstream+": "+a.Reason)
	}
	return strings.Join(parts, "; ")
}

// writeUpstreamError returns a failed attempt's own answer to the app,
// unchanged: for a stop class (400, 401, content filter) the app's SDK must
// see the vendor's own error type and message.
func (s *session) writeUpstreamError(f *failure) {
	h := s.w.Header()
	if f.foreign {
		// Another vendor's error, told in the app's envelope: its status,
		// the class's error type, and the vendor's own message.
		status, body := translate.ErrorBody(s.app, f.status, string(f.verdict.Class), f.body)
		if ra := f.header.Get("Retry-After"); ra != "" {
			h.Set("Retry-After", ra)
		}
		h.Set("Content-Type", "application/json")
		h.Set("Content-Length", strconv.Itoa(len(body)))
		s.setDetourHeaders(f.upstream)
		s.w.WriteHeader(status)
		_, _ = s.w.Write(body)
		s.rec.Status = status
		return
	}
	copyResponseHeaders(h, f.header)
	s.setDetourHeaders(f.upstream)
	s.rec.AnsweredBy = ""
	if f.inStream {
		h.Del("Content-Length")
		s.w.WriteHeader(http.StatusOK)
		_, _ = s.w.Write(f.prefix)
		_, _ = s.w.Write(f.body)
		s.rec.Status = http.StatusOK
		return
	}
	h.Set("Content-Length", strconv.Itoa(len(f.body)))
	s.w.WriteHeader(f.status)
	_, _ = s.w.Write(f.body)
	s.rec.Status = f.status
}

// hopHeaders are hop-by-hop headers (RFC 9110 §7.6.1) and the headers that
// the transport recomputes; none is forwarded in either direction.
var hopHeaders = []string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

func copyResponseHeaders(dst, src http.Header) {
	// The upstream's own value slices, shared rather than copied (a copy
	// is an allocation per answer): each is capped at its length, so an
	// Add on dst reallocates instead of writing into src's array, and
	// nothing writes into a header's values in place. net/http takes its
	// own copy of dst when the headers are written.
	for k, vs := range src {
		if droppedResponseHeaders[k] {
			continue
		}
		if len(vs) == 0 {
			dst[k] = nil
			continue
		}
		dst[k] = vs[:len(vs):len(vs)]
	}
	for _, c := range src["Connection"] {
		for _, f := range strings.Split(c, ",") {
			dst.Del(strings.TrimSpace(f))
		}
	}
	// The names are canonical: deleted as they are, not canonicalized
	// again per answer.
	for _, k := range hopHeaders {
		delete(dst, k)
	}
	delete(dst, "Content-Length")
	// The transport asked for and decoded gzip itself; what the app gets is
	// identity-encoded.
	delete(dst, "Content-Encoding")
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// contextErr reports whether the app's side of the request has ended.
func contextDone(ctx context.Context) bool { return ctx.Err() != nil }
