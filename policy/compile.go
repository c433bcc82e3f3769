package policy

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"hash"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/detour-proxy/detour/rewrite"
)

// Defaults of the policy file's optional fields.
const (
	DefaultListen           = "127.0.0.1:8787"
	DefaultAdminListen      = "127.0.0.1:8788"
	DefaultDeadline         = 120 * time.Second
	DefaultConnectTimeout   = 5 * time.Second
	DefaultFirstByteTimeout = 60 * time.Second
	DefaultIdleTimeout      = 60 * time.Second
	DefaultQuotaCooldown    = 10 * time.Minute
	DefaultMaxCooldown      = 24 * time.Hour
	DefaultNeverSkipLast    = true

	DefaultRetryBase           = 250 * time.Millisecond
	DefaultRetryMax            = 4 * time.Second
	DefaultHonorRetryAfterUpTo = 10 * time.Second
	// DefaultRateLimitedRetries is rate_limited's retries: a per-minute
	// limit often clears within the vendor's retry-after, and the same
	// upstream (same model, maybe a warm cache) is worth one more try.
	DefaultRateLimitedRetries = 1
	// MaxRetries bounds errors.classes.CLASS.retries: more retries on one
	// upstream spend the deadline the rest of the chain needs.
	MaxRetries = 10

	DefaultBreakerConsecutiveFailures = 5
	DefaultBreakerFailureRate         = 0.5
	DefaultBreakerWindow              = 20
	// MaxBreakerWindow bounds breaker.window, which is kept per upstream.
	MaxBreakerWindow                  = 1000
	DefaultBreakerMinRequests         = 10
	DefaultBreakerConsecutiveTimeouts = 10
	DefaultBreakerTimeoutRate         = 0.8
	DefaultBreakerOpenFor             = 60 * time.Second
	DefaultBreakerHalfOpenProbes      = 3

	DefaultCacheEntries             = 10000
	DefaultCacheTTL                 = 24 * time.Hour
	DefaultCacheServeStaleOnFailure = true
)

// Options are the environment Compile reads from. Zero values use the
// process's own environment and file system.
type Options struct {
	// BaseDir resolves relative paths (CA files, key files, ca_file).
	// Default: the directory of the policy file's name.
	BaseDir string
	// Getenv looks up auth.env variables. Default os.LookupEnv.
	Getenv func(string) (string, bool)
	// TelemetryEnv looks up the OTEL_* variables the telemetry section
	// falls back on (policy/telemetry.go). Default os.LookupEnv.
	TelemetryEnv func(string) (string, bool)
	// ReadFile reads auth.file and ca_file. Default os.ReadFile.
	ReadFile func(string) ([]byte, error)
	// Now stamps LoadedAt. Default time.Now.
	Now func() time.Time
	// DefaultCADir is where the CA lives when the policy names none.
	// Default: os.UserConfigDir()/detour.
	DefaultCADir string
}

var upstreamName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// credentialHeaders are the headers that carry a vendor credential. They are
// removed from every upstream request before the target's own is added, and
// a policy may not set them as static headers.
var credentialHeaders = []string{"Authorization", "X-Api-Key", "Api-Key", "X-Goog-Api-Key", "Proxy-Authorization"}

// CredentialHeaders returns the canonical names of every header that carries
// a vendor credential.
func CredentialHeaders() []string { return append([]string(nil), credentialHeaders...) }

