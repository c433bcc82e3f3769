package policy

import (
	"errors"
	"strings"
	"testing"
)

// TestAllowPlainHTTP: without allow_plain_http an http:// base_url must be
// loopback; with it a host of your own network is accepted, and vendor hosts,
// hosts the routes intercept, static upstreams and https URLs are refused,
// each with an error naming file, line, column and field.
func TestAllowPlainHTTP(t *testing.T) {
	t.Parallel()
	policyWith := func(upstream string) string {
		return `{
  "upstreams": {
    "v": ` + upstream + `
  },
  "routes": [{"name": "r", "match": {"host": "api.openai.com"}, "chain": ["v"]},
             {"name": "gw", "match": {"host": "llm.corp.example", "path": "/v1/chat/completions"}, "shape": "openai", "chain": ["v"]}]
}`
	}
	for _, tc := range []struct {
		name     string
		upstream string
		want     string // "" = compiles
	}{
		{"in-cluster host allowed", `{"shape": "openai", "base_url": "http://vllm.models.svc:8000/v1", "auth": {"none": true}, "allow_plain_http": true}`, ""},
		{"an IP of the cluster network allowed", `{"shape": "openai", "base_url": "http://10.0.3.7:11434/v1", "auth": {"none": true}, "allow_plain_http": true}`, ""},
		{"loopback needs nothing", `{"shape": "openai", "base_url": "http://127.0.0.1:8000/v1", "auth": {"none": true}}`, ""},
		{"in-cluster host without it", `{"shape": "openai", "base_url": "http://vllm.models.svc:8000/v1", "auth": {"none": true}}`,
			`policy.json:3:30: upstreams.v.base_url: plain http is allowed only to loopback hosts; use https for "vllm.models.svc:8000" (credentials would travel in clear), or allow_plain_http for a server in your own network`},
		{"openai", `{"shape": "openai", "base_url": "http://api.openai.com/v1", "auth": {"none": true}, "allow_plain_http": true}`,
			`policy.json:3:30: upstreams.v.base_url: plain http to "api.openai.com" is refused even with allow_plain_http: it is a vendor's API host`},
		{"anthropic, upper case, trailing dot", `{"shape": "anthropic", "base_url": "http://API.Anthropic.com.", "models": {"*": "m"}, "auth": {"none": true}, "allow_plain_http": true}`,
			`upstreams.v.base_url: plain http to "API.Anthropic.com." is refused even with allow_plain_http`},
		{"gemini", `{"shape": "gemini", "base_url": "http://generativelanguage.googleapis.com", "models": {"*": "m"}, "auth": {"none": true}, "allow_plain_http": true}`,
			`upstreams.v.base_url: plain http to "generativelanguage.googleapis.com" is refused`},
		{"azure openai", `{"shape": "openai", "base_url": "http://contoso.openai.azure.com/openai/v1", "auth": {"none": true}, "allow_plain_http": true}`,
			`upstreams.v.base_url: plain http to "contoso.openai.azure.com" is refused`},
		{"bedrock", `{"shape": "openai", "base_url": "http://bedrock-runtime.eu-west-1.amazonaws.com", "auth": {"none": true}, "allow_plain_http": true}`,
			`upstreams.v.base_url: plain http to "bedrock-runtime.eu-west-1.amazonaws.com" is refused`},
		{"vertex", `{"shape": "gemini", "base_url": "http://europe-west4-aiplatform.googleapis.com:80", "models": {"*": "m"}, "auth": {"none": true}, "allow_plain_http": true}`,
			`upstreams.v.base_url: plain http to "europe-west4-aiplatform.googleapis.com:80" is refused`},
		{"a host a route intercepts", `{"shape": "openai", "base_url": "http://llm.corp.example/v1", "auth": {"none": true}, "allow_plain_http": true}`,
			`upstreams.v.base_url: plain http to "llm.corp.example" is refused even with allow_plain_http: a route intercepts that host`},
		{"https", `{"shape": "openai", "base_url": "https://vllm.models.svc:8443/v1", "auth": {"none": true}, "allow_plain_http": true}`,
			`policy.json:3:101: upstreams.v.allow_plain_http: only for an http:// base_url; this one is https://`},
		{"static", `{"shape": "static", "text": "busy", "allow_plain_http": true}`,
			`upstreams.v.allow_plain_http: a static upstream sends no request`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, err := Compile("policy.json", []byte(policyWith(tc.upstream)), Options{BaseDir: t.TempDir(), DefaultCADir: t.TempDir()})
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var es Errors
			if !errors.As(err, &es) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v; want %q", err, tc.want)
			}
			if len(es) != 1 || c != nil {
				t.Errorf("%d errors; want only the one:\n%v", len(es), err)
			}
		})
	}
}

func TestPlainHTTPWarnings(t *testing.T) {
	t.Parallel()
	c, err := Compile("policy.json", []byte(`{
  "upstreams": {
    "vllm":  {"shape": "openai", "base_url": "http://vllm.models.svc:8000/v1", "auth": {"none": true}, "allow_plain_http": true},
    "local": {"shape": "openai", "base_url": "http://127.0.0.1:11434/v1", "auth": {"none": true}},
    "o":     {"shape": "openai", "base_url": "https://api.openai.com/v1", "auth": {"from": "client"}}
  },
  "routes": [{"name": "r", "match": {"host": "api.openai.com"}, "chain": ["o", "local", "vllm"]}]
}`), Options{BaseDir: t.TempDir(), DefaultCADir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	w := c.PlainHTTPWarnings()
	if len(w) != 1 || !strings.HasPrefix(w[0], `upstream "vllm" is reached over plain http at vllm.models.svc:8000 (allow_plain_http)`) {
		t.Errorf("warnings %q; want one, for vllm only", w)
	}
}
