package policy

// This file holds the compiled policy: the immutable values Compile builds
// from the wire schema (schema.go) and the request path reads. Nothing here
// parses or validates; compile.go does that.

import (
	"crypto/x509"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/detour-proxy/detour/rewrite"
)

// ShapeStatic is the shape of a static upstream: it sends nothing anywhere
// and answers with its fixed text in whatever shape the app speaks. It is
// not a rewrite.Shape a route or a translator knows; it is named here so
// that logs and /status show "static" as the upstream's shape.
const ShapeStatic = rewrite.Shape("static")

// Then is the action after a failed attempt.
type Then string

// The actions a class can have.
const (
	// Fallback tries the next upstream of the chain.
	Fallback Then = "fallback"
	// Stop returns this upstream's error to the app and tries nothing else:
	// a broken request or key must be seen, not masked by another upstream.
	Stop Then = "stop"
)

// Action is what the chain does after an attempt of some class.
type Action struct {
	Then Then
	// Cooldown keeps the upstream out of chains for this long; zero: none.
	Cooldown time.Duration
	// MaxCooldown caps a cooldown derived from the vendor's reset time.
	MaxCooldown time.Duration
	// Retries is how many times the same upstream is retried (with the
	// policy's RetryPolicy wait) before Then applies.
	Retries int
}

// defaultActions is the built-in action per class (docs/architecture.md#failure-classes).
func defaultActions() map[Class]Action {
	m := map[Class]Action{}
	for _, c := range Classes {
		m[c] = Action{Then: Fallback, MaxCooldown: DefaultMaxCooldown}
	}
	for _, c := range []Class{ClassInvalidRequest, ClassAuth, ClassContentFilter} {
		m[c] = Action{Then: Stop, MaxCooldown: DefaultMaxCooldown}
	}
	q := m[ClassQuotaExhausted]
	q.Cooldown = DefaultQuotaCooldown
	m[ClassQuotaExhausted] = q
	rl := m[ClassRateLimited]
	rl.Retries = DefaultRateLimitedRetries
	m[ClassRateLimited] = rl
	return m
}

// AuthMode says where an upstream's credential comes from.
type AuthMode int

// The credential sources.
const (
	// AuthClient forwards the app's own credential (same shape only).
	AuthClient AuthMode = iota + 1
	// AuthKey sends detour's own key, read from env or file at compile time.
	AuthKey
	// AuthNone sends no credential.
	AuthNone
)

// Timeouts are one upstream's per-attempt timeouts, all non-zero.
type Timeouts struct {
	Connect, FirstByte, Idle time.Duration
}

// Secret is a credential. Its String and GoString never reveal it, so that
// a stray %v in a log line cannot leak a key.
type Secret string

func (Secret) String() string   { return "[redacted]" }
func (Secret) GoString() string { return "[redacted]" }

// ModelMap is one entry of an upstream's model mapping.
type ModelMap struct {
	Pattern string
	Model   string
}

// Limits are detour's own limits on one upstream, as the health registry
// applies them (health.Registry.Acquire takes this type). 0 (or less) in a
// field means unlimited.
type Limits struct {
	// RPM is the sustained rate, in requests per minute, of a token bucket
	// refilled continuously (RPM/60 tokens a second).
	RPM int
	// Burst is the bucket's size: how many requests may go at once after a
	// quiet spell. 0 (or less) with RPM > 0 means max(1, RPM/60), one
	// second's worth; the compiler fills that in, so a compiled policy's
	// Burst is at least 1 when RPM is set.
	Burst int
	// Concurrency is the most attempts in flight at once.
	Concurrency int
	// FleetConcurrency is the most attempts in flight at once over the
	// fleet sharing a redis state backend; 0: no fleet limit.
	FleetConcurrency int
}

// Upstream is a compiled upstream. Immutable.
type Upstream struct {
	Name string
	// Shape is the upstream's wire format, or ShapeStatic.
	Shape rewrite.Shape
	// BaseURL is nil for a static upstream.
	BaseURL *url.URL
	Auth    AuthMode
	// Key is the credential for AuthKey.
	Key      Secret
	Models   []ModelMap
	Timeouts Timeouts
	// RootCAs is nil for the system roots, else system roots plus ca_file.
	RootCAs *x509.CertPool
	CAFile  string
	// CAHash is the SHA-256 of CAFile's contents: transports are keyed by
	// it, so a rotated CA takes effect at the next reload.
	CAHash  string
	Headers http.Header
	// EmbeddingDimensions is the declared embeddings vector size; 0 not
	// declared (embed.go).
	EmbeddingDimensions int
	// MaxTokens is the default max_tokens for translated requests that need
	// one (0: the translator's default).
	MaxTokens int
	// ChatOnly: an openai upstream without the Responses API.
	ChatOnly bool
	// Limits over which the upstream is skipped (class local_limit).
	Limits Limits
	// Static is true for shape static: the upstream is never called and
	// answers with Text in the app's shape. It has no BaseURL, auth, models
	// or limits; its Timeouts are the policy-wide ones.
	Static bool
	Text   string
	// Probe is the upstream's active health probe; Interval 0: none.
	Probe Probe
	// Prices are the upstream's prices per model glob, most specific first
	// (see PriceFor); nil when the policy names none.
	Prices []Price
	// ShedLowAt is how many requests in flight to this upstream make it
	// refuse low-priority ones (limits.shed_low_at × limits.concurrency,
	// rounded up); 0: low requests are not shed early.
	ShedLowAt int
	// ContextWindow is context_window (0: unknown); Capabilities is what
	// capabilities claims, with KnowsCapabilities false when it is absent.
	ContextWindow     int
	Capabilities      Capabilities
	KnowsCapabilities bool
	// Cloud is set for an upstream at Azure OpenAI, Amazon Bedrock or
	// Vertex AI: how its address is built and where its credential comes
	// from (policy/cloud.go). nil for every other upstream.
	Cloud *Cloud
}