// Compile decodes, validates and compiles a policy file. name is used in
// error messages (and, unless opts.BaseDir is set, to resolve relative
// paths). The error, if any, is (or wraps) an Errors naming every problem
// found.
func Compile(name string, data []byte, opts Options) (*Compiled, error) {
	f, src, err := Decode(name, data)
	if f == nil {
		return nil, err
	}
	if opts.BaseDir == "" {
		opts.BaseDir = filepath.Dir(name)
	}
	if opts.Getenv == nil {
		opts.Getenv = os.LookupEnv
	}
	if opts.ReadFile == nil {
		opts.ReadFile = os.ReadFile
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	c := &Compiled{
		Version:       f.Version,
		Hash:          hashOf(data),
		Source:        name,
		LoadedAt:      opts.Now(),
		Listen:        f.Listen,
		Upstreams:     map[string]*Upstream{},
		Actions:       defaultActions(),
		NeverSkipLast: DefaultNeverSkipLast,
		Deadline:      DefaultDeadline,
		LogLevel:      "info",
		hosts:         map[string]bool{},
	}
	if c.Version == "" {
		c.Version = c.Hash[:12]
	}
	k := compiler{src: src, opts: opts, c: c, fp: sha256.New()}
	k.fp.Write(data)
	k.top(f)
	if len(src.errs) > 0 {
		// Validation visits maps in random order; report in file order.
		sort.SliceStable(src.errs, func(i, j int) bool {
			a, b := src.errs[i], src.errs[j]
			return a.Line < b.Line || (a.Line == b.Line && a.Col < b.Col)
		})
		return nil, k.refuse(src.errs)
	}
	c.Fingerprint = hex.EncodeToString(k.fp.Sum(nil))
	return c, nil
}

type compiler struct {
	src  *source
	opts Options
	c    *Compiled
	// fp hashes the file and the secrets and certificates it references,
	// in the order compile reads them (deterministic: upstreams by name).
	fp hash.Hash
	// undecidedOK is false when classifier.undecided is invalid, so that
	// routes do not pile a second error on the same mistake.
	undecidedOK bool
}

// present reports whether the file has a value at a field path, however
// empty: a field that must be absent is refused even as "" or {}.
func (k *compiler) present(path string) bool {
	_, ok := k.src.pos[path]
	return ok
}

// count compiles a positive count where 0 (or absence) means def. max 0 is
// no upper bound.
func (k *compiler) count(path string, v, def, max int) int {
	switch {
	case v == 0:
		return def
	case v < 0:
		k.errorf(path, "must be at least 1 (0 or absent: the default, %d); got %d", def, v)
		return def
	case max > 0 && v > max:
		k.errorf(path, "must be at most %d; got %d", max, v)
		return def
	}
	return v
}

// fraction compiles a share in (0, 1] where 0 (or absence) means def.
func (k *compiler) fraction(path string, v, def float64) float64 {
	switch {
	case v == 0:
		return def
	case v < 0 || v > 1:
		k.errorf(path, "must be a fraction above 0 and at most 1, e.g. %g; got %g", def, v)
		return def
	}
	return v
}

// readRef reads a file the policy references, and folds it into the
// fingerprint.
func (k *compiler) readRef(path string) ([]byte, error) {
	b, err := k.opts.ReadFile(path)
	k.fp.Write([]byte(path))
	k.fp.Write(b)
	k.c.Files = append(k.c.Files, path)
	return b, err
}

func (k *compiler) errorf(path, format string, args ...any) { k.src.errorf(path, format, args...) }

func (k *compiler) duration(path string, d Duration, def time.Duration) time.Duration {
	v, err := d.Parse()
	if err != nil {
		k.errorf(path, "%v", err)
		return def
	}
	if v == 0 {
		return def
	}
	return v
}

func (k *compiler) resolve(p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(k.opts.BaseDir, p)
}

func (k *compiler) top(f *File) {
	c := k.c
	if c.Listen == "" {
		c.Listen = DefaultListen
	} else if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		k.errorf("listen", "must be host:port, e.g. %q: %v", DefaultListen, err)
	}
	switch f.AdminListen {
	case "":
		c.AdminListen = DefaultAdminListen
	case "off":
	default:
		if _, _, err := net.SplitHostPort(f.AdminListen); err != nil {
			k.errorf("admin_listen", `must be host:port, e.g. %q, or "off": %v`, DefaultAdminListen, err)
		}
		c.AdminListen = f.AdminListen
	}
	k.egress(f)
	k.transparent(f.Transparent)
	if f.NeverSkipLast != nil {
		c.NeverSkipLast = *f.NeverSkipLast
	}
	c.Deadline = k.duration("deadline", f.Deadline, DefaultDeadline)
	k.retry(f.Retry)
	k.breaker(f.Breaker)
	if d, err := f.HedgeAfter.Parse(); err != nil {
		k.errorf("hedge_after", "%v", err)
	} else if d > 0 && d >= c.Deadline {
		k.errorf("hedge_after", "%s is not shorter than deadline (%s): no hedge would ever start", d, c.Deadline)
	} else {
		c.HedgeAfter = d
	}
	k.cache(f.Cache)
	k.bounds(f)
	k.state(f.State)
	// Before the routes: their tiers are checked against the undecided tier.
	k.classifier(f.Classifier)
	if f.Log != nil {
		c.LogPrompts = f.Log.Prompts
		switch f.Log.Level {
		case "":
		case "debug", "info", "warn", "error":
			c.LogLevel = f.Log.Level
		default:
			k.errorf("log.level", "must be one of debug, info, warn, error; got %q", f.Log.Level)
		}
	}
	k.ca(f.CA)
	k.admin(f.Admin)
	k.telemetry(f.Telemetry)

	base := Timeouts{Connect: DefaultConnectTimeout, FirstByte: DefaultFirstByteTimeout, Idle: DefaultIdleTimeout}
	base = k.timeouts("timeouts", f.Timeouts, base)

	if len(f.Upstreams) == 0 {
		k.errorf("upstreams", "at least one upstream is required")
	}
	for _, name := range sortedKeys(f.Upstreams) {
		if u := k.upstream(name, f.Upstreams[name], base); u != nil {
			c.Upstreams[name] = u
		}
	}
	k.upstreamFilters(f.Upstreams)
	if len(f.Routes) == 0 {
		k.errorf("routes", "at least one route is required")
	}
	names := map[string]int{}
	for i, rf := range f.Routes {
		k.route(i, rf, names, f.Upstreams)
	}
	k.plainHTTP(f)
	k.errorsSection(f.Errors, f.Upstreams)
	k.probes(f.Upstreams)
	k.budgets(f)
	k.priorities(f)
}

