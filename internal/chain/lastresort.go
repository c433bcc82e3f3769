package chain

import (
	"crypto/sha256"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/detour-proxy/detour/policy"
	"github.com/detour-proxy/detour/rewrite"
	"github.com/detour-proxy/detour/rewrite/ir"
	"github.com/detour-proxy/detour/rewrite/translate"
)

// Bounds of the response cache beyond its entry count: one answer larger
// than maxCachedBody is not kept, and the cache holds at most
// maxCacheBytes of answers in all (oldest evicted first), so that
// entries × large answers cannot exhaust a sidecar's memory.
const (
	maxCachedBody = 1 << 20
	maxCacheBytes = 256 << 20
)

// Cache results, as the log line's cache field and cache_total count them.
const (
	CacheOff    = "off"    // the policy has no cache
	CacheBypass = "bypass" // not eligible: temperature > 0 (or absent) and allow_temperature is off, or not JSON
	CacheMiss   = "miss"   // eligible; nothing stored by it and nothing served
	CacheStored = "stored" // the answer was stored
	CacheHit    = "hit"    // every upstream failed; a stored answer was served
)

// cacheKey names one cached answer: the route, the canonical request, and
// a digest of the app's credential, so that an answer is served only to
// the credential it was made for (one detour may front several apps or
// tenants, and an answer can carry what one of them asked).
type cacheKey struct {
	route string
	key   [32]byte
	cred  [16]byte
}

type cacheEntry struct {
	body   []byte
	stream bool // body is a whole SSE stream, else a JSON answer
	at     time.Time
}

// responseCache is the last-resort cache: answers by route and canonical
// request, served only when every upstream failed. It lives in the Runner,
// across policy reloads; a reload that changes cache.entries resizes it.
type responseCache struct {
	// mu makes add's replace-and-account and get's expiry check atomic;
	// lru's own lock covers each call, not the sequence.
	mu      sync.Mutex
	lru     *lru.Cache[cacheKey, *cacheEntry]
	entries int
	bytes   atomic.Int64
}

func newResponseCache(entries int) *responseCache {
	c := &responseCache{entries: entries}
	c.lru, _ = lru.NewWithEvict(entries, func(_ cacheKey, e *cacheEntry) {
		c.bytes.Add(-int64(len(e.body)))
	})
	return c
}

func (c *responseCache) add(k cacheKey, e *cacheEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.lru.Peek(k); ok {
		// Replacing an entry does not call the eviction callback.
		c.bytes.Add(-int64(len(old.body)))
	}
	c.bytes.Add(int64(len(e.body)))
	c.lru.Add(k, e)
	for c.bytes.Load() > maxCacheBytes {
		if _, _, ok := c.lru.RemoveOldest(); !ok {
			break
		}
	}
}

// get returns the entry for k if it is younger than ttl at now; an older
// one is dropped.
func (c *responseCache) get(k cacheKey, now time.Time, ttl time.Duration) (*cacheEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.lru.Get(k)
	if !ok {
		return nil, false
	}
	if now.Sub(e.at) >= ttl {
		c.lru.Remove(k)
		return nil, false
	}
	return e, true
}

// cacheFor returns the runner's response cache sized for pol.
func (r *Runner) cacheFor(pol *policy.Compiled) *responseCache {
	r.cacheMu.Lock()
	defer r.cacheMu.Unlock()
	if r.cache == nil {
		r.cache = newResponseCache(pol.Cache.Entries)
	} else if r.cache.entries != pol.Cache.Entries {
		r.cache.lru.Resize(pol.Cache.Entries)
		r.cache.entries = pol.Cache.Entries
	}
	return r.cache
}

// CacheLen is the number of answers in the response cache (for /status).
func (r *Runner) CacheLen() int {
	r.cacheMu.Lock()
	defer r.cacheMu.Unlock()
	if r.cache == nil {
		return 0
	}
	return r.cache.lru.Len()
}

// prepareCache decides whether this request may use the cache and computes
// its key: the route plus the canonical request without its streaming
// flag, so a streamed and a whole answer to the same question share it.
func (s *session) prepareCache() {
	if !s.pol.Cache.Enabled {
		s.rec.Cache = CacheOff
		return
	}
	rel := strings.TrimPrefix(s.req.URL.Path, s.app.APIRoot())
	key, temp, hasTemp, err := rewrite.CacheKey(s.app, rel, s.body)
	if err != nil {
		s.rec.Cache = CacheBypass
		return
	}
	// Every vendor samples at temperature 1 when none is given: only an
	// explicit 0 asks for the one answer a cache can repeat.
	if !s.pol.Cache.AllowTemperature && !(hasTemp && temp == 0) {
		s.rec.Cache = CacheBypass
		return
	}
	s.cacheable = true
	s.cacheKey = cacheKey{route: s.route.Name, key: key, cred: credentialDigest(s.req)}
	s.rec.Cache = CacheMiss
}

// credentialDigest digests every credential the app sent, and the headers
// that name its account (identityHeaders): one key shared by two projects,
// or a gateway that tells users apart by cookie, must not share answers.
func credentialDigest(req *http.Request) [16]byte {
	h := sha256.New()
	for _, k := range append(credentialHeaders[:len(credentialHeaders):len(credentialHeaders)], identityHeaders...) {
		for _, v := range req.Header.Values(k) {
			h.Write([]byte(k))
			h.Write([]byte{0})
			h.Write([]byte(v))
			h.Write([]byte{0})
		}
	}
	if k := req.URL.Query().Get("key"); k != "" {
		h.Write([]byte("?key\x00" + k))
	}
	var d [16]byte
	copy(d[:], h.Sum(nil))
	return d
}

