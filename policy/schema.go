package policy

// This file is the wire schema of policy.json: what a user writes. It is
// decoded strictly (unknown fields are errors, see decode.go) and never used
// directly by the request path; Compile turns it into the immutable
// *Compiled value. Every field documents its default and what zero means.

// File is the top level of policy.json.
type File struct {
	// Version is a free-form label shown in logs and /status. Default: the
	// first 12 hex digits of the file's SHA-256.
	Version string `json:"version,omitempty"`
	// Listen is the address of the proxy listener (explicit proxy and base-URL
	// mode share it). Default DefaultListen: loopback only, so detour is never
	// an open proxy by accident.
	Listen string `json:"listen,omitempty"`
	// AdminListen is the address of the admin listener (/healthz, /readyz,
	// /metrics, /status, /policy/history, /policy/rollback). Default
	// DefaultAdminListen; "off" disables it.
	AdminListen string `json:"admin_listen,omitempty"`
	// Admin says who may use the admin listener beyond its probes (see
	// AdminFile). Absent: /status, /policy/history and /policy/rollback
	// answer loopback callers only.
	Admin *AdminFile `json:"admin,omitempty"`
	// ListenPublic says that a listen address other than loopback is meant.
	// Without it (or egress.tunnel "deny") such a listen is refused: anything
	// that can reach it could use detour as an open proxy. Default false.
	ListenPublic bool `json:"listen_public,omitempty"`
	// Egress limits where apps may have detour connect: CONNECT and
	// absolute-URI requests for hosts no route names. Absent: every field's
	// default.
	Egress *EgressFile `json:"egress,omitempty"`
	// Transparent turns on the listener for connections the kernel
	// redirects to detour (see TransparentFile). Absent: off.
	Transparent *TransparentFile `json:"transparent,omitempty"`
	// CA names detour's certificate authority files. Default: ca.pem and
	// ca-key.pem in the user's config directory (~/.config/detour/).
	CA *CAFile `json:"ca,omitempty"`
	// Upstreams are the places a request can be sent, by name. Required.
	Upstreams map[string]UpstreamFile `json:"upstreams"`
	// Routes pick a chain of upstreams for requests to a vendor host and path.
	// Hosts named here are the only ones detour intercepts. Required.
	Routes []RouteFile `json:"routes"`
	// Errors adds classification rules and overrides the action per class.
	Errors *ErrorsFile `json:"errors,omitempty"`
	// NeverSkipLast makes the last upstream of a chain be tried even when it
	// is cooling down. Default true (a pointer so that false can be said).
	NeverSkipLast *bool `json:"never_skip_last,omitempty"`
	// Deadline bounds the time from receiving a request to committing an
	// answer (all attempts together). After the commit point a stream is
	// bounded only by the idle timeout. Default DefaultDeadline.
	Deadline Duration `json:"deadline,omitempty"`
	// Timeouts are the default per-attempt timeouts of every upstream.
	Timeouts *TimeoutsFile `json:"timeouts,omitempty"`
	// Log controls what the request log may contain.
	Log *LogFile `json:"log,omitempty"`
	// Retry shapes the wait before retrying the same upstream (the number
	// of retries is per class: errors.classes.CLASS.retries). Absent: every
	// field's default.
	Retry *RetryFile `json:"retry,omitempty"`
	// Breaker takes an upstream out of chains while it keeps failing.
	// Absent: on, with every field's default.
	Breaker *BreakerFile `json:"breaker,omitempty"`
	// HedgeAfter starts the next upstream of the chain in parallel when the
	// current attempt has no response headers after this long; the first
	// of the two to commit an answer wins and the other is cancelled (its
	// outcome is hedge_lost). Hedging spends a second request to cut tail
	// latency. Default 0: off.
	HedgeAfter Duration `json:"hedge_after,omitempty"`
	// Classifier sorts requests into tiers for routes that have tiers.
	// Absent: every field's default.
	Classifier *ClassifierFile `json:"classifier,omitempty"`
	// Cache keeps answers to serve when every upstream fails. Absent: no
	// cache; present (even {}): on, with every field's default.
	Cache *CacheFile `json:"cache,omitempty"`
	// State says where cooldowns, breakers and limits live (see
	// StateFile). Default memory (per detour process).
	State *StateFile `json:"state,omitempty"`
	// Limits bound what the whole detour process holds at once. Absent:
	// every field's default. (Per-upstream limits are
	// upstreams.NAME.limits.)
	Limits *ProcessLimitsFile `json:"limits,omitempty"`
	// DrainTimeout is how long a stopping detour lets in-flight requests
	// and streams finish; then those still running are ended, each with an
	// error in the app's shape, and logged with outcome drained. Default
	// DefaultDrainTimeout. Read when detour stops, so a reload changes it.
	DrainTimeout Duration `json:"drain_timeout,omitempty"`
	// Budgets cap what detour spends, in USD computed from each answer's
	// usage and its upstream's prices, per upstream or per route, by day
	// and by month (see BudgetFile). Default none.
	Budgets []BudgetFile `json:"budgets,omitempty"`
	// HedgeAfterByPriority overrides hedge_after for requests of one
	// priority (x-detour-priority, or priority_by_tier), e.g. {"high":
	// "800ms"} with no hedge_after hedges only high-priority requests.
	// "0s" turns hedging off for that priority. Absent: hedge_after for
	// every priority.
	HedgeAfterByPriority *PriorityDurationsFile `json:"hedge_after_by_priority,omitempty"`
	// PriorityByTier gives the requests of a tier (routes with tiers) a
	// priority when they carry no x-detour-priority header, e.g.
	// {"easy": "low"}. Values high, normal, low. Default: every request
	// without the header is normal.
	PriorityByTier map[string]string `json:"priority_by_tier,omitempty"`
	// Telemetry sends OpenTelemetry traces to a collector (see
	// TelemetryFile). Absent: the OTEL_EXPORTER_OTLP_* variables decide;
	// with neither, tracing is off.
	Telemetry *TelemetryFile `json:"telemetry,omitempty"`
}

