package policy

import (
	"errors"
	"strings"
	"testing"

	"github.com/detour-proxy/detour/rewrite"
)

func TestCompileResponsesUpstreams(t *testing.T) {
	t.Parallel()
	// An openai-responses upstream under an openai route speaks to the
	// same vendor: no models mapping, and the app's own key may go there.
	c, err := Compile("policy.json", []byte(`{
  "upstreams": {
    "o": {"shape": "openai", "base_url": "https://vllm.example/v1", "auth": {"none": true}, "chat_only": true},
    "r": {"shape": "openai-responses", "base_url": "https://api.openai.com/v1", "auth": {"from": "client"}}
  },
  "routes": [{"name": "r", "match": {"host": "api.openai.com"}, "chain": ["o", "r"]}]
}`), testOptions())
	if err != nil {
		t.Fatal(err)
	}
	if u := c.Upstreams["o"]; !u.ChatOnly {
		t.Error("chat_only not carried over")
	}
	if u := c.Upstreams["r"]; u.Shape != rewrite.OpenAIResponses {
		t.Errorf("shape %q", u.Shape)
	}

	_, err = Compile("policy.json", []byte(`{
  "upstreams": {"a": {"shape": "anthropic", "base_url": "https://api.anthropic.com", "auth": {"none": true}, "chat_only": true}},
  "routes": [{"name": "r", "match": {"host": "api.anthropic.com"}, "chain": ["a"]}]
}`), testOptions())
	var es Errors
	if !errors.As(err, &es) || !strings.Contains(err.Error(), `upstreams.a.chat_only: only an openai upstream can be chat_only`) {
		t.Errorf("err = %v; want chat_only refused for an anthropic upstream", err)
	}
}
