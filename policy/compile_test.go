package policy

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func testOptions() Options {
	return Options{
		BaseDir:      "/etc/detour",
		DefaultCADir: "/var/lib/detour",
		Getenv: func(k string) (string, bool) {
			if k == "BACKUP_KEY" {
				return "sk-backup", true
			}
			return "", false
		},
		Now: func() time.Time { return time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC) },
	}
}

const goodPolicy = `{
  "version": "t1",
  "upstreams": {
    "openai": {"shape": "openai", "base_url": "https://api.openai.com/v1", "auth": {"from": "client"}},
    "backup": {"shape": "openai", "base_url": "https://gw.example.com/v1/", "auth": {"env": "BACKUP_KEY"},
               "models": {"gpt-4o*": "big", "*": "small"}, "timeouts": {"first_byte": "5s"},
               "headers": {"x-team": "core"}}
  },
  "routes": [
    {"name": "chat", "match": {"host": "API.openai.com", "path": "/v1/chat/completions"}, "chain": ["openai", "backup"]}
  ],
  "errors": {"classes": {"rate_limited": {"then": "stop"}, "overloaded": {"cooldown": "30s"}}},
  "never_skip_last": false,
  "deadline": "30s",
  "timeouts": {"connect": "2s"}
}`

func TestCompileGoodPolicy(t *testing.T) {
	c, err := Compile("policy.json", []byte(goodPolicy), testOptions())
	if err != nil {
		t.Fatal(err)
	}
	if c.Version != "t1" || len(c.Hash) != 64 || c.Listen != DefaultListen {
		t.Errorf("version %q hash %q listen %q", c.Version, c.Hash, c.Listen)
	}
	if c.NeverSkipLast || c.Deadline != 30*time.Second {
		t.Errorf("never_skip_last %v deadline %v", c.NeverSkipLast, c.Deadline)
	}
	if c.CACertFile != "/var/lib/detour/ca.pem" || c.CAKeyFile != "/var/lib/detour/ca-key.pem" {
		t.Errorf("CA files %q %q", c.CACertFile, c.CAKeyFile)
	}
	r := c.Route("api.openai.com", "/v1/chat/completions")
	if r == nil || r.Name != "chat" || len(r.Chain) != 2 || r.Chain[1].Name != "backup" {
		t.Fatalf("route = %+v", r)
	}
	if c.Route("api.openai.com", "/v1/embeddings") != nil {
		t.Error("route matched another path")
	}
	if !c.Intercepts("api.openai.com") || c.Intercepts("example.com") {
		t.Error("Intercepts wrong")
	}
	b := c.Upstreams["backup"]
	if b.Key != "sk-backup" || b.Auth != AuthKey || b.BaseURL.String() != "https://gw.example.com/v1" {
		t.Errorf("backup = %+v", b)
	}
	if b.Timeouts != (Timeouts{Connect: 2 * time.Second, FirstByte: 5 * time.Second, Idle: DefaultIdleTimeout}) {
		t.Errorf("timeouts = %+v", b.Timeouts)
	}
	if b.Headers.Get("X-Team") != "core" {
		t.Errorf("headers = %v", b.Headers)
	}
	for req, want := range map[string]string{"gpt-4o": "big", "gpt-4o-mini": "big", "o3": "small"} {
		if got, ok := b.MapModel(req); !ok || got != want {
			t.Errorf("MapModel(%q) = %q, %v; want %q", req, got, ok, want)
		}
	}
	if got, ok := c.Upstreams["openai"].MapModel("gpt-4o"); !ok || got != "gpt-4o" {
		t.Errorf("no models: MapModel = %q, %v; want the model kept", got, ok)
	}
	if a := c.Action(ClassRateLimited); a.Then != Stop {
		t.Errorf("rate_limited action = %+v; want the override", a)
	}
	if a := c.Action(ClassQuotaExhausted); a.Then != Fallback || a.Cooldown != DefaultQuotaCooldown {
		t.Errorf("quota action = %+v; want the default", a)
	}
	if a := c.Action(ClassOverloaded); a.Cooldown != 30*time.Second || a.Then != Fallback {
		t.Errorf("overloaded action = %+v", a)
	}
	if a := c.Action(ClassAuth); a.Then != Stop {
		t.Errorf("auth action = %+v; want stop", a)
	}
	if strings.Contains(strings.Join([]string{b.Key.String()}, ""), "sk-backup") {
		t.Error("Secret.String reveals the key")
	}
}