// ProcessLimitsFile bounds the memory the whole process spends on requests.
type ProcessLimitsFile struct {
	// BufferedBytes is the most request body bytes detour holds at once,
	// over every request in flight (bodies are buffered whole, to replay
	// them to each upstream tried). A request whose body does not fit is
	// answered 503 with retry-after: 1; a body larger than this on its own
	// gets 413. Default DefaultBufferedBytes; at least MinBufferedBytes.
	BufferedBytes int64 `json:"buffered_bytes,omitempty"`
}

// StateFile chooses the health state backend. detour connects to it when
// it starts: a reload that changes this section is compiled and checked
// but takes effect at the next start.
type StateFile struct {
	// Backend is "memory" (state is per process and survives policy
	// reloads, not restarts) or "redis" (cooldowns, breakers, limits.rpm
	// and limits.fleet_concurrency are shared by every detour that names
	// the same Redis and key_prefix; each process still answers from its
	// own copy). Default memory.
	Backend string `json:"backend,omitempty"`
	// Redis is the shared store of backend "redis"; required with it and
	// refused without it.
	Redis *RedisFile `json:"redis,omitempty"`
}

// RedisFile is where the fleet's shared state lives.
type RedisFile struct {
	// URL is redis://[user@]host:port[/db] or rediss:// (TLS). A password
	// in the URL is refused: use password_file. Required.
	URL string `json:"url"`
	// PasswordFile names a file holding the Redis password (surrounding
	// whitespace trimmed), read at every policy load. Relative paths are
	// resolved against the policy file's directory. Default none: no AUTH.
	PasswordFile string `json:"password_file,omitempty"`
	// KeyPrefix starts every key detour writes, so that fleets (or
	// environments) sharing one Redis keep apart. Default
	// DefaultRedisKeyPrefix.
	KeyPrefix string `json:"key_prefix,omitempty"`
	// Timeout bounds every Redis command; a slower answer counts as Redis
	// being down and the request goes on with local state. Default
	// DefaultRedisTimeout; at most MaxRedisTimeout.
	Timeout Duration `json:"timeout,omitempty"`
}

// CAFile names the CA certificate and key. Relative paths are resolved
// against the directory of the policy file. Both files are created (key mode
// 0600) when both are missing.
type CAFile struct {
	CertFile string `json:"cert_file"`
	KeyFile  string `json:"key_file"`
}