func (k *compiler) ca(ca *CAFile) {
	if ca == nil || (ca.CertFile == "" && ca.KeyFile == "") {
		dir := k.opts.DefaultCADir
		if dir == "" {
			cfg, err := os.UserConfigDir()
			if err != nil {
				k.errorf("ca", "no ca.cert_file/ca.key_file given and no user config directory (%v); set both", err)
				return
			}
			dir = filepath.Join(cfg, "detour")
		}
		k.c.CACertFile = filepath.Join(dir, "ca.pem")
		k.c.CAKeyFile = filepath.Join(dir, "ca-key.pem")
		return
	}
	if ca.CertFile == "" || ca.KeyFile == "" {
		k.errorf("ca", "set both cert_file and key_file, or neither (for the default location)")
		return
	}
	k.c.CACertFile = k.resolve(ca.CertFile)
	k.c.CAKeyFile = k.resolve(ca.KeyFile)
}

func (k *compiler) timeouts(path string, t *TimeoutsFile, base Timeouts) Timeouts {
	if t == nil {
		return base
	}
	base.Connect = k.duration(path+".connect", t.Connect, base.Connect)
	base.FirstByte = k.duration(path+".first_byte", t.FirstByte, base.FirstByte)
	base.Idle = k.duration(path+".idle", t.Idle, base.Idle)
	return base
}

