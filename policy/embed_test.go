package policy

import (
	"reflect"
	"strings"
	"testing"
)

const embedUpstreams = `
    "o": {"shape": "openai", "base_url": "https://api.openai.com/v1", "auth": {"from": "client"}, "embedding_dimensions": 1536},
    "g": {"shape": "gemini", "base_url": "https://generativelanguage.googleapis.com", "auth": {"env": "BACKUP_KEY"}, "models": {"*": "gemini-embedding-001"}, "embedding_dimensions": 768},
    "g2": {"shape": "gemini", "base_url": "https://generativelanguage.googleapis.com", "auth": {"env": "BACKUP_KEY"}, "models": {"*": "gemini-embedding-001"}, "embedding_dimensions": 1536},
    "plain": {"shape": "gemini", "base_url": "https://generativelanguage.googleapis.com", "auth": {"env": "BACKUP_KEY"}, "models": {"*": "gemini-embedding-001"}},
    "bad": {"shape": "gemini", "base_url": "https://generativelanguage.googleapis.com", "auth": {"env": "BACKUP_KEY"}, "models": {"*": "m"}, "embedding_dimensions": -3}`

func TestEmbeddingDimensionsMustAgreeInAChain(t *testing.T) {
	got := compileErrs(t, policyParts{upstreams: embedUpstreams, routes: `
    {"name": "e", "match": {"host": "api.openai.com", "path": "/v1/embeddings"}, "chain": ["o", "plain", "g"]},
    {"name": "t", "match": {"host": "api.openai.com", "path": "/v1/other"}, "tiers": {"undecided": ["o"], "hard": ["g2", "g"]}}`})
	var fields []string
	for _, e := range got {
		fields = append(fields, e.field)
	}
	for _, want := range []fieldErr{
		{"upstreams.bad.embedding_dimensions", "must be positive; got -3"},
		{"routes[0].chain[2]", `upstream "g" declares embedding_dimensions 768 but "o", earlier in the chain, declares 1536: a failover would hand the app vectors of another size; make them equal (both vendors' current models take a size: OpenAI dimensions, Gemini outputDimensionality)`},
	} {
		found := false
		for _, e := range got {
			found = found || e == want
		}
		if !found {
			t.Errorf("missing error %s\ngot %v", want, got)
		}
	}
	if !strings.Contains(strings.Join(fields, " "), "routes[1].tiers.hard[1]") {
		t.Errorf("a tier's chain is not checked: %v", fields)
	}
}

func TestEmbeddingWarnings(t *testing.T) {
	c := compileParts(t, policyParts{upstreams: strings.ReplaceAll(embedUpstreams, `"embedding_dimensions": -3`, `"embedding_dimensions": 5`), routes: `
    {"name": "e", "match": {"host": "api.openai.com", "path": "/v1/embeddings"}, "chain": ["o", "g2", "plain"]},
    {"name": "chat", "match": {"host": "api.openai.com", "path": "/v1/chat/completions"}, "chain": ["o", "plain"]},
    {"name": "gem", "match": {"host": "generativelanguage.googleapis.com", "path": "/v1beta/models/*"}, "chain": ["plain"]}`})
	want := []string{`route "e": upstream "plain" speaks gemini, not openai, and declares no embedding_dimensions, so it is never sent this route's embeddings requests; set embedding_dimensions to its model's vector size`}
	if got := c.EmbeddingWarnings(); !reflect.DeepEqual(got, want) {
		t.Errorf("warnings = %q\nwant %q", got, want)
	}
	if c.Upstreams["g2"].EmbeddingDimensions != 1536 || c.Upstreams["plain"].EmbeddingDimensions != 0 {
		t.Errorf("compiled sizes %d, %d", c.Upstreams["g2"].EmbeddingDimensions, c.Upstreams["plain"].EmbeddingDimensions)
	}
}