// UpstreamFile is one upstream: a vendor API, an OpenAI-compatible server,
// or a team gateway.
type UpstreamFile struct {
	// Shape is the wire format the upstream speaks: openai, anthropic,
	// gemini, openai-responses (OpenAI's Responses API only), azure-openai
	// (OpenAI's at Azure) or bedrock; or static, an upstream that sends
	// nothing anywhere and answers every request with Text. Required.
	Shape string `json:"shape"`
	// BaseURL is what the shape's SDK would take as base URL:
	// https://api.openai.com/v1, https://api.anthropic.com,
	// https://generativelanguage.googleapis.com. Required, except for a
	// static upstream, which must not have one. Plain http is accepted only
	// for loopback hosts (credentials would travel in clear), unless
	// AllowPlainHTTP.
	BaseURL string `json:"base_url"`
	// AllowPlainHTTP accepts an http:// BaseURL to a host that is not
	// loopback: a model server in the same cluster or network (vLLM,
	// Ollama on a Service address). Refused for vendor hosts and hosts the
	// policy's routes intercept; warned about by policy check. Default
	// false.
	AllowPlainHTTP bool `json:"allow_plain_http,omitempty"`
	// Auth says which credential the upstream gets. Required, except for a
	// static upstream, which must not have one.
	Auth *AuthFile `json:"auth"`
	// Models maps the requested model (a glob, * matches any run of
	// characters) to this upstream's model. Patterns are tried in file order;
	// the first match wins. Empty: the model is kept as sent. Non-empty with
	// no match: the upstream is skipped for that request.
	Models OrderedStrings `json:"models,omitempty"`
	// Timeouts override the policy-wide per-attempt timeouts.
	Timeouts *TimeoutsFile `json:"timeouts,omitempty"`
	// CAFile is a PEM file of extra roots trusted for this upstream only (a
	// private gateway, a test fake). System roots stay trusted.
	CAFile string `json:"ca_file,omitempty"`
	// Headers are static headers added to every request to this upstream
	// (e.g. anthropic-version). They cannot set credential headers.
	Headers map[string]string `json:"headers,omitempty"`
	// MaxTokens is the max_tokens sent to this upstream when a translated
	// request sets none and the upstream's shape requires one (Anthropic).
	// Default 4096.
	MaxTokens int `json:"max_tokens,omitempty"`
	// ChatOnly says that this openai upstream serves Chat Completions but
	// not the Responses API (an older vLLM, Ollama, llama.cpp): a Responses
	// request is then translated into Chat Completions for it instead of
	// sent as is. Default false: an openai upstream is sent Responses
	// requests unchanged, as api.openai.com takes them. Only for shape
	// openai.
	ChatOnly bool `json:"chat_only,omitempty"`
	// Limits are detour's own limits on requests to this upstream. Absent:
	// none.
	Limits *LimitsFile `json:"limits,omitempty"`
	// EmbeddingDimensions is the size of the vectors this upstream's
	// embeddings model returns. Only an upstream that declares it is sent
	// embeddings requests from an app of another shape (the request is
	// translated, and asks for this size when it names none: OpenAI
	// dimensions, Gemini outputDimensionality). A chain whose upstreams
	// declare different sizes is refused: vectors of two sizes cannot share
	// an index. Default 0: not declared.
	EmbeddingDimensions int `json:"embedding_dimensions,omitempty"`
	// Prices are what the upstream charges per model, by glob of the
	// model detour asks it for (* matches any run of characters), in USD
	// per 1M tokens. The most specific glob that matches wins: the one
	// with the most characters other than *, then the one with fewer *,
	// then the first in byte order. They give every answer its cost
	// (cost_usd in the log line) and feed budgets. Default none: answers
	// cost 0.
	Prices map[string]PriceFile `json:"prices,omitempty"`
	// Azure configures a shape azure-openai upstream: api-version,
	// deployments, and optionally an Entra ID token file. Required for
	// that shape, refused for any other.
	Azure *AzureFile `json:"azure,omitempty"`
	// Bedrock configures a shape bedrock upstream (its region). Required
	// for that shape, refused for any other.
	Bedrock *BedrockFile `json:"bedrock,omitempty"`
	// Vertex sends a gemini or anthropic upstream's requests to Vertex AI
	// (project, region). Absent: the vendor's own API.
	Vertex *VertexFile `json:"vertex,omitempty"`
	// Text is the answer of a static upstream, sent in the app's shape
	// (streamed or not, as the app asked): a last resort that never fails,
	// e.g. "The assistant is busy. Please try again in a minute." Required
	// for shape static; refused for any other shape.
	Text string `json:"text,omitempty"`
	// Probe sends the upstream a cheap request on a timer, with a
	// credential of the policy's, so that a dead upstream's breaker opens
	// before an app's request meets it (probe.go). Absent: no probes.
	Probe *ProbeFile `json:"probe,omitempty"`
	// ContextWindow is the most tokens (input plus max_tokens) the
	// upstream's model takes. A request estimated not to fit skips the
	// upstream (class context_too_long) before anything is sent. 0 or
	// absent: unknown, never skipped for it. See select.go.
	ContextWindow int `json:"context_window,omitempty"`
	// Capabilities lists what the upstream supports of "tools", "vision"
	// and "json"; a request that needs one it lacks skips it before
	// anything is sent. Absent: no claim, never skipped for it ([] claims
	// none of them).
	Capabilities []string `json:"capabilities,omitempty"`
}