func (k *compiler) upstream(name string, uf UpstreamFile, base Timeouts) *Upstream {
	p := "upstreams." + name
	ok := true
	if !upstreamName.MatchString(name) {
		k.errorf(p, "upstream names use letters, digits, '_', '.', '-' (at most 64), starting with a letter or digit")
		ok = false
	}
	if uf.Shape == string(ShapeStatic) {
		return k.static(p, name, uf, base, ok)
	}
	u := &Upstream{Name: name, Shape: wireShape(uf.Shape), Headers: http.Header{}}
	if !u.Shape.Valid() && u.Shape != rewrite.Bedrock {
		k.errorf(p+".shape", "must be one of %s; got %q (or static, for an upstream that answers with fixed text)", upstreamShapes, uf.Shape)
		ok = false
	}
	cloudAuth := k.cloud(p, uf, u)
	if k.present(p + ".text") {
		k.errorf(p+".text", "only a static upstream has a fixed answer; this one's shape is %q", uf.Shape)
		ok = false
	}
	u.Limits = k.limits(p+".limits", uf.Limits)
	u.ShedLowAt = k.shedLowAt(p+".limits", uf.Limits, u.Limits)
	u.Prices = k.prices(p+".prices", uf.Prices)
	if uf.BaseURL == "" && u.BaseURL != nil {
		// A cloud's regional endpoint, filled in by k.cloud.
	} else if uf.BaseURL == "" {
		k.errorf(p+".base_url", "required, e.g. %q", exampleBaseURL(u.Shape))
		ok = false
	} else if bu, err := url.Parse(uf.BaseURL); err != nil || bu.Host == "" || (bu.Scheme != "https" && bu.Scheme != "http") {
		k.errorf(p+".base_url", "must be an absolute http(s) URL such as %q; got %q", exampleBaseURL(u.Shape), uf.BaseURL)
		ok = false
	} else if bu.User != nil || bu.RawQuery != "" || bu.Fragment != "" {
		k.errorf(p+".base_url", "must not contain credentials, a query or a fragment (use auth and headers)")
		ok = false
	} else if bu.Scheme == "http" && !isLoopbackHost(bu.Hostname()) && !uf.AllowPlainHTTP {
		k.errorf(p+".base_url", "plain http is allowed only to loopback hosts; use https for %q (credentials would travel in clear), or allow_plain_http for a server in your own network", bu.Host)
		ok = false
	} else {
		bu.Path = strings.TrimRight(bu.Path, "/")
		bu.RawPath = ""
		u.BaseURL = bu
	}
	if !cloudAuth {
		k.auth(p+".auth", uf.Auth, u)
	}
	for _, m := range uf.Models {
		mp := p + ".models." + m.Key
		if m.Key == "" || m.Value == "" {
			k.errorf(mp, "model patterns and model names must not be empty")
		}
		u.Models = append(u.Models, ModelMap{Pattern: m.Key, Model: m.Value})
	}
	u.Timeouts = k.timeouts(p+".timeouts", uf.Timeouts, base)
	if uf.MaxTokens < 0 {
		k.errorf(p+".max_tokens", "must be positive; got %d", uf.MaxTokens)
	}
	u.MaxTokens = uf.MaxTokens
	u.EmbeddingDimensions = k.embeddingDimensions(p, uf.EmbeddingDimensions)
	k.chatOnly(p, uf, u)
	if uf.CAFile != "" {
		u.CAFile = k.resolve(uf.CAFile)
		pemData, err := k.readRef(u.CAFile)
		sum := sha256.Sum256(pemData)
		u.CAHash = hex.EncodeToString(sum[:])
		if err != nil {
			k.errorf(p+".ca_file", "cannot read %s: %v", u.CAFile, err)
		} else {
			pool, err := x509.SystemCertPool()
			if err != nil || pool == nil {
				pool = x509.NewCertPool()
			}
			if !pool.AppendCertsFromPEM(pemData) {
				k.errorf(p+".ca_file", "%s holds no PEM certificate", u.CAFile)
			}
			u.RootCAs = pool
		}
	}
	for _, h := range sortedKeys(uf.Headers) {
		v := uf.Headers[h]
		hp := p + ".headers." + h
		ch := http.CanonicalHeaderKey(h)
		switch {
		case u.Headers.Get(ch) != "":
			k.errorf(hp, "header %s is set twice (header names are case-insensitive)", ch)
		case !validHeaderName(h):
			k.errorf(hp, "not a valid HTTP header name")
		case isCredentialHeader(ch):
			k.errorf(hp, "credential headers are set by auth, not headers")
		case ch == "Host" || ch == "Content-Length" || ch == "Transfer-Encoding" || ch == "Connection":
			k.errorf(hp, "detour sets this header itself")
		case strings.ContainsAny(v, "\r\n"):
			k.errorf(hp, "header values must not contain line breaks")
		default:
			u.Headers.Set(ch, v)
		}
	}
	if !ok {
		return nil
	}
	return u
}

// staticFields are the upstream fields about reaching a vendor, all refused
// on a static upstream: it sends nothing, and a base_url or key left on it
// would suggest that requests go somewhere.
var staticFields = []string{"base_url", "auth", "models", "timeouts", "ca_file", "headers", "max_tokens", "limits", "prices"}

func (k *compiler) static(p, name string, uf UpstreamFile, base Timeouts, ok bool) *Upstream {
	for _, f := range staticFields {
		if k.present(p + "." + f) {
			k.errorf(p+"."+f, "a static upstream sends no request, so it takes no %s", f)
			ok = false
		}
	}
	if strings.TrimSpace(uf.Text) == "" {
		k.errorf(p+".text", "required for a static upstream: its answer, e.g. %q", "The assistant is busy. Please try again in a minute.")
		ok = false
	}
	if !ok {
		return nil
	}
	return &Upstream{Name: name, Shape: ShapeStatic, Static: true, Text: uf.Text, Timeouts: base, Headers: http.Header{}}
}

func (k *compiler) limits(p string, lf *LimitsFile) Limits {
	var l Limits
	if lf == nil {
		return l
	}
	if lf.RPM < 0 {
		k.errorf(p+".rpm", "must not be negative (0 or absent: no rate limit); got %d", lf.RPM)
	} else {
		l.RPM = lf.RPM
	}
	switch {
	case lf.Burst < 0:
		k.errorf(p+".burst", "must be at least 1 (0 or absent: one second's worth of rpm); got %d", lf.Burst)
	case lf.Burst > 0 && lf.RPM == 0:
		k.errorf(p+".burst", "has no effect without rpm, the bucket's refill rate")
	case lf.Burst > 0:
		l.Burst = lf.Burst
	case l.RPM > 0:
		l.Burst = max(1, l.RPM/60)
	}
	if lf.Concurrency < 0 {
		k.errorf(p+".concurrency", "must not be negative (0 or absent: no limit); got %d", lf.Concurrency)
	} else {
		l.Concurrency = lf.Concurrency
	}
	l.FleetConcurrency = k.fleetConcurrency(p, lf.FleetConcurrency)
	return l
}