func TestCompileErrorsNameLineColumnAndField(t *testing.T) {
	for _, tc := range []struct {
		name, policy string
		want         []string // substrings, each must appear in one error, in order
	}{
		{"unknown top-level field", `{
  "upstreams": {"o": {"shape": "openai", "base_url": "https://x/v1", "auth": {"none": true}}},
  "routes": [{"name": "r", "match": {"host": "api.openai.com"}, "chain": ["o"]}],
  "retries": 3
}`, []string{`policy.json:4:3: retries: unknown field "retries"`}},
		{"unknown nested field and bad duration", `{
  "upstreams": {
    "o": {"shape": "openai", "base_url": "https://x/v1", "auth": {"none": true},
          "timeouts": {"connect": "3x", "frist_byte": "1s"}}
  },
  "routes": [{"name": "r", "match": {"host": "api.openai.com"}, "chain": ["o"]}]
}`, []string{`policy.json:4:41: upstreams.o.timeouts.frist_byte: unknown field "frist_byte"`}},
		{"bad duration", `{
  "upstreams": {"o": {"shape": "openai", "base_url": "https://x/v1", "auth": {"none": true}, "timeouts": {"connect": "3x"}}},
  "routes": [{"name": "r", "match": {"host": "api.openai.com"}, "chain": ["o"]}]
}`, []string{`policy.json:2:107: upstreams.o.timeouts.connect: invalid duration "3x"`}},
		{"every validation error", `{
  "upstreams": {
    "o": {"shape": "opanai", "base_url": "http://api.example.com/v1", "auth": {"env": "MISSING_KEY"}},
    "a": {"shape": "anthropic", "base_url": "https://api.anthropic.com", "auth": {"from": "client", "none": true}}
  },
  "routes": [
    {"name": "r", "match": {"host": "api.openai.com"}, "chain": ["o", "nope"]},
    {"name": "r", "match": {"host": "api.anthropic.com:443"}, "chain": []}
  ]
}`, []string{
			`upstreams.a.auth: set exactly one`,
			`upstreams.o.shape: must be one of openai, anthropic, gemini, openai-responses, azure-openai, bedrock; got "opanai"`,
			`upstreams.o.base_url: plain http is allowed only to loopback hosts`,
			`upstreams.o.auth.env: environment variable MISSING_KEY is not set`,
			`routes[0].chain[1]: no upstream named "nope"`,
			`routes[1].name: route name "r" is already used`,
			`routes[1].match.host: a bare host name`,
			`routes[1].chain: at least one upstream is required`,
		}},
		{"a route's shape is one an app speaks", `{
  "upstreams": {"o": {"shape": "openai", "base_url": "https://api.openai.com/v1", "auth": {"from": "client"}}},
  "routes": [{"name": "r", "match": {"host": "llm.internal"}, "shape": "bedrock", "chain": ["o"]}]
}`, []string{`routes[0].shape: must be one of openai, anthropic, gemini, openai-responses (the shape the app speaks); got "bedrock"`}},
		{"cross-shape chain needs a mapping and its own key", `{
  "upstreams": {
    "o": {"shape": "openai", "base_url": "https://api.openai.com/v1", "auth": {"from": "client"}},
    "a": {"shape": "anthropic", "base_url": "https://api.anthropic.com", "auth": {"from": "client"}}
  },
  "routes": [{"name": "r", "match": {"host": "api.openai.com"}, "chain": ["o", "a"]}]
}`, []string{
			`policy.json:6:80: routes[0].chain[1]: upstream "a" speaks anthropic but this route's app speaks openai: give it a models mapping`,
			`routes[0].chain[1]: upstream "a" uses the app's own key`,
		}},
		{"wrong JSON type", `{"upstreams": [], "routes": "x"}`, []string{
			`policy.json:1:15: upstreams: expected an object, got an array`,
			`policy.json:1:29: routes: expected an array, got "x"`,
		}},
		{"syntax error", "{\n  \"upstreams\": {,\n}", []string{`policy.json:2:`, `invalid JSON`}},
		{"duplicate key", `{"deadline": "1s", "deadline": "2s", "upstreams": {}, "routes": []}`, []string{`policy.json:1:20: deadline: duplicate key`}},
		{"bad rule", `{
  "upstreams": {"o": {"shape": "openai", "base_url": "https://api.openai.com/v1", "auth": {"from": "client"}}},
  "routes": [{"name": "r", "match": {"host": "api.openai.com"}, "chain": ["o"]}],
  "errors": {"rules": [{"class": "quota"}], "classes": {"overloaded": {"then": "retry"}}}
}`, []string{
			`errors.rules[0].class: must be one of`,
			`errors.rules[0]: a rule needs at least one of`,
			`errors.classes.overloaded.then: must be "fallback" or "stop"; got "retry"`,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Compile("policy.json", []byte(tc.policy), testOptions())
			var es Errors
			if !errors.As(err, &es) {
				t.Fatalf("err = %v (%T); want Errors", err, err)
			}
			msg := err.Error()
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("errors lack %q; got:\n%s", w, msg)
				}
			}
			for _, e := range es {
				if e.Line == 0 {
					t.Errorf("error without a line: %v", e)
				}
			}
		})
	}
}

