package policy

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// policyParts builds a policy from its parts, so that each case below
// states only what it is about. Empty upstreams and routes get the base
// ones: an openai upstream with the app's key, an anthropic one with its
// own key and model, and a static one.
type policyParts struct {
	upstreams string // members of "upstreams"
	routes    string // elements of "routes"
	top       string // extra top-level members, without a trailing comma
}

const (
	baseUpstreams = `
    "o": {"shape": "openai", "base_url": "https://api.openai.com/v1", "auth": {"from": "client"}},
    "a": {"shape": "anthropic", "base_url": "https://api.anthropic.com", "auth": {"env": "BACKUP_KEY"}, "models": {"*": "claude-haiku-4-5"}},
    "sorry": {"shape": "static", "text": "Busy, try again in a minute."}`
	baseRoutes = `
    {"name": "r", "match": {"host": "api.openai.com"}, "chain": ["o", "a", "sorry"]}`
)

func (p policyParts) String() string {
	ups, routes := p.upstreams, p.routes
	if ups == "" {
		ups = baseUpstreams
	}
	if routes == "" {
		routes = baseRoutes
	}
	top := ""
	if p.top != "" {
		top = ",\n  " + p.top
	}
	return fmt.Sprintf("{\n  \"upstreams\": {%s\n  },\n  \"routes\": [%s\n  ]%s\n}", ups, routes, top)
}

func compileParts(t *testing.T, p policyParts) *Compiled {
	t.Helper()
	c, err := Compile("policy.json", []byte(p.String()), testOptions())
	if err != nil {
		t.Fatalf("policy does not compile:\n%v\npolicy:\n%s", err, p)
	}
	return c
}

// fieldErr is one expected error: its field path and its exact message.
type fieldErr struct{ field, msg string }

func (e fieldErr) String() string { return e.field + ": " + e.msg }

// compileErrs compiles a policy that must fail and returns its errors as
// field and message, checking that every one has a line and column.
func compileErrs(t *testing.T, p policyParts) []fieldErr {
	t.Helper()
	_, err := Compile("policy.json", []byte(p.String()), testOptions())
	var es Errors
	if !errors.As(err, &es) {
		t.Fatalf("err = %v (%T); want Errors\npolicy:\n%s", err, err, p)
	}
	var out []fieldErr
	for _, e := range es {
		if e.Line == 0 {
			t.Errorf("error without a line: %v", e)
		}
		out = append(out, fieldErr{e.Field, e.Msg})
	}
	return out
}

func TestResilienceDefaultsWhenSectionsAbsent(t *testing.T) {
	c := compileParts(t, policyParts{})
	if want := (RetryPolicy{Base: 250 * time.Millisecond, Max: 4 * time.Second, HonorRetryAfterUpTo: 10 * time.Second}); c.Retry != want {
		t.Errorf("Retry = %+v\nwant %+v", c.Retry, want)
	}
	wantBreaker := BreakerPolicy{
		Enabled: true, ConsecutiveFailures: 5, FailureRate: 0.5, Window: 20, MinRequests: 10,
		ConsecutiveTimeouts: 10, TimeoutRate: 0.8, OpenFor: 60 * time.Second, HalfOpenProbes: 3,
	}
	if c.Breaker != wantBreaker {
		t.Errorf("Breaker = %+v\nwant %+v", c.Breaker, wantBreaker)
	}
	if c.HedgeAfter != 0 {
		t.Errorf("HedgeAfter = %v; want 0 (off)", c.HedgeAfter)
	}
	wantCache := CachePolicy{Enabled: false, Entries: 10000, TTL: 24 * time.Hour, ServeStaleOnFailure: true}
	if c.Cache != wantCache {
		t.Errorf("Cache = %+v\nwant %+v", c.Cache, wantCache)
	}
	if c.Classifier == nil {
		t.Fatal("Classifier is nil without a classifier section")
	}
	cl := c.Classifier
	if cl.LongInputChars != 2000 || cl.CodeBlocks != 2 || cl.Files != 2 || cl.Undecided != "hard" || len(cl.hard)+len(cl.easy) != 0 {
		t.Errorf("Classifier = %+v; want the defaults", cl)
	}
	for _, class := range Classes {
		want := 0
		if class == ClassRateLimited {
			want = 1
		}
		if got := c.Action(class).Retries; got != want {
			t.Errorf("Action(%s).Retries = %d; want %d", class, got, want)
		}
	}
	if l := c.Upstreams["a"].Limits; l != (Limits{}) {
		t.Errorf("Limits without a limits section = %+v; want none", l)
	}
	r := c.Routes[0]
	if r.Tiers != nil {
		t.Errorf("Tiers of a plain chain = %v; want nil", r.Tiers)
	}
	for _, tier := range []string{"", "hard", "easy"} {
		if got := names(r.ChainFor(tier)); got != "o a sorry" {
			t.Errorf("ChainFor(%q) = %s; want the chain", tier, got)
		}
	}
}