// store keeps a committed answer (as the app received it) for the cache.
func (s *session) store(body []byte, stream bool) {
	if !s.cacheable || len(body) == 0 || len(body) > maxCachedBody || s.rec.Status != http.StatusOK {
		return
	}
	if s.geminiArrayStream() {
		// A Gemini stream as one JSON array is neither of the two forms
		// an entry holds.
		return
	}
	s.r.cacheFor(s.pol).add(s.cacheKey, &cacheEntry{body: append([]byte(nil), body...), stream: stream, at: s.r.now()})
	s.rec.Cache = CacheStored
}

// serveCached answers from the cache when every upstream failed and the
// policy allows stale answers. A stored stream can answer a whole request
// and the other way round: the answer is rebuilt in the form asked for.
func (s *session) serveCached() bool {
	if !s.cacheable || !s.pol.Cache.ServeStaleOnFailure {
		return false
	}
	e, ok := s.r.cacheFor(s.pol).get(s.cacheKey, s.r.now(), s.pol.Cache.TTL)
	if !ok {
		return false
	}
	// Always rebuilt rather than replayed byte for byte: the app gets a
	// fresh id, and exactly the form it asked for (an OpenAI stream's usage
	// chunk only with include_usage; SSE or a Gemini JSON array).
	resp, err := translate.DecodeAnswer(s.app, e.body, e.stream)
	if err != nil {
		return false
	}
	resp.ID, resp.Created = "", 0
	ct, body := s.synthesize(resp)
	s.rec.Cache = CacheHit
	s.rec.AnsweredBy = "cache"
	s.writeSynthesized("cache", ct, body)
	return true
}

// serveStatic answers with a static upstream's text, in the app's shape —
// unless the cache holds a real answer to this very request, which is the
// better last resort.
func (s *session) serveStatic(u *policy.Upstream) {
	if s.serveCached() {
		return
	}
	start := time.Now()
	ct, body := s.synthesize(&ir.Response{Model: s.model, Parts: []ir.Part{{Kind: ir.PartText, Text: u.Text}}, Finish: ir.FinishStop})
	s.mu.Lock()
	s.rec.addAttempt(AttemptRecord{Upstream: u.Name, Model: s.model, Status: http.StatusOK, Outcome: OutcomeOK, Duration: time.Since(start), seq: s.nextSeq()})
	s.mu.Unlock()
	s.rec.AnsweredBy = u.Name
	s.writeSynthesized(u.Name, ct, body)
}

// synthesize renders a complete answer in the app's shape, as a stream
// when the app asked for one.
func (s *session) synthesize(resp *ir.Response) (contentType string, body []byte) {
	if s.geminiArrayStream() {
		// Gemini streams without alt=sse are one JSON array of chunks.
		_, b, err := translate.Synthesize(s.app, s.model, resp, false, false)
		if err != nil {
			return "application/json", []byte("[]")
		}
		return "application/json", append(append([]byte{'['}, b...), ']')
	}
	ct, b, err := translate.Synthesize(s.app, s.model, resp, s.stream, s.includeUsage())
	if err != nil {
		// The encoders fail only on values an answer we built cannot
		// hold; say so in the app's shape rather than write nothing.
		_, eb := rewrite.ErrorBody(s.app, rewrite.AppError{Status: http.StatusInternalServerError, Class: string(policy.ClassServerError), Message: "detour: cannot render the answer: " + err.Error()})
		return "application/json", eb
	}
	return ct, b
}

func (s *session) writeSynthesized(answeredBy, contentType string, body []byte) {
	h := s.w.Header()
	h.Set("Content-Type", contentType)
	if contentType == "text/event-stream" {
		h.Set("Cache-Control", "no-cache")
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	s.setDetourHeaders(answeredBy)
	s.w.WriteHeader(http.StatusOK)
	s.rec.TTFB = time.Since(s.rec.Start)
	s.rec.Status = http.StatusOK
	if _, err := s.w.Write(body); err != nil {
		s.rec.Error = "client went away while the answer was written"
	}
}

// geminiArrayStream reports a Gemini streaming call without alt=sse.
func (s *session) geminiArrayStream() bool {
	return s.app == rewrite.Gemini && s.stream && s.req.URL.Query().Get("alt") != "sse"
}

// decoded returns the app's request in neutral form, decoding it once.
func (s *session) decoded() (*ir.Request, error) {
	if s.ireq == nil && s.ireqErr == nil {
		rel := strings.TrimPrefix(s.req.URL.Path, s.app.APIRoot())
		s.ireq, s.ireqErr = translate.DecodeRequest(s.app, s.body, rel)
	}
	return s.ireq, s.ireqErr
}

// includeUsage reports whether an OpenAI streaming app asked for the usage
// chunk (stream_options.include_usage).
func (s *session) includeUsage() bool {
	if s.app != rewrite.OpenAI || !s.stream {
		return false
	}
	req, err := s.decoded()
	return err == nil && req.IncludeUsage
}

// cacheState guards the Runner's cache; embedded in Runner.
type cacheState struct {
	cacheMu sync.Mutex
	cache   *responseCache
}
