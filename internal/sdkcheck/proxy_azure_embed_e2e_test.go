package sdkcheck

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"

	"github.com/detour-proxy/detour/internal/detourtest"
	fv "github.com/detour-proxy/detour/internal/fakevendor"
	"github.com/detour-proxy/detour/rewrite"
)

// TestAzureOpenAIEmbeddingsBackup: an openai-go app's embeddings, its
// primary out of quota, are answered by an Azure OpenAI deployment of the
// embeddings model: Azure's embeddings path for the mapped deployment, its
// api-version and api-key, the app's own key nowhere, the exact vectors.
func TestAzureOpenAIEmbeddingsBackup(t *testing.T) {
	t.Parallel()
	primary := detourtest.NewVendor(t, rewrite.OpenAI, "primary")
	primary.SetDefault(fv.Fault{Kind: fv.Status, Class: fv.ClassInsufficientQuota})
	az := fv.NewAzure("azure-SECRET-key", "", []string{"prod-embed", "prod-4o"}, fv.Options{Name: "backup"})
	url, ca := detourtest.CloudServer(t, az)
	keyFile := filepath.Join(t.TempDir(), "azure.key")
	if err := os.WriteFile(keyFile, []byte("azure-SECRET-key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	h := detourtest.Start(t, fmt.Sprintf(`{
  "upstreams": {
    "primary": {"shape": "openai", "base_url": %q, "ca_file": %q, "auth": {"from": "client"}},
    "backup":  {"shape": "azure-openai", "base_url": %q, "ca_file": %q, "auth": {"file": %q},
                "azure": {"api_version": "2024-10-21", "deployments": {"text-embedding-3-small": "prod-embed", "gpt-4o": "prod-4o"}}}
  },
  "routes": [{"name": "embed", "match": {"host": "api.openai.com", "path": "/v1/embeddings"}, "chain": ["primary", "backup"]}]
}`, primary.BaseURL(), primary.CAFile, url, ca, keyFile))

	inputs := []string{"the cat sat", "on the mat"}
	res, err := openaiThrough(h).Embeddings.New(context.Background(), openai.EmbeddingNewParams{
		Model:      openai.EmbeddingModelTextEmbedding3Small,
		Input:      openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: inputs},
		Dimensions: openai.Int(8),
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Data) != 2 {
		t.Fatalf("got %d vectors; want 2", len(res.Data))
	}
	for i, d := range res.Data {
		got := make([]float32, len(d.Embedding))
		for j, f := range d.Embedding {
			got[j] = float32(f)
		}
		if want := fv.EmbedVector(inputs[i], 8); d.Index != int64(i) || !reflect.DeepEqual(got, want) {
			t.Errorf("data[%d] = index %d %v; want Azure's vector %v", i, d.Index, got, want)
		}
	}
	seen := az.Seen()
	if len(seen) != 1 || seen[0] != (fv.AzureRequest{Deployment: "prod-embed", APIVersion: "2024-10-21", Auth: "api-key"}) {
		t.Fatalf("azure saw %+v; want one request to deployment prod-embed, api-version 2024-10-21, with api-key", seen)
	}
	r := az.Requests()[0]
	// The fake passes the operation after the deployment on to its inner
	// OpenAI vendor: /v1/embeddings means Azure was asked for embeddings.
	if r.Path != "/v1/embeddings" {
		t.Errorf("azure's operation became %q; want embeddings", r.Path)
	}
	if s := fmt.Sprint(r.Header); strings.Contains(s, detourtest.AppOpenAIKey) || r.Header.Get("Authorization") != "" {
		t.Errorf("azure got the app's key or a bearer beside api-key: %s", s)
	}
	rec := h.WaitRecords(t, 1)[0]
	if rec.AnsweredBy != "backup" || len(rec.Attempts) != 2 || rec.Attempts[0].Class != "quota_exhausted" {
		t.Fatalf("record: answered by %q, attempts %+v", rec.AnsweredBy, rec.Attempts)
	}
	if strings.Contains(h.Log(), "SECRET") {
		t.Errorf("the log shows the Azure key:\n%s", h.Log())
	}
}