func TestResilienceValuesCompile(t *testing.T) {
	c := compileParts(t, policyParts{
		upstreams: `
    "o": {"shape": "openai", "base_url": "https://api.openai.com/v1", "auth": {"from": "client"}, "limits": {"rpm": 4000, "concurrency": 64}},
    "slow": {"shape": "openai", "base_url": "https://gw.example.com/v1", "auth": {"none": true}, "limits": {"rpm": 30}},
    "burst": {"shape": "openai", "base_url": "https://gw.example.com/v1", "auth": {"none": true}, "limits": {"rpm": 600, "burst": 50}},
    "conc": {"shape": "openai", "base_url": "https://gw.example.com/v1", "auth": {"none": true}, "limits": {"concurrency": 2}}`,
		routes: `
    {"name": "r", "match": {"host": "api.openai.com"}, "chain": ["o", "slow", "burst", "conc"]}`,
		top: `"retry": {"base": "100ms", "max": "2s", "honor_retry_after_up_to": "0s"},
  "breaker": {"enabled": false, "consecutive_failures": 3, "failure_rate": 1, "window": 5,
              "consecutive_timeouts": 4, "timeout_rate": 0.25, "open_for": "30s", "half_open_probes": 1},
  "hedge_after": "1500ms",
  "deadline": "30s",
  "errors": {"classes": {"rate_limited": {"retries": 0}, "server_error": {"retries": 2}, "timeout": {"retries": 10}}},
  "cache": {"entries": 5, "ttl": "1h", "serve_stale_on_failure": false, "allow_temperature": true}`,
	})
	// "0s" is kept for honor_retry_after_up_to: never sit out a named wait.
	if want := (RetryPolicy{Base: 100 * time.Millisecond, Max: 2 * time.Second}); c.Retry != want {
		t.Errorf("Retry = %+v\nwant %+v", c.Retry, want)
	}
	// window 5 pulls the default min_requests (10) down with it.
	wantBreaker := BreakerPolicy{
		Enabled: false, ConsecutiveFailures: 3, FailureRate: 1, Window: 5, MinRequests: 5,
		ConsecutiveTimeouts: 4, TimeoutRate: 0.25, OpenFor: 30 * time.Second, HalfOpenProbes: 1,
	}
	if c.Breaker != wantBreaker {
		t.Errorf("Breaker = %+v\nwant %+v", c.Breaker, wantBreaker)
	}
	if c.HedgeAfter != 1500*time.Millisecond {
		t.Errorf("HedgeAfter = %v; want 1.5s", c.HedgeAfter)
	}
	for class, want := range map[Class]int{ClassRateLimited: 0, ClassServerError: 2, ClassTimeout: 10, ClassOverloaded: 0} {
		if got := c.Action(class).Retries; got != want {
			t.Errorf("Action(%s).Retries = %d; want %d", class, got, want)
		}
	}
	wantCache := CachePolicy{Enabled: true, Entries: 5, TTL: time.Hour, ServeStaleOnFailure: false, AllowTemperature: true}
	if c.Cache != wantCache {
		t.Errorf("Cache = %+v\nwant %+v", c.Cache, wantCache)
	}
	for name, want := range map[string]Limits{
		"o":     {RPM: 4000, Burst: 66, Concurrency: 64}, // burst: one second's worth
		"slow":  {RPM: 30, Burst: 1},                     // never less than one
		"burst": {RPM: 600, Burst: 50},
		"conc":  {Concurrency: 2},
	} {
		if got := c.Upstreams[name].Limits; got != want {
			t.Errorf("upstream %s Limits = %+v; want %+v", name, got, want)
		}
	}
}