func TestDefaultPolicyFileCompiles(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "policy.json"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := Compile("policy.json", data, testOptions())
	if err != nil {
		t.Fatalf("the shipped policy.json does not compile:\n%v", err)
	}
	for _, h := range []string{"api.openai.com", "api.anthropic.com", "generativelanguage.googleapis.com"} {
		if !c.Intercepts(h) {
			t.Errorf("default policy does not intercept %s", h)
		}
	}
	if r := c.Route("generativelanguage.googleapis.com", "/v1beta/models/gemini-2.5-flash:generateContent"); r == nil {
		t.Error("default policy has no route for Gemini generateContent")
	}
}

func TestRulesOverrideBuiltInClass(t *testing.T) {
	c, err := Compile("policy.json", []byte(`{
  "upstreams": {"anthropic": {"shape": "anthropic", "base_url": "https://api.anthropic.com", "auth": {"from": "client"}}},
  "routes": [{"name": "r", "match": {"host": "api.anthropic.com"}, "chain": ["anthropic"]}],
  "errors": {"rules": [{"upstream": "anthropic", "status": 400, "message_contains": "Workspace Limit", "class": "quota_exhausted"}]}
}`), testOptions())
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"type":"error","error":{"type":"invalid_request_error","message":"You have hit your workspace limit"}}`)
	o := Outcome{Shape: "anthropic", Status: 400, Body: body}
	if v := c.ClassifyFor("anthropic", o, time.Now()); v.Class != ClassQuotaExhausted {
		t.Errorf("with rule: class %q; want quota_exhausted", v.Class)
	}
	if v := c.ClassifyFor("other", o, time.Now()); v.Class != ClassInvalidRequest {
		t.Errorf("rule for another upstream applied: class %q", v.Class)
	}
}

func TestGlobMatch(t *testing.T) {
	for _, tc := range []struct {
		p, s string
		want bool
	}{
		{"*", "", true}, {"gpt-4o*", "gpt-4o-mini", true}, {"gpt-4o*", "gpt-4", false},
		{"*mini", "gpt-4o-mini", true}, {"claude-*-4-5", "claude-sonnet-4-5", true},
		{"qwen2.5:7b", "qwen2.5:7b", true}, {"org/*", "org/model", true}, {"a*b*c", "abx", false}, {"a*b*c", "abxc", true},
	} {
		if got := globMatch(tc.p, tc.s); got != tc.want {
			t.Errorf("globMatch(%q, %q) = %v; want %v", tc.p, tc.s, got, tc.want)
		}
	}
}

func FuzzCompile(f *testing.F) {
	f.Add([]byte(goodPolicy))
	f.Add([]byte(`{"upstreams": [], "routes": "x"}`))
	f.Add([]byte("{\n  \"upstreams\": {,\n}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Compile("p.json", data, testOptions())
		if err == nil && c == nil {
			t.Fatal("nil policy without error")
		}
		var es Errors
		if err != nil && !errors.As(err, &es) {
			t.Fatalf("error of type %T: %v", err, err)
		}
	})
}