func (k *compiler) auth(p string, a *AuthFile, u *Upstream) {
	if a == nil {
		k.errorf(p, `required: {"from":"client"}, {"env":"NAME"}, {"file":"/path"} or {"none":true}`)
		return
	}
	n := 0
	if a.From != "" {
		n++
		if a.From != "client" {
			k.errorf(p+".from", `the only source is "client"; got %q`, a.From)
		}
		u.Auth = AuthClient
	}
	if a.Env != "" {
		n++
		v, found := k.opts.Getenv(a.Env)
		v = strings.TrimSpace(v)
		k.fp.Write([]byte("env:" + a.Env + "=" + v))
		if !found || v == "" {
			k.errorf(p+".env", "environment variable %s is not set or empty; export it before starting detour", a.Env)
		}
		u.Auth, u.Key = AuthKey, Secret(v)
	}
	if a.File != "" {
		n++
		fp := k.resolve(a.File)
		b, err := k.readRef(fp)
		v := strings.TrimSpace(string(b))
		if err != nil {
			k.errorf(p+".file", "cannot read key file %s: %v", fp, err)
		} else if v == "" {
			k.errorf(p+".file", "key file %s is empty", fp)
		}
		u.Auth, u.Key = AuthKey, Secret(v)
	}
	if a.None {
		n++
		u.Auth = AuthNone
	}
	if n != 1 {
		k.errorf(p, `set exactly one of from, env, file, none (got %d)`, n)
	}
}

func (k *compiler) route(i int, rf RouteFile, names map[string]int, ups map[string]UpstreamFile) {
	p := fmt.Sprintf("routes[%d]", i)
	r := &Route{Name: rf.Name, Host: strings.ToLower(rf.Match.Host), Path: rf.Match.Path}
	ok := true
	if rf.Name == "" {
		k.errorf(p+".name", "required (it names the route in logs and metrics)")
		ok = false
	} else if j, dup := names[rf.Name]; dup {
		k.errorf(p+".name", "route name %q is already used by routes[%d]", rf.Name, j)
		ok = false
	}
	names[rf.Name] = i
	switch {
	case r.Host == "":
		k.errorf(p+".match.host", "required, e.g. %q", "api.openai.com")
		ok = false
	case strings.ContainsAny(r.Host, ":/ *"):
		k.errorf(p+".match.host", "a bare host name without scheme, port, path or wildcard; got %q", rf.Match.Host)
		ok = false
	}
	if r.Path != "" {
		if !strings.HasPrefix(r.Path, "/") {
			k.errorf(p+".match.path", "must start with /; got %q", r.Path)
			ok = false
		} else if _, err := path.Match(r.Path, "/"); err != nil {
			k.errorf(p+".match.path", "bad pattern %q: %v", r.Path, err)
			ok = false
		}
	}
	if rf.Shape != "" {
		r.Shape = rewrite.Shape(rf.Shape)
		if !r.Shape.Valid() {
			k.errorf(p+".shape", "must be one of %s (the shape the app speaks); got %q", appShapes, rf.Shape)
			ok = false
		}
	} else if r.Shape = rewrite.ShapeOfHost(r.Host); r.Shape == "" && r.Host != "" {
		k.errorf(p+".shape", "required for host %q (not a vendor's own API host): the shape the app speaks", r.Host)
		ok = false
	}
	// "chain": [] counts as set, so that it is reported as an empty chain
	// rather than as a missing one.
	hasChain := len(rf.Chain) > 0 || k.present(p+".chain")
	hasTiers := len(rf.Tiers) > 0 || k.present(p+".tiers")
	switch {
	case hasChain && hasTiers:
		k.errorf(p+".tiers", "a route has chain or tiers, not both")
		ok = false
	case hasTiers:
		ok = k.tiers(p+".tiers", rf.Tiers, r, ups) && ok
	case hasChain:
		var good bool
		r.Chain, good = k.chain(p+".chain", rf.Chain, r.Shape, ups)
		ok = good && ok
	default:
		k.errorf(p+".chain", "at least one upstream is required (or tiers: one chain per request tier)")
		ok = false
	}
	for j, prev := range k.c.Routes {
		if prev.Host == r.Host && prev.Path == r.Path {
			k.errorf(p+".match", "same host and path as routes[%d] (%q): this route would never be used", j, prev.Name)
			ok = false
		}
	}
	ok = k.selection(p+".select", rf.Select, rf, r) && ok
	if ok {
		k.c.Routes = append(k.c.Routes, r)
		k.c.hosts[r.Host] = true
	}
}