func TestResilienceSectionsPresentButEmpty(t *testing.T) {
	c := compileParts(t, policyParts{top: `"cache": {}, "breaker": {"min_requests": 20}, "retry": {}, "classifier": {}`})
	if !c.Cache.Enabled || c.Cache.Entries != DefaultCacheEntries || c.Cache.TTL != DefaultCacheTTL || !c.Cache.ServeStaleOnFailure {
		t.Errorf(`"cache": {} = %+v; want on with the defaults`, c.Cache)
	}
	if !c.Breaker.Enabled || c.Breaker.MinRequests != 20 || c.Breaker.Window != DefaultBreakerWindow {
		t.Errorf("Breaker = %+v; want on, min_requests 20 (equal to the default window is allowed)", c.Breaker)
	}
	if c.Retry.HonorRetryAfterUpTo != DefaultHonorRetryAfterUpTo {
		t.Errorf(`"retry": {} HonorRetryAfterUpTo = %v; want the default`, c.Retry.HonorRetryAfterUpTo)
	}
}

func TestResilienceValidationErrors(t *testing.T) {
	const notRouteClasses = "rate_limited, quota_exhausted, overloaded, server_error, timeout, unreachable, context_too_long, invalid_request, auth, content_filter, bad_response"
	for _, tc := range []struct {
		name string
		p    policyParts
		want []fieldErr
	}{
		{"retries above 10", policyParts{top: `"errors": {"classes": {"rate_limited": {"retries": 11}}}`},
			[]fieldErr{{"errors.classes.rate_limited.retries", "must be 0 to 10; got 11"}}},
		{"negative retries", policyParts{top: `"errors": {"classes": {"server_error": {"retries": -1}}}`},
			[]fieldErr{{"errors.classes.server_error.retries", "must be 0 to 10; got -1"}}},
		{"local_limit cannot be configured", policyParts{top: `"errors": {"classes": {"local_limit": {"then": "stop"}}}`},
			[]fieldErr{{"errors.classes.local_limit", "local_limit always skips to the next upstream and cannot be configured; classes are " + notRouteClasses}}},
		{"local_limit cannot be assigned by a rule", policyParts{top: `"errors": {"rules": [{"status": 429, "class": "local_limit"}]}`},
			[]fieldErr{{"errors.rules[0].class", "local_limit is detour's own verdict (a limit of its own reached), never a response's; use one of " + notRouteClasses}}},

		{"bad retry duration", policyParts{top: `"retry": {"base": "soon"}`},
			[]fieldErr{{"retry.base", `invalid duration "soon" (use Go duration syntax such as "250ms", "30s", "10m")`}}},
		{"retry max shorter than base", policyParts{top: `"retry": {"base": "2s", "max": "1s"}`},
			[]fieldErr{{"retry.max", "must not be shorter than retry.base (2s); got 1s"}}},
		{"retry base longer than the default max", policyParts{top: `"retry": {"base": "5s"}`},
			[]fieldErr{{"retry.base", "must not be longer than retry.max (4s, the default); got 5s"}}},
		{"negative honor_retry_after_up_to", policyParts{top: `"retry": {"honor_retry_after_up_to": "-1s"}`},
			[]fieldErr{{"retry.honor_retry_after_up_to", `duration "-1s" must not be negative`}}},

		{"breaker counts and rates", policyParts{top: `"breaker": {"consecutive_failures": -1, "failure_rate": 1.5, "window": 1001,
    "consecutive_timeouts": -2, "timeout_rate": -0.1, "open_for": "1 minute", "half_open_probes": -3}`},
			[]fieldErr{
				{"breaker.consecutive_failures", "must be at least 1 (0 or absent: the default, 5); got -1"},
				{"breaker.failure_rate", "must be a fraction above 0 and at most 1, e.g. 0.5; got 1.5"},
				{"breaker.window", "must be at most 1000; got 1001"},
				{"breaker.consecutive_timeouts", "must be at least 1 (0 or absent: the default, 10); got -2"},
				{"breaker.timeout_rate", "must be a fraction above 0 and at most 1, e.g. 0.8; got -0.1"},
				{"breaker.open_for", `invalid duration "1 minute" (use Go duration syntax such as "250ms", "30s", "10m")`},
				{"breaker.half_open_probes", "must be at least 1 (0 or absent: the default, 3); got -3"},
			}},
		{"breaker min_requests above window", policyParts{top: `"breaker": {"window": 8, "min_requests": 9}`},
			[]fieldErr{{"breaker.min_requests", "must not exceed breaker.window (8), or the rates would never be judged; got 9"}}},
		{"breaker min_requests above the default window", policyParts{top: `"breaker": {"min_requests": 21}`},
			[]fieldErr{{"breaker.min_requests", "must not exceed breaker.window (20), or the rates would never be judged; got 21"}}},
		{"bad window is reported once", policyParts{top: `"breaker": {"window": 5000, "min_requests": 30}`},
			[]fieldErr{{"breaker.window", "must be at most 1000; got 5000"}}},
		{"breaker enabled is a bool", policyParts{top: `"breaker": {"enabled": "yes"}`},
			[]fieldErr{{"breaker.enabled", `expected true or false, got "yes"`}}},

		{"negative hedge_after", policyParts{top: `"hedge_after": "-5s"`},
			[]fieldErr{{"hedge_after", `duration "-5s" must not be negative`}}},
		{"hedge_after not shorter than the deadline", policyParts{top: `"hedge_after": "30s", "deadline": "30s"`},
			[]fieldErr{{"hedge_after", "30s is not shorter than deadline (30s): no hedge would ever start"}}},

		{"limits", policyParts{upstreams: `
    "o": {"shape": "openai", "base_url": "https://api.openai.com/v1", "auth": {"from": "client"}, "limits": {"rpm": -1, "burst": -2, "concurrency": -3}},
    "p": {"shape": "openai", "base_url": "https://api.openai.com/v1", "auth": {"from": "client"}, "limits": {"burst": 5}}`,
			routes: `{"name": "r", "match": {"host": "api.openai.com"}, "chain": ["o", "p"]}`},
			[]fieldErr{
				{"upstreams.o.limits.rpm", "must not be negative (0 or absent: no rate limit); got -1"},
				{"upstreams.o.limits.burst", "must be at least 1 (0 or absent: one second's worth of rpm); got -2"},
				{"upstreams.o.limits.concurrency", "must not be negative (0 or absent: no limit); got -3"},
				{"upstreams.p.limits.burst", "has no effect without rpm, the bucket's refill rate"},
			}},

		{"cache serve_stale_on_failure is a bool", policyParts{top: `"cache": {"serve_stale_on_failure": 1}`},
			[]fieldErr{{"cache.serve_stale_on_failure", "expected true or false, got 1"}}},
		{"cache entries and ttl", policyParts{top: `"cache": {"entries": -1, "ttl": "forever"}`},
			[]fieldErr{
				{"cache.entries", "must be at least 1 (0 or absent: the default, 10000); got -1"},
				{"cache.ttl", `invalid duration "forever" (use Go duration syntax such as "250ms", "30s", "10m")`},
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := compileErrs(t, tc.p)
			checkErrs(t, got, tc.want)
		})
	}
}