// MapModel returns the model to send for a requested model; ok is false when
// the upstream has a mapping and nothing matches, so the upstream must be
// skipped for this request.
func (u *Upstream) MapModel(requested string) (model string, ok bool) {
	if len(u.Models) == 0 {
		return requested, true
	}
	for _, m := range u.Models {
		if globMatch(m.Pattern, requested) {
			return m.Model, true
		}
	}
	return "", false
}

// Route is a compiled route. Immutable.
type Route struct {
	Name  string
	Host  string
	Path  string // path.Match pattern; "" matches any path
	Shape rewrite.Shape
	// Chain is the route's chain; for a route with tiers, the undecided
	// tier's chain.
	Chain []*Upstream
	// Tiers are the chains per request tier; nil when the route has a
	// plain chain.
	Tiers map[string][]*Upstream
	// Select is how the first upstream of the chain is chosen (select.go).
	Select Selection
}

// ChainFor returns the chain for a request of the given tier: the tier's
// own chain, or Chain when the route has no tiers, the tier is "" or the
// route has no chain for it.
func (r *Route) ChainFor(tier string) []*Upstream {
	if ch, ok := r.Tiers[tier]; ok {
		return ch
	}
	return r.Chain
}

// Matches reports whether the route takes a request for host and urlPath.
func (r *Route) Matches(host, urlPath string) bool {
	if r.Host != host {
		return false
	}
	if r.Path == "" {
		return true
	}
	ok, _ := path.Match(r.Path, urlPath)
	return ok
}

// Rule is a compiled errors.rules entry.
type Rule struct {
	Upstream        string
	Status          int
	Type, Code      string
	MessageContains string
	Class           Class
}

// Compiled is a validated policy, ready for the request path. It is never
// modified after Compile returns; a reload publishes a new one.
type Compiled struct {
	Version string
	// Hash is the hex SHA-256 of the file's bytes alone.
	Hash string
	// Fingerprint covers the file and everything it pulls in (key files,
	// environment values, ca_file contents): a reload whose fingerprint is
	// unchanged changes nothing, and a rotated key changes it.
	Fingerprint string
	// Files are the other files the policy reads (auth.file, ca_file),
	// whose directories the watcher also watches.
	Files    []string
	Source   string
	LoadedAt time.Time

	Listen string
	// AdminListen is "" when the admin listener is off.
	AdminListen   string
	CACertFile    string
	CAKeyFile     string
	Upstreams     map[string]*Upstream
	Routes        []*Route
	Rules         []Rule
	Actions       map[Class]Action
	NeverSkipLast bool
	Deadline      time.Duration
	LogPrompts    bool
	LogLevel      string
	// Retry is the wait between retries; always filled (defaults when the
	// section is absent).
	Retry RetryPolicy
	// Breaker is the circuit breaker's configuration; always filled.
	Breaker BreakerPolicy
	// HedgeAfter starts the next upstream in parallel when an attempt has
	// no response headers after this long; zero: no hedging.
	HedgeAfter time.Duration
	// Classifier sorts requests into tiers; never nil (defaults when the
	// section is absent).
	Classifier *Classifier
	// Cache is the response cache's configuration.
	Cache CachePolicy
	// Admin is who may use the admin listener beyond its probes.
	Admin AdminPolicy
	// State is where health state lives; always filled (memory by default).
	State StatePolicy
	// Egress says where apps may have detour connect; always filled.
	Egress EgressPolicy
	// ListenPublic is listen_public: a non-loopback listen is meant.
	ListenPublic bool
	// Transparent is the transparent listener's section; its Listen is ""
	// when the section is absent.
	Transparent TransparentPolicy
	// Bounds cap request bodies, their read time and the drain; always
	// filled.
	Bounds Bounds
	// Budgets are the spend budgets, in file order; nil when none.
	Budgets []*Budget
	// Priorities are hedge_after per priority and the priority of each
	// tier; always filled.
	Priorities PriorityPolicy
	// Telemetry is where traces go; its zero value is tracing off.
	Telemetry TelemetryPolicy

	hosts map[string]bool
}