// LimitsFile caps the requests detour sends to one upstream. A request over
// a limit is not queued: the upstream is skipped for it (class local_limit)
// and the chain goes on, because waiting would spend the app's deadline on
// an upstream we already know is busy. The limits hold for the last upstream
// of a chain too; never_skip_last does not override them, since they exist
// to protect the upstream (or the bill) rather than to judge its health.
type LimitsFile struct {
	// RPM is the refill rate of a token bucket, in requests per minute.
	// Default 0: no rate limit.
	RPM int `json:"rpm,omitempty"`
	// Burst is the bucket's size: how many requests may go at once after a
	// quiet spell. Default max(1, rpm/60), one second's worth. Needs rpm.
	Burst int `json:"burst,omitempty"`
	// Concurrency is the most requests in flight to this upstream at once
	// (a committed stream counts until it ends). Default 0: no limit.
	Concurrency int `json:"concurrency,omitempty"`
	// ShedLowAt sheds low-priority requests (x-detour-priority: low)
	// earlier than the others: a low request skips this upstream (class
	// local_limit) once shed_low_at × concurrency requests are in flight
	// to it, so that batch work leaves room for realtime work. A fraction
	// in (0, 1]; needs concurrency. Default 0: low requests wait for the
	// same concurrency as every other.
	ShedLowAt float64 `json:"shed_low_at,omitempty"`
	// FleetConcurrency is the most requests in flight to this upstream at
	// once over every detour sharing state.backend "redis" (concurrency
	// stays per process). Needs backend redis. Default 0: no fleet limit.
	FleetConcurrency int `json:"fleet_concurrency,omitempty"`
}

// AuthFile is an upstream's credential source; exactly one field is set.
type AuthFile struct {
	// From "client" forwards the app's own credential, and only when the
	// app's request has this upstream's shape.
	From string `json:"from,omitempty"`
	// Env names an environment variable holding the key.
	Env string `json:"env,omitempty"`
	// File names a file holding the key (trailing whitespace trimmed);
	// re-read on every policy reload.
	File string `json:"file,omitempty"`
	// None sends no credential.
	None bool `json:"none,omitempty"`
}

// TimeoutsFile are per-attempt timeouts. Zero or absent: the default.
type TimeoutsFile struct {
	// Connect bounds TCP connect plus TLS handshake. Default DefaultConnectTimeout.
	Connect Duration `json:"connect,omitempty"`
	// FirstByte bounds the wait for response headers after the request was
	// sent. Default DefaultFirstByteTimeout.
	FirstByte Duration `json:"first_byte,omitempty"`
	// Idle bounds the silence between two reads of the response body
	// (stream events included). Default DefaultIdleTimeout.
	Idle Duration `json:"idle,omitempty"`
	// ClientBody bounds reading the app's request body, counted from the
	// request's arrival (and never past deadline); a body not read in
	// time gets 408 and the connection is closed. Policy-wide only: the
	// body is read before any upstream is chosen. Default
	// DefaultClientBodyTimeout.
	ClientBody Duration `json:"client_body,omitempty"`
}