func TestStaticUpstream(t *testing.T) {
	// One static upstream in an openai route and an anthropic route: it
	// needs no models mapping and no key, whatever the app speaks.
	c := compileParts(t, policyParts{routes: `
    {"name": "chat", "match": {"host": "api.openai.com", "path": "/v1/chat/completions"}, "chain": ["o", "sorry"]},
    {"name": "messages", "match": {"host": "api.anthropic.com", "path": "/v1/messages"}, "chain": ["a", "sorry"]}`})
	u := c.Upstreams["sorry"]
	if !u.Static || string(u.Shape) != "static" || u.BaseURL != nil || u.Text != "Busy, try again in a minute." {
		t.Errorf("static upstream = %+v", u)
	}
	if u.Auth != 0 || u.Key != "" || len(u.Models) != 0 || u.Limits != (Limits{}) {
		t.Errorf("static upstream has auth, models or limits: %+v", u)
	}
	if u.Timeouts.Connect == 0 || u.Timeouts.FirstByte == 0 || u.Timeouts.Idle == 0 {
		t.Errorf("static upstream timeouts = %+v; want the policy-wide ones (never zero)", u.Timeouts)
	}
	for _, r := range c.Routes {
		if last := r.Chain[len(r.Chain)-1]; last != u {
			t.Errorf("route %s ends with %s; want the static upstream", r.Name, last.Name)
		}
	}
	if c.Upstreams["o"].Static {
		t.Error("an openai upstream is marked static")
	}
}

func TestStaticUpstreamErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    policyParts
		want []fieldErr
	}{
		{"static takes nothing about reaching a vendor", policyParts{upstreams: `
    "o": {"shape": "openai", "base_url": "https://api.openai.com/v1", "auth": {"from": "client"}},
    "sorry": {"shape": "static", "text": "busy", "base_url": "https://x.example.com", "auth": {"none": true},
              "models": {"*": "m"}, "timeouts": {"connect": "1s"}, "ca_file": "ca.pem", "headers": {"x-a": "b"},
              "max_tokens": 0, "limits": {}}`,
			routes: `{"name": "r", "match": {"host": "api.openai.com"}, "chain": ["o", "sorry"]}`},
			[]fieldErr{
				{"upstreams.sorry.base_url", "a static upstream sends no request, so it takes no base_url"},
				{"upstreams.sorry.auth", "a static upstream sends no request, so it takes no auth"},
				{"upstreams.sorry.models", "a static upstream sends no request, so it takes no models"},
				{"upstreams.sorry.timeouts", "a static upstream sends no request, so it takes no timeouts"},
				{"upstreams.sorry.ca_file", "a static upstream sends no request, so it takes no ca_file"},
				{"upstreams.sorry.headers", "a static upstream sends no request, so it takes no headers"},
				{"upstreams.sorry.max_tokens", "a static upstream sends no request, so it takes no max_tokens"},
				{"upstreams.sorry.limits", "a static upstream sends no request, so it takes no limits"},
			}},
		{"static needs text", policyParts{upstreams: `
    "o": {"shape": "openai", "base_url": "https://api.openai.com/v1", "auth": {"from": "client"}},
    "sorry": {"shape": "static"},
    "blank": {"shape": "static", "text": "  \n"}`,
			routes: `{"name": "r", "match": {"host": "api.openai.com"}, "chain": ["o", "sorry"]}`},
			[]fieldErr{
				{"upstreams.sorry.text", `required for a static upstream: its answer, e.g. "The assistant is busy. Please try again in a minute."`},
				{"upstreams.blank.text", `required for a static upstream: its answer, e.g. "The assistant is busy. Please try again in a minute."`},
			}},
		{"only static has text", policyParts{upstreams: `
    "o": {"shape": "openai", "base_url": "https://api.openai.com/v1", "auth": {"from": "client"}, "text": "hello"}`,
			routes: `{"name": "r", "match": {"host": "api.openai.com"}, "chain": ["o"]}`},
			[]fieldErr{{"upstreams.o.text", `only a static upstream has a fixed answer; this one's shape is "openai"`}}},
		{"nothing after a static upstream", policyParts{routes: `
    {"name": "r", "match": {"host": "api.openai.com"}, "chain": ["o", "sorry", "a"]}`},
			[]fieldErr{{"routes[0].chain[2]", `upstream "a" comes after the static upstream "sorry", which always answers: it would never be tried`}}},
		{"unknown shape names static", policyParts{upstreams: `
    "o": {"shape": "fixed", "text": "hi"}`,
			routes: `{"name": "r", "match": {"host": "api.openai.com"}, "chain": ["o"]}`},
			[]fieldErr{
				// Missing fields are located at their upstream, before its shape.
				{"upstreams.o.base_url", `required, e.g. "https://api.openai.com/v1"`},
				{"upstreams.o.auth", `required: {"from":"client"}, {"env":"NAME"}, {"file":"/path"} or {"none":true}`},
				{"upstreams.o.shape", `must be one of openai, anthropic, gemini, openai-responses, azure-openai, bedrock; got "fixed" (or static, for an upstream that answers with fixed text)`},
				{"upstreams.o.text", `only a static upstream has a fixed answer; this one's shape is "fixed"`},
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := compileErrs(t, tc.p)
			checkErrs(t, got, tc.want)
		})
	}
}