// RetryPolicy is the wait before retrying the same upstream: backoff with
// jitter from Base doubling up to Max, unless the vendor names its own wait,
// which is honoured up to HonorRetryAfterUpTo (longer: fall over at once).
type RetryPolicy struct {
	Base, Max, HonorRetryAfterUpTo time.Duration
}

// BreakerPolicy configures the per-upstream circuit breaker (BreakerFile
// says which classes count), and is also what a breaker judges its
// upstream by (health.Registry.BreakerAllow takes this type). The compiler
// fills every field, even when Enabled is false; what the zero value of each
// other field means is what a caller that passes one to the breaker gets.
type BreakerPolicy struct {
	// Enabled is the policy's switch: the chain consults no breaker when it
	// is false. The breaker itself ignores it.
	Enabled bool
	// ConsecutiveFailures hard failures in a row open the breaker; 0 (or
	// less) turns this trigger off.
	ConsecutiveFailures int
	// FailureRate: hard failures / counted attempts in the window at or
	// above it open the breaker; 0 (or less) turns this trigger off.
	FailureRate float64
	// Window is how many of the last counted (non-neutral) attempts the
	// rates are computed over; 0 (or less) means 1.
	Window int
	// MinRequests is how many counted attempts the window must hold before
	// the rates are judged, so that one early failure is not a 100% rate.
	// 0 (or less) means Window (the window must be full); above Window
	// means Window, since a window never holds more.
	MinRequests int
	// ConsecutiveTimeouts soft failures (timeouts) in a row open the
	// breaker; 0 (or less) turns this trigger off. Timeouts are counted
	// apart from hard failures.
	ConsecutiveTimeouts int
	// TimeoutRate: soft failures / counted attempts in the window at or
	// above it open the breaker; 0 (or less) turns this trigger off.
	TimeoutRate float64
	// OpenFor is how long an open breaker keeps the upstream out before it
	// lets probes through; 0 (or less) means health.FallbackOpenFor. A
	// change applies from the next opening: the end of an open period is
	// fixed when it opens.
	OpenFor time.Duration
	// HalfOpenProbes (K) is how many probes a half-open breaker admits; all
	// K must succeed to close it. 0 (or less) means 1.
	HalfOpenProbes int
	// Recovery is how long after the breaker closed its upstream's traffic
	// ramps up (RecoveryShare); 0 (or less) turns the ramp off. The breaker
	// itself ignores it: the chain applies it.
	Recovery time.Duration
}

// CachePolicy configures the response cache. Every field is filled, even
// when Enabled is false.
type CachePolicy struct {
	// Enabled is true when the policy has a cache section.
	Enabled bool
	Entries int
	TTL     time.Duration
	// ServeStaleOnFailure serves a stored answer when every upstream
	// failed; false stores answers but never serves them.
	ServeStaleOnFailure bool
	// AllowTemperature stores and serves requests whose temperature is
	// above 0 (or unset, which every vendor takes as 1).
	AllowTemperature bool
}

// Route returns the first route matching host and urlPath, or nil.
func (c *Compiled) Route(host, urlPath string) *Route {
	host = strings.ToLower(host)
	for _, r := range c.Routes {
		if r.Matches(host, urlPath) {
			return r
		}
	}
	return nil
}

// Intercepts reports whether TLS to host (no port) is terminated by detour:
// exactly the hosts some route names.
func (c *Compiled) Intercepts(host string) bool {
	return c.hosts[strings.ToLower(host)]
}

// Action returns the action for a class.
func (c *Compiled) Action(class Class) Action {
	if a, ok := c.Actions[class]; ok {
		return a
	}
	return Action{Then: Fallback, MaxCooldown: DefaultMaxCooldown}
}

// ClassifyFor classifies an attempt on the named upstream: policy rules
// first, then the built-in table.
func (c *Compiled) ClassifyFor(upstream string, o Outcome, now time.Time) Verdict {
	v := Classify(o, now)
	if o.Status == 0 && !o.InStream {
		return v
	}
	for _, r := range c.Rules {
		if r.matches(upstream, o.Status, v.Info) {
			v.Class = r.Class
			v.Reason = "rule: " + v.Reason
			return v
		}
	}
	return v
}

func (r *Rule) matches(upstream string, status int, info rewrite.ErrorInfo) bool {
	if r.Upstream != "" && r.Upstream != upstream {
		return false
	}
	if r.Status != 0 && r.Status != status {
		return false
	}
	if r.Type != "" && !strings.EqualFold(r.Type, info.Type) {
		return false
	}
	if r.Code != "" && !strings.EqualFold(r.Code, info.Code) {
		return false
	}
	if r.MessageContains != "" && !strings.Contains(strings.ToLower(info.Message), strings.ToLower(r.MessageContains)) {
		return false
	}
	return true
}
