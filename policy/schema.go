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
	// Shape is the wire format the upstream speaks: openai, anthropic or
	// gemini. Required.
	Shape string `json:"shape"`
	// BaseURL is what the shape's SDK would take as base URL:
	// https://api.openai.com/v1, https://api.anthropic.com,
	// https://generativelanguage.googleapis.com. Required. Plain http is
	// accepted only for loopback hosts (credentials would travel in clear).
	BaseURL string `json:"base_url"`
	// Auth says which credential the upstream gets. Required.
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
	// Chain is the ordered list of upstream names to try. Required.
	Chain []string `json:"chain"`
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
}

// LogFile controls the request log.
type LogFile struct {
	// Prompts allows logging prompt and completion text. Default false; keys
	// are never logged.
	Prompts bool `json:"prompts,omitempty"`
	// Level is the minimum level: debug, info, warn, error. Default info.
	Level string `json:"level,omitempty"`
}