func TestRouteTiers(t *testing.T) {
	c := compileParts(t, policyParts{routes: `
    {"name": "r", "match": {"host": "api.openai.com"}, "tiers": {"hard": ["o", "a", "sorry"], "easy": ["a", "o"], "premium": ["a"]}}`})
	r := c.Routes[0]
	if got := names(r.Chain); got != "o a sorry" {
		t.Errorf("Chain = %s; want the undecided (hard) tier's", got)
	}
	// premium is never the classifier's pick, but is kept for whatever else
	// chooses tiers.
	for tier, want := range map[string]string{"hard": "o a sorry", "easy": "a o", "premium": "a", "": "o a sorry", "medium": "o a sorry"} {
		if got := names(r.ChainFor(tier)); got != want {
			t.Errorf("ChainFor(%q) = %s; want %s", tier, got, want)
		}
	}

	// Another undecided tier: it is the one required, and Chain is its.
	c = compileParts(t, policyParts{
		routes: `
    {"name": "r", "match": {"host": "api.openai.com"}, "tiers": {"medium": ["a"], "easy": ["o"]}}`,
		top: `"classifier": {"undecided": "medium"}`,
	})
	r = c.Routes[0]
	if got := names(r.Chain); got != "a" {
		t.Errorf("Chain = %s; want the medium tier's", got)
	}
	if got := names(r.ChainFor("hard")); got != "a" {
		t.Errorf("ChainFor(hard) on a route without a hard tier = %s; want the undecided tier's", got)
	}
}

func TestRouteTiersErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    policyParts
		want []fieldErr
	}{
		{"chain and tiers", policyParts{routes: `{"name": "r", "match": {"host": "api.openai.com"}, "chain": ["o"], "tiers": {"hard": ["o"]}}`},
			[]fieldErr{{"routes[0].tiers", "a route has chain or tiers, not both"}}},
		{"neither chain nor tiers", policyParts{routes: `{"name": "r", "match": {"host": "api.openai.com"}}`},
			[]fieldErr{{"routes[0].chain", "at least one upstream is required (or tiers: one chain per request tier)"}}},
		{"empty tiers", policyParts{routes: `{"name": "r", "match": {"host": "api.openai.com"}, "tiers": {}}`},
			[]fieldErr{{"routes[0].tiers", `at least one tier is required, e.g. {"hard": [...], "easy": [...]}`}}},
		{"undecided tier missing", policyParts{routes: `{"name": "r", "match": {"host": "api.openai.com"}, "tiers": {"easy": ["o"]}}`},
			[]fieldErr{{"routes[0].tiers", `no "hard" tier: classifier.undecided is "hard", and that tier's chain serves every request the classifier cannot decide and every tier this route lacks`}}},
		{"configured undecided tier missing", policyParts{
			routes: `{"name": "r", "match": {"host": "api.openai.com"}, "tiers": {"hard": ["o"]}}`,
			top:    `"classifier": {"undecided": "easy"}`},
			[]fieldErr{{"routes[0].tiers", `no "easy" tier: classifier.undecided is "easy", and that tier's chain serves every request the classifier cannot decide and every tier this route lacks`}}},
		{"bad tier names", policyParts{routes: `{"name": "r", "match": {"host": "api.openai.com"}, "tiers": {"hard": ["o"], "Easy": ["o"], "": ["a"]}}`},
			[]fieldErr{
				{"routes[0].tiers.Easy", "tier names use lowercase letters, digits, '_' and '-'"},
				{"routes[0].tiers.", "tier names use lowercase letters, digits, '_' and '-'"},
			}},
		{"tier chains are checked like chain", policyParts{routes: `{"name": "r", "match": {"host": "api.openai.com"}, "tiers": {
      "hard": ["o", "nope", "o"], "easy": []}}`},
			[]fieldErr{
				{"routes[0].tiers.hard[1]", `no upstream named "nope" (defined: a, o, sorry)`},
				{"routes[0].tiers.hard[2]", `upstream "o" appears twice in the chain`},
				{"routes[0].tiers.easy", "at least one upstream is required"},
			}},
		{"tier chains cross shapes like chain", policyParts{
			upstreams: baseUpstreams + `,
    "a2": {"shape": "anthropic", "base_url": "https://api.anthropic.com", "auth": {"from": "client"}}`,
			routes: `{"name": "r", "match": {"host": "api.openai.com"}, "tiers": {"hard": ["o", "a2", "sorry", "a"]}}`},
			[]fieldErr{
				{"routes[0].tiers.hard[1]", `upstream "a2" speaks anthropic but this route's app speaks openai: give it a models mapping (e.g. {"*": "<anthropic model>"}) so it is not sent the app's model name`},
				{"routes[0].tiers.hard[1]", `upstream "a2" uses the app's own key (auth from client) but this route's app speaks openai, not anthropic: the app's key never goes to another vendor; give the upstream its own key (env or file)`},
				{"routes[0].tiers.hard[3]", `upstream "a" comes after the static upstream "sorry", which always answers: it would never be tried`},
			}},
		{"bad undecided is reported once", policyParts{
			routes: `{"name": "r", "match": {"host": "api.openai.com"}, "tiers": {"hard": ["o"]}}`,
			top:    `"classifier": {"undecided": "Not A Tier"}`},
			[]fieldErr{{"classifier.undecided", `a tier name: lowercase letters, digits, '_' and '-'; got "Not A Tier"`}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := compileErrs(t, tc.p)
			checkErrs(t, got, tc.want)
		})
	}
}

// designExample is the example policy detour's design began with, which uses every field of
// issue 4, with one change it needs to compile:
//   - the anthropic-messages route falls over to gemini instead of openai:
//     "openai" forwards the app's own key and has no models mapping, and a
//     route whose app speaks anthropic must not send either to OpenAI.
const designExample = `{
  "version": "example-1",
  "listen": "127.0.0.1:8787",
  "admin_listen": "127.0.0.1:8788",
  "ca": {"cert_file": "detour-ca.pem", "key_file": "detour-ca-key.pem"},

  "upstreams": {
    "openai":    {"shape": "openai",    "base_url": "https://api.openai.com/v1",     "auth": {"from": "client"}},
    "anthropic": {"shape": "anthropic", "base_url": "https://api.anthropic.com",     "auth": {"env": "ANTHROPIC_API_KEY"},
                  "models": {"gpt-4o*": "claude-sonnet-4-5", "*": "claude-haiku-4-5"},
                  "timeouts": {"connect": "3s", "first_byte": "20s", "idle": "30s"},
                  "limits": {"rpm": 4000, "concurrency": 64}},
    "gemini":    {"shape": "gemini",    "base_url": "https://generativelanguage.googleapis.com", "auth": {"env": "GEMINI_API_KEY"},
                  "models": {"*": "gemini-2.5-flash"}},
    "local":     {"shape": "openai",    "base_url": "http://127.0.0.1:11434/v1",     "auth": {"none": true},
                  "models": {"*": "qwen2.5:7b-instruct"}},
    "sorry":     {"shape": "static",    "text": "The assistant is busy. Please try again in a minute."}
  },

  "routes": [
    {"name": "openai-chat", "match": {"host": "api.openai.com", "path": "/v1/chat/completions"},
     "tiers": {"hard": ["openai", "anthropic", "gemini", "local"], "easy": ["local", "openai", "anthropic"]}},
    {"name": "anthropic-messages", "match": {"host": "api.anthropic.com", "path": "/v1/messages"},
     "chain": ["anthropic", "gemini", "sorry"]}
  ],

  "classifier": {"hard_patterns": ["design|refactor|debug|architecture|why|设计|重构|调试|优化|架构|排查"],
                 "easy_patterns": ["summar|translat|format|extract|rewrite|摘要|总结|翻译|格式化|提取|改写"],
                 "long_input_chars": 2000, "code_blocks": 2, "files": 2, "undecided": "hard"},

  "errors": {
    "rules": [{"upstream": "anthropic", "status": 400, "message_contains": "credit balance is too low", "class": "quota_exhausted"}],
    "classes": {"rate_limited": {"retries": 1, "then": "fallback"},
                "quota_exhausted": {"then": "fallback", "cooldown": "10m"},
                "invalid_request": {"then": "stop"}}
  },
  "retry": {"base": "250ms", "max": "4s", "honor_retry_after_up_to": "10s"},
  "breaker": {"consecutive_failures": 5, "failure_rate": 0.5, "window": 20, "open_for": "60s", "half_open_probes": 3},
  "hedge_after": "0s",
  "never_skip_last": true,
  "deadline": "120s",
  "state": {"backend": "memory"},
  "cache": {"entries": 10000, "ttl": "24h", "serve_stale_on_failure": true},
  "log": {"prompts": false}
}`