// RouteFile matches requests to a vendor host and path and names their chain.
type RouteFile struct {
	// Name appears in logs and metrics. Required, unique.
	Name string `json:"name"`
	// Match selects the requests of this route.
	Match MatchFile `json:"match"`
	// Shape is the app's wire format for this route. Default: the shape of
	// the host when it is a vendor's own (api.openai.com → openai, …).
	Shape string `json:"shape,omitempty"`
	// Chain is the ordered list of upstream names to try. A route has
	// exactly one of Chain and Tiers.
	Chain []string `json:"chain"`
	// Tiers are one chain per request tier, by tier name (lowercase
	// letters, digits, '_', '-'): the classifier (ClassifierFile) picks
	// "hard", "easy" or classifier.undecided for each request, and the
	// request runs through that tier's chain. The undecided tier is
	// required: its chain also serves every request whose tier the route
	// lacks. A route has exactly one of Chain and Tiers.
	Tiers map[string][]string `json:"tiers,omitempty"`
	// Select chooses which upstream of the chain goes first (SelectFile);
	// the others keep their chain order as the failover order. Absent:
	// ordered, the chain as written.
	Select *SelectFile `json:"select,omitempty"`
}

// MatchFile selects requests by host and path.
type MatchFile struct {
	// Host is the vendor host the app calls, without port. Required. Every
	// host named by a route is intercepted (TLS terminated by detour).
	Host string `json:"host"`
	// Path is matched with path.Match (so * does not cross "/"), e.g.
	// "/v1/chat/completions" or "/v1beta/models/*". Empty: any path.
	// Requests to an intercepted host that no route matches are passed
	// through to the real host untouched.
	Path string `json:"path,omitempty"`
}

// ErrorsFile extends the built-in failure classification.
type ErrorsFile struct {
	// Rules are tried in order before the built-in table; the first match
	// sets the class.
	Rules []RuleFile `json:"rules,omitempty"`
	// Classes override the action taken for a class.
	Classes map[string]ClassActionFile `json:"classes,omitempty"`
}

// RuleFile assigns a class to responses it matches. Every set field must
// match; at least one of status, type, code and message_contains is required.
type RuleFile struct {
	Upstream        string `json:"upstream,omitempty"`
	Status          int    `json:"status,omitempty"`
	Type            string `json:"type,omitempty"`
	Code            string `json:"code,omitempty"`
	MessageContains string `json:"message_contains,omitempty"`
	Class           string `json:"class"`
}

// ClassActionFile is what happens after an attempt of a class.
type ClassActionFile struct {
	// Then is "fallback" (try the next upstream) or "stop" (return this
	// error to the app). Default: the class's built-in action.
	Then string `json:"then,omitempty"`
	// Cooldown keeps the upstream out of chains (never_skip_last aside) for
	// this long after such a failure. Absent: the built-in default (10m for
	// quota_exhausted, none otherwise); "0s": no cooldown.
	Cooldown Duration `json:"cooldown,omitempty"`
	// MaxCooldown caps a cooldown taken from the vendor's own reset time
	// (Anthropic's monthly reset, Gemini's daily quota). Default DefaultMaxCooldown.
	MaxCooldown Duration `json:"max_cooldown,omitempty"`
	// Retries is how many times an attempt of this class is retried on the
	// same upstream (waiting as retry says) before Then applies. 0 to
	// MaxRetries. Absent: 1 for rate_limited (a per-minute limit often
	// clears within the vendor's retry-after), 0 for every other class. A
	// pointer so that 0 can be said.
	Retries *int `json:"retries,omitempty"`
}

// RetryFile is the wait before a retry on the same upstream: exponential
// backoff with jitter from Base, doubling up to Max, unless the vendor named
// its own wait (retry-after, retry-after-ms, Gemini's RetryInfo).
type RetryFile struct {
	// Base is the wait before the first retry. 0 or absent: DefaultRetryBase.
	Base Duration `json:"base,omitempty"`
	// Max caps the backoff; it must not be shorter than Base. 0 or absent:
	// DefaultRetryMax.
	Max Duration `json:"max,omitempty"`
	// HonorRetryAfterUpTo is the longest vendor-named wait detour sits out.
	// A longer one (or one past the request's remaining deadline) makes
	// detour fall over at once instead: the app is better served by another
	// upstream now than by this one later. Absent: DefaultHonorRetryAfterUpTo;
	// "0s": never wait when the vendor names a wait, fall over at once.
	HonorRetryAfterUpTo Duration `json:"honor_retry_after_up_to,omitempty"`
}