// chain compiles one chain of upstream names (a route's chain or one of its
// tiers) for an app of shape app; p is the chain's field path.
func (k *compiler) chain(p string, names []string, app rewrite.Shape, ups map[string]UpstreamFile) ([]*Upstream, bool) {
	if len(names) == 0 {
		k.errorf(p, "at least one upstream is required")
		return nil, false
	}
	ok := true
	var out []*Upstream
	seen := map[string]bool{}
	static := ""
	for j, name := range names {
		cp := fmt.Sprintf("%s[%d]", p, j)
		uf, exists := ups[name]
		switch {
		case !exists:
			k.errorf(cp, "no upstream named %q (defined: %s)", name, strings.Join(sortedKeys(ups), ", "))
			ok = false
			continue
		case seen[name]:
			k.errorf(cp, "upstream %q appears twice in the chain", name)
			ok = false
			continue
		}
		seen[name] = true
		if static != "" {
			k.errorf(cp, "upstream %q comes after the static upstream %q, which always answers: it would never be tried", name, static)
			ok = false
		}
		switch {
		case uf.Shape == string(ShapeStatic):
			// A static upstream answers in whatever shape the app speaks
			// and needs neither a model nor a key: nothing to check.
			static = name
		case app.Valid() && isWireShape(uf.Shape) && wireShape(uf.Shape) != app:
			// A chain that crosses shapes translates the request. Two
			// setups could never work, so they are refused up front: the
			// app's model name sent to another vendor, and the app's key
			// (which must never reach another vendor).
			if len(uf.Models) == 0 && rewrite.Shape(uf.Shape).Vendor() != app.Vendor() {
				k.errorf(cp, "upstream %q speaks %s but this route's app speaks %s: give it a models mapping (e.g. {\"*\": \"<%s model>\"}) so it is not sent the app's model name", name, uf.Shape, app, uf.Shape)
				ok = false
			}
			if uf.Auth != nil && uf.Auth.From == "client" && rewrite.Shape(uf.Shape).Vendor() != app.Vendor() {
				k.errorf(cp, "upstream %q uses the app's own key (auth from client) but this route's app speaks %s, not %s: the app's key never goes to another vendor; give the upstream its own key (env or file)", name, app, uf.Shape)
				ok = false
			}
		}
		if u := k.c.Upstreams[name]; u != nil {
			out = append(out, u)
		}
	}
	ok = k.embedChain(p, names, ups) && ok
	return out, ok
}

// tiers compiles a route's tiers into r.Tiers, and r.Chain as the
// undecided tier's chain; p is the field path of the tiers object.
func (k *compiler) tiers(p string, tf map[string][]string, r *Route, ups map[string]UpstreamFile) bool {
	if len(tf) == 0 {
		k.errorf(p, "at least one tier is required, e.g. {%q: [...], %q: [...]}", TierHard, TierEasy)
		return false
	}
	ok := true
	und := k.c.Classifier.Undecided
	r.Tiers = make(map[string][]*Upstream, len(tf))
	for _, name := range sortedKeys(tf) {
		np := p + "." + name
		// A tier the classifier never picks ("premium") is allowed: the
		// request path may choose tiers by other means than the prompt.
		if !tierName.MatchString(name) {
			k.errorf(np, "tier names use lowercase letters, digits, '_' and '-'")
			ok = false
		}
		ch, good := k.chain(np, tf[name], r.Shape, ups)
		ok = good && ok
		r.Tiers[name] = ch
	}
	if _, has := tf[und]; !has && k.undecidedOK {
		k.errorf(p, "no %q tier: classifier.undecided is %q, and that tier's chain serves every request the classifier cannot decide and every tier this route lacks", und, und)
		ok = false
	}
	r.Chain = r.Tiers[und]
	return ok
}