func designOptions() Options {
	o := testOptions()
	o.Getenv = func(k string) (string, bool) {
		switch k {
		case "ANTHROPIC_API_KEY":
			return "sk-ant-test", true
		case "GEMINI_API_KEY":
			return "gemini-test", true
		}
		return "", false
	}
	return o
}

func TestDesignExamplePolicyCompiles(t *testing.T) {
	c, err := Compile("policy.json", []byte(designExample), designOptions())
	if err != nil {
		t.Fatalf("the design's example policy does not compile:\n%v", err)
	}
	chat := c.Route("api.openai.com", "/v1/chat/completions")
	if chat == nil || names(chat.ChainFor("easy")) != "local openai anthropic" || names(chat.Chain) != "openai anthropic gemini local" {
		t.Fatalf("openai-chat route = %+v", chat)
	}
	msgs := c.Route("api.anthropic.com", "/v1/messages")
	if msgs == nil || !msgs.Chain[2].Static {
		t.Fatalf("anthropic-messages route = %+v; want it to end with the static upstream", msgs)
	}
	if l := c.Upstreams["anthropic"].Limits; l != (Limits{RPM: 4000, Burst: 66, Concurrency: 64}) {
		t.Errorf("anthropic limits = %+v", l)
	}
	if !c.Cache.Enabled || c.Action(ClassRateLimited).Retries != 1 || c.HedgeAfter != 0 || !c.Breaker.Enabled {
		t.Errorf("cache %+v, rate_limited %+v, hedge %v, breaker %+v", c.Cache, c.Action(ClassRateLimited), c.HedgeAfter, c.Breaker)
	}
	if tier, reasons := c.Classifier.Classify(TierInput{Text: "请帮我重构这个模块"}); tier != TierHard || strings.Join(reasons, " ") != `hard_pattern:"重构"` {
		t.Errorf("Classify = %q %q", tier, reasons)
	}
}

func names(ch []*Upstream) string {
	s := make([]string, len(ch))
	for i, u := range ch {
		s[i] = u.Name
	}
	return strings.Join(s, " ")
}

// checkErrs compares errors in order, field and exact message.
func checkErrs(t *testing.T, got, want []fieldErr) {
	t.Helper()
	for i := 0; i < len(got) || i < len(want); i++ {
		switch {
		case i >= len(want):
			t.Errorf("unexpected error %s", got[i])
		case i >= len(got):
			t.Errorf("missing error %s", want[i])
		case got[i] != want[i]:
			t.Errorf("error %d:\n got %s\nwant %s", i, got[i], want[i])
		}
	}
}