// BreakerFile configures the per-upstream circuit breaker. A breaker opens
// (the upstream is skipped, never_skip_last aside) on a run of failures or
// on a high failure rate over the last Window counted attempts; after
// OpenFor it lets HalfOpenProbes requests through, and closes when they
// succeed.
//
// Hard failures (server_error, overloaded, unreachable, bad_response) and
// soft failures (timeout) are counted apart, because a slow upstream is
// still answering and deserves more patience than a broken one. Failures of
// the app's own making (invalid_request, auth, content_filter,
// context_too_long), rate limits and quota never count: they say nothing
// about the upstream's health, and quota has its own cooldown.
type BreakerFile struct {
	// Enabled turns the breaker on. Default true (a pointer so that false
	// can be said); false keeps every upstream in its chains whatever its
	// record.
	Enabled *bool `json:"enabled,omitempty"`
	// ConsecutiveFailures hard failures in a row open the breaker. 0 or
	// absent: DefaultBreakerConsecutiveFailures.
	ConsecutiveFailures int `json:"consecutive_failures,omitempty"`
	// FailureRate of hard failures among the last Window counted attempts
	// opens the breaker, once MinRequests are counted. In (0, 1]. 0 or
	// absent: DefaultBreakerFailureRate.
	FailureRate float64 `json:"failure_rate,omitempty"`
	// Window is how many of the last counted attempts the rates are taken
	// over. 1 to MaxBreakerWindow. 0 or absent: DefaultBreakerWindow.
	Window int `json:"window,omitempty"`
	// MinRequests is how many counted attempts the window must hold before
	// FailureRate and TimeoutRate are judged (two failures out of three
	// say little). At most Window. 0 or absent: DefaultBreakerMinRequests,
	// or Window when that is smaller.
	MinRequests int `json:"min_requests,omitempty"`
	// ConsecutiveTimeouts timeouts in a row open the breaker. 0 or absent:
	// DefaultBreakerConsecutiveTimeouts.
	ConsecutiveTimeouts int `json:"consecutive_timeouts,omitempty"`
	// TimeoutRate of timeouts among the last Window counted attempts opens
	// the breaker, once MinRequests are counted. In (0, 1]. 0 or absent:
	// DefaultBreakerTimeoutRate.
	TimeoutRate float64 `json:"timeout_rate,omitempty"`
	// OpenFor is how long an open breaker keeps the upstream out before
	// probing it. 0 or absent: DefaultBreakerOpenFor.
	OpenFor Duration `json:"open_for,omitempty"`
	// HalfOpenProbes is how many requests a half-open breaker lets through;
	// all must succeed to close it, one failure opens it again. 0 or
	// absent: DefaultBreakerHalfOpenProbes.
	HalfOpenProbes int `json:"half_open_probes,omitempty"`
	// Recovery is how long, after a breaker closes from half-open, traffic
	// to its upstream ramps up instead of returning all at once (see
	// policy/recovery.go for the steps). At most MaxBreakerRecovery. 0 or
	// absent: no ramp, the upstream takes its full share at once.
	Recovery Duration `json:"recovery,omitempty"`
}

// ClassifierFile configures the request tier classifier (Classifier.Classify)
// used by routes with tiers. Every signal is checked; a request is "hard"
// when its input is long, it has code blocks or files, or a hard pattern
// matches; else "easy" when an easy pattern matches; else Undecided.
type ClassifierFile struct {
	// HardPatterns are Go regular expressions (RE2 syntax), matched without
	// regard to case against the text of the app's latest user turn. Any
	// match makes the request hard. Default none.
	HardPatterns []string `json:"hard_patterns,omitempty"`
	// EasyPatterns are like HardPatterns; a match makes the request easy
	// unless some hard signal fired. Default none.
	EasyPatterns []string `json:"easy_patterns,omitempty"`
	// LongInputChars: a request whose input text (system prompt and every
	// message, in characters) is at least this long is hard. 0 or absent:
	// DefaultLongInputChars.
	LongInputChars int `json:"long_input_chars,omitempty"`
	// CodeBlocks: a latest user turn with at least this many ``` fenced
	// blocks is hard. 0 or absent: DefaultCodeBlocks.
	CodeBlocks int `json:"code_blocks,omitempty"`
	// Files: a request with at least this many attachments (images,
	// documents, files, audio) is hard. 0 or absent: DefaultFiles.
	Files int `json:"files,omitempty"`
	// Undecided is the tier of a request no signal decided. Letters,
	// digits, '_' and '-'. Default DefaultUndecidedTier ("hard": when in
	// doubt, send the stronger chain).
	Undecided string `json:"undecided,omitempty"`
}