func (k *compiler) retry(rf *RetryFile) {
	r := RetryPolicy{Base: DefaultRetryBase, Max: DefaultRetryMax, HonorRetryAfterUpTo: DefaultHonorRetryAfterUpTo}
	defer func() { k.c.Retry = r }()
	if rf == nil {
		return
	}
	errs := len(k.src.errs)
	r.Base = k.duration("retry.base", rf.Base, DefaultRetryBase)
	r.Max = k.duration("retry.max", rf.Max, DefaultRetryMax)
	if len(k.src.errs) == errs && r.Max < r.Base {
		// Blame the field the user wrote: a long base against the
		// default max is a problem with base.
		if max, _ := rf.Max.Parse(); max > 0 {
			k.errorf("retry.max", "must not be shorter than retry.base (%s); got %s", r.Base, r.Max)
		} else {
			k.errorf("retry.base", "must not be longer than retry.max (%s, the default); got %s", r.Max, r.Base)
		}
	}
	if rf.HonorRetryAfterUpTo != "" {
		// An explicit "0s" is kept: never sit out a vendor-named wait.
		if d, err := rf.HonorRetryAfterUpTo.Parse(); err != nil {
			k.errorf("retry.honor_retry_after_up_to", "%v", err)
		} else {
			r.HonorRetryAfterUpTo = d
		}
	}
}

func (k *compiler) breaker(bf *BreakerFile) {
	b := BreakerPolicy{
		Enabled:             true,
		ConsecutiveFailures: DefaultBreakerConsecutiveFailures,
		FailureRate:         DefaultBreakerFailureRate,
		Window:              DefaultBreakerWindow,
		MinRequests:         DefaultBreakerMinRequests,
		ConsecutiveTimeouts: DefaultBreakerConsecutiveTimeouts,
		TimeoutRate:         DefaultBreakerTimeoutRate,
		OpenFor:             DefaultBreakerOpenFor,
		HalfOpenProbes:      DefaultBreakerHalfOpenProbes,
	}
	defer func() { k.c.Breaker = b }()
	if bf == nil {
		return
	}
	if bf.Enabled != nil {
		b.Enabled = *bf.Enabled
	}
	b.ConsecutiveFailures = k.count("breaker.consecutive_failures", bf.ConsecutiveFailures, b.ConsecutiveFailures, 0)
	b.FailureRate = k.fraction("breaker.failure_rate", bf.FailureRate, b.FailureRate)
	errs := len(k.src.errs)
	b.Window = k.count("breaker.window", bf.Window, b.Window, MaxBreakerWindow)
	windowOK := len(k.src.errs) == errs
	// A smaller window than the default min_requests lowers the default
	// with it, rather than making the rates never judged.
	b.MinRequests = min(b.MinRequests, b.Window)
	if bf.MinRequests > b.Window && windowOK {
		k.errorf("breaker.min_requests", "must not exceed breaker.window (%d), or the rates would never be judged; got %d", b.Window, bf.MinRequests)
	} else {
		b.MinRequests = k.count("breaker.min_requests", bf.MinRequests, b.MinRequests, 0)
	}
	b.ConsecutiveTimeouts = k.count("breaker.consecutive_timeouts", bf.ConsecutiveTimeouts, b.ConsecutiveTimeouts, 0)
	b.TimeoutRate = k.fraction("breaker.timeout_rate", bf.TimeoutRate, b.TimeoutRate)
	b.OpenFor = k.duration("breaker.open_for", bf.OpenFor, b.OpenFor)
	b.HalfOpenProbes = k.count("breaker.half_open_probes", bf.HalfOpenProbes, b.HalfOpenProbes, 0)
	b.Recovery = k.breakerRecovery(bf.Recovery, b.Enabled)
}

func (k *compiler) cache(cf *CacheFile) {
	// Filled even when off, like Retry and Breaker: no reader of the
	// policy ever meets a zero TTL or size.
	c := CachePolicy{Entries: DefaultCacheEntries, TTL: DefaultCacheTTL, ServeStaleOnFailure: DefaultCacheServeStaleOnFailure}
	defer func() { k.c.Cache = c }()
	if cf == nil {
		return
	}
	c.Enabled = true
	c.Entries = k.count("cache.entries", cf.Entries, c.Entries, 0)
	c.TTL = k.duration("cache.ttl", cf.TTL, c.TTL)
	if cf.ServeStaleOnFailure != nil {
		c.ServeStaleOnFailure = *cf.ServeStaleOnFailure
	}
	c.AllowTemperature = cf.AllowTemperature
}

