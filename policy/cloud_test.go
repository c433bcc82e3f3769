package policy

import (
	"strings"
	"testing"
)

// cloudPolicy is a policy whose only upstream is up, on an OpenAI route.
func cloudPolicy(up string) policyParts {
	return policyParts{
		upstreams: `"c": ` + up,
		routes:    `{"name": "r", "match": {"host": "api.openai.com"}, "chain": ["c"]}`,
	}
}

func TestCloudUpstreamsCompile(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, up string
		check    func(t *testing.T, u *Upstream)
	}{
		{"azure key", `{"shape": "azure-openai", "base_url": "https://res.openai.azure.com", "auth": {"env": "BACKUP_KEY"},
			"azure": {"api_version": "2024-10-21", "deployments": {"gpt-4o": "prod"}}}`, func(t *testing.T, u *Upstream) {
			if u.Shape != "openai" || u.Cloud.Kind != CloudAzure || u.Cloud.Deployment("gpt-4o") != "prod" || u.Cloud.Deployment("o3") != "o3" || u.Auth != AuthKey {
				t.Errorf("got %+v %+v", u, u.Cloud)
			}
		}},
		{"bedrock default endpoint", `{"shape": "bedrock", "bedrock": {"region": "eu-west-1"}, "models": {"*": "anthropic.claude-3-haiku-20240307-v1:0"}}`, func(t *testing.T, u *Upstream) {
			if u.Shape != "bedrock" || u.BaseURL.String() != "https://bedrock-runtime.eu-west-1.amazonaws.com" || u.Cloud.Region != "eu-west-1" {
				t.Errorf("got shape %q base %v cloud %+v", u.Shape, u.BaseURL, u.Cloud)
			}
		}},
		{"vertex anthropic", `{"shape": "anthropic", "vertex": {"project": "p-1", "region": "us-east5"}, "models": {"*": "claude-sonnet-4-5@20250929"}}`, func(t *testing.T, u *Upstream) {
			if u.BaseURL.String() != "https://us-east5-aiplatform.googleapis.com" || u.Cloud.Project != "p-1" {
				t.Errorf("got base %v cloud %+v", u.BaseURL, u.Cloud)
			}
		}},
		{"vertex global", `{"shape": "gemini", "vertex": {"project": "p-1", "region": "global"}, "models": {"*": "gemini-2.5-flash"}}`, func(t *testing.T, u *Upstream) {
			if u.BaseURL.String() != "https://aiplatform.googleapis.com" {
				t.Errorf("got base %v", u.BaseURL)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Compile("policy.json", []byte(cloudPolicy(tc.up).String()), testOptions())
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, c.Upstreams["c"])
		})
	}
}

func TestCloudUpstreamValidation(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		up, field, msg string
	}{
		{`{"shape": "azure-openai", "base_url": "https://r.openai.azure.com", "auth": {"env": "BACKUP_KEY"}}`, "upstreams.c.azure", "required for shape azure-openai"},
		{`{"shape": "azure-openai", "base_url": "https://r.openai.azure.com", "auth": {"env": "BACKUP_KEY"}, "azure": {"api_version": "latest"}}`, "upstreams.c.azure.api_version", `got "latest"`},
		{`{"shape": "azure-openai", "base_url": "https://r.openai.azure.com", "auth": {"env": "BACKUP_KEY"}, "azure": {"api_version": "2024-13-01"}}`, "upstreams.c.azure.api_version", "api-version"},
		{`{"shape": "azure-openai", "base_url": "https://r.openai.azure.com", "auth": {"env": "BACKUP_KEY"}, "azure": {"api_version": "2024-10-21", "deployments": {"gpt-4o": "a/b"}}}`, "upstreams.c.azure.deployments.gpt-4o", "deployment name"},
		{`{"shape": "azure-openai", "base_url": "https://r.openai.azure.com", "auth": {"env": "BACKUP_KEY"}, "azure": {"api_version": "2024-10-21", "token_file": "/nonexistent/token"}}`, "upstreams.c.auth", "leave auth out"},
		{`{"shape": "azure-openai", "base_url": "https://r.openai.azure.com", "azure": {"api_version": "2024-10-21", "token_file": "/nonexistent/token"}}`, "upstreams.c.azure.token_file", "cannot read token file"},
		{`{"shape": "azure-openai", "azure": {"api_version": "2024-10-21"}, "auth": {"env": "BACKUP_KEY"}}`, "upstreams.c.base_url", "required"},
		{`{"shape": "bedrock", "models": {"*": "m"}}`, "upstreams.c.bedrock", "required for shape bedrock"},
		{`{"shape": "bedrock", "bedrock": {"region": "us-east-1/x"}, "models": {"*": "m"}}`, "upstreams.c.bedrock.region", "a region"},
		{`{"shape": "bedrock", "bedrock": {"region": "us-east-1"}, "auth": {"env": "BACKUP_KEY"}, "models": {"*": "m"}}`, "upstreams.c.auth", "standard chain"},
		{`{"shape": "bedrock", "bedrock": {"region": "us-east-1"}}`, "routes[0].chain[0]", "models mapping"},
		{`{"shape": "openai", "base_url": "https://x/v1", "auth": {"env": "BACKUP_KEY"}, "bedrock": {"region": "us-east-1"}}`, "upstreams.c.bedrock", `not for an upstream of shape "openai"`},
		{`{"shape": "openai", "base_url": "https://x/v1", "auth": {"env": "BACKUP_KEY"}, "vertex": {"project": "p", "region": "r"}}`, "upstreams.c.vertex", `not for an upstream of shape "openai"`},
		{`{"shape": "gemini", "vertex": {"region": "us-central1"}, "models": {"*": "g"}}`, "upstreams.c.vertex.project", "project ID"},
		{`{"shape": "gemini", "vertex": {"project": "p"}, "models": {"*": "g"}}`, "upstreams.c.vertex.region", "a region"},
		{`{"shape": "gemini", "vertex": {"project": "p", "region": "us-central1", "credentials_file": "/nonexistent/sa.json"}, "models": {"*": "g"}}`, "upstreams.c.vertex.credentials_file", "cannot read"},
		{`{"shape": "anthropic", "vertex": {"project": "p", "region": "us-east5"}, "auth": {"env": "BACKUP_KEY"}, "models": {"*": "c"}}`, "upstreams.c.auth", "Application Default Credentials"},
	} {
		t.Run(tc.field+" "+tc.msg, func(t *testing.T) {
			errs := compileErrs(t, cloudPolicy(tc.up))
			for _, e := range errs {
				if e.field == tc.field && strings.Contains(e.msg, tc.msg) {
					return
				}
			}
			t.Errorf("errors %v; want %s: …%s…", errs, tc.field, tc.msg)
		})
	}
}