// CacheFile configures the response cache: answers are stored, keyed by the
// request, so that when every upstream of the chain fails the app can still
// get the answer an identical request got before.
type CacheFile struct {
	// Entries is the most answers kept. 0 or absent: DefaultCacheEntries.
	Entries int `json:"entries,omitempty"`
	// TTL is how long an answer may be served after it was stored. 0 or
	// absent: DefaultCacheTTL.
	TTL Duration `json:"ttl,omitempty"`
	// ServeStaleOnFailure serves a stored answer when every upstream
	// failed. Default true (a pointer so that false can be said); false
	// keeps storing answers but never serves them.
	ServeStaleOnFailure *bool `json:"serve_stale_on_failure,omitempty"`
	// AllowTemperature caches requests whose temperature is above 0.
	// Default false: such a request asks for a fresh sample, so it is
	// neither stored nor served. A request that sets no temperature counts
	// as above 0, since every vendor's default temperature is 1.
	AllowTemperature bool `json:"allow_temperature,omitempty"`
}

// LogFile controls the request log.
type LogFile struct {
	// Prompts allows logging prompt and completion text. Default false; keys
	// are never logged.
	Prompts bool `json:"prompts,omitempty"`
	// Level is the minimum level: debug, info, warn, error. Default info.
	Level string `json:"level,omitempty"`
}

// PriceFile is one model glob's price, in USD per 1M tokens.
type PriceFile struct {
	// Input is the price of a prompt token. Required (0 is a free model).
	Input *float64 `json:"input"`
	// Output is the price of a generated token (reasoning included).
	// Required.
	Output *float64 `json:"output"`
	// CachedInput is the price of a prompt token the vendor reports as
	// read from its prompt cache (OpenAI's cached_tokens, Anthropic's
	// cache_read_input_tokens, Gemini's cachedContentTokenCount). Absent:
	// the input price.
	CachedInput *float64 `json:"cached_input,omitempty"`
}

// BudgetFile is one spend budget: the cost of the answers of one upstream
// (or of one route, whichever upstream answered), summed per day and per
// month in a time zone. At warn_at of a limit detour logs a warning once
// per period; at the limit the upstream (or every upstream of the route)
// is skipped with class budget_exhausted until the period ends.
type BudgetFile struct {
	// Name names the budget in logs, metrics and /status. Required, unique;
	// letters, digits, '_', '.', '-'. Spend is kept by name and period, so
	// it survives a reload that keeps the name.
	Name string `json:"name"`
	// Upstream is the upstream whose answers count. A budget has exactly
	// one of upstream and route.
	Upstream string `json:"upstream,omitempty"`
	// Route is the route whose answers count, from any upstream.
	Route string `json:"route,omitempty"`
	// Daily is the limit in USD per day, from midnight to midnight in
	// time_zone. Default 0: no daily limit. At least one of daily and
	// monthly is required.
	Daily float64 `json:"daily,omitempty"`
	// Monthly is the limit in USD per calendar month in time_zone, from
	// the 1st at midnight. Default 0: no monthly limit.
	Monthly float64 `json:"monthly,omitempty"`
	// WarnAt is the share of a limit at which detour logs a warning, once
	// per period. In (0, 1]. Default DefaultBudgetWarnAt (0.8).
	WarnAt float64 `json:"warn_at,omitempty"`
	// TimeZone is the IANA time zone whose midnight ends a day (and whose
	// 1st ends a month), e.g. "America/Los_Angeles". Default UTC.
	TimeZone string `json:"time_zone,omitempty"`
}

// PriorityDurationsFile is a duration per request priority.
type PriorityDurationsFile struct {
	High   Duration `json:"high,omitempty"`
	Normal Duration `json:"normal,omitempty"`
	Low    Duration `json:"low,omitempty"`
}