func (k *compiler) errorsSection(e *ErrorsFile, ups map[string]UpstreamFile) {
	if e == nil {
		return
	}
	for i, rf := range e.Rules {
		p := fmt.Sprintf("errors.rules[%d]", i)
		r := Rule{Upstream: rf.Upstream, Status: rf.Status, Type: rf.Type, Code: rf.Code, MessageContains: rf.MessageContains, Class: Class(rf.Class)}
		switch {
		case r.Class == ClassLocalLimit:
			k.errorf(p+".class", "%s is detour's own verdict (a limit of its own reached), never a response's; use one of %s", ClassLocalLimit, classList())
		case !r.Class.Valid():
			k.errorf(p+".class", "must be one of %s; got %q", classList(), rf.Class)
		}
		if rf.Upstream != "" {
			if _, ok := ups[rf.Upstream]; !ok {
				k.errorf(p+".upstream", "no upstream named %q", rf.Upstream)
			}
		}
		if rf.Status == 0 && rf.Type == "" && rf.Code == "" && rf.MessageContains == "" {
			k.errorf(p, "a rule needs at least one of status, type, code, message_contains")
		}
		if rf.Status != 0 && (rf.Status < 100 || rf.Status > 599) {
			k.errorf(p+".status", "not an HTTP status: %d", rf.Status)
		}
		k.c.Rules = append(k.c.Rules, r)
	}
	for name, af := range e.Classes {
		p := "errors.classes." + name
		cl := Class(name)
		if cl == ClassLocalLimit {
			// Skipping is the only sane action for an attempt that was
			// never sent: no retry would find the limit lifted, and a
			// stop or cooldown would punish the upstream for detour's
			// own limit.
			k.errorf(p, "%s always skips to the next upstream and cannot be configured; classes are %s", ClassLocalLimit, classList())
			continue
		}
		if !cl.Valid() {
			k.errorf(p, "unknown class; classes are %s", classList())
			continue
		}
		a := k.c.Actions[cl]
		switch Then(af.Then) {
		case "":
		case Fallback, Stop:
			a.Then = Then(af.Then)
		default:
			k.errorf(p+".then", `must be "fallback" or "stop"; got %q`, af.Then)
		}
		if af.Cooldown != "" {
			// An explicit "0s" turns the class's cooldown off.
			if d, err := af.Cooldown.Parse(); err != nil {
				k.errorf(p+".cooldown", "%v", err)
			} else {
				a.Cooldown = d
			}
		}
		a.MaxCooldown = k.duration(p+".max_cooldown", af.MaxCooldown, a.MaxCooldown)
		if af.Retries != nil {
			if n := *af.Retries; n < 0 || n > MaxRetries {
				k.errorf(p+".retries", "must be 0 to %d; got %d", MaxRetries, n)
			} else {
				a.Retries = n
			}
		}
		k.c.Actions[cl] = a
	}
}

func classList() string {
	s := make([]string, len(Classes))
	for i, c := range Classes {
		s[i] = string(c)
	}
	return strings.Join(s, ", ")
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func exampleBaseURL(s rewrite.Shape) string {
	switch s {
	case rewrite.Anthropic:
		return "https://api.anthropic.com"
	case rewrite.Gemini:
		return "https://generativelanguage.googleapis.com"
	}
	return "https://api.openai.com/v1"
}

func isCredentialHeader(canonical string) bool {
	for _, h := range credentialHeaders {
		if h == canonical {
			return true
		}
	}
	return false
}

func isLoopbackHost(h string) bool {
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

func validHeaderName(h string) bool {
	if h == "" {
		return false
	}
	for _, r := range h {
		if r > 126 || r <= 32 || strings.ContainsRune(`()<>@,;:\"/[]?={}`, r) {
			return false
		}
	}
	return true
}

// globMatch matches s against a pattern where * matches any run of
// characters (including none) and every other character matches itself.
// Model names contain "/" and ":" (e.g. "qwen2.5:7b", "org/model"), which
// path.Match would treat specially.
func globMatch(pattern, s string) bool {
	star := strings.IndexByte(pattern, '*')
	if star < 0 {
		return pattern == s
	}
	if !strings.HasPrefix(s, pattern[:star]) {
		return false
	}
	s, pattern = s[star:], pattern[star+1:]
	if pattern == "" {
		return true
	}
	// The star takes any run of s; the rest of the pattern must match what
	// follows it.
	for i := 0; i <= len(s); i++ {
		if globMatch(pattern, s[i:]) {
			return true
		}
	}
	return false
}

// CAPaths returns the CA files a policy names (resolved like Compile does),
// after decoding it strictly but without validating the rest: `detour ca`
// must work even when, say, an upstream's key variable is not set in the
// shell that runs it.
func CAPaths(name string, data []byte, opts Options) (certFile, keyFile string, err error) {
	f, src, err := Decode(name, data)
	if f == nil {
		return "", "", err
	}
	if opts.BaseDir == "" {
		opts.BaseDir = filepath.Dir(name)
	}
	k := compiler{src: src, opts: opts, c: &Compiled{}, fp: sha256.New()}
	k.ca(f.CA)
	if len(src.errs) > 0 {
		return "", "", src.errs
	}
	return k.c.CACertFile, k.c.CAKeyFile, nil
}
