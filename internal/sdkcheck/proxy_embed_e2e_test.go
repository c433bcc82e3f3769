package sdkcheck

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"google.golang.org/genai"

	"github.com/detour-proxy/detour/internal/detourtest"
	fv "github.com/detour-proxy/detour/internal/fakevendor"
	"github.com/detour-proxy/detour/rewrite"
)

// embedPolicy routes the app's embeddings endpoint to a primary of the
// app's shape and a backup of another shape that declares its vector size.
// The backup's models mapping sends embeddings models to its embeddings
// model, as a user's would beside a chat mapping.
func embedPolicy(t *testing.T, app rewrite.Shape, primary, backup *detourtest.Vendor, backupDims int) string {
	keyFile := filepath.Join(t.TempDir(), "backup.key")
	os.WriteFile(keyFile, []byte("backup-key"), 0o600)
	path := map[rewrite.Shape]string{rewrite.OpenAI: "/v1/embeddings", rewrite.Gemini: "/v1beta/models/*"}[app]
	model := map[rewrite.Shape]string{rewrite.OpenAI: "text-embedding-3-small", rewrite.Gemini: "gemini-embedding-001"}[backup.Vendor.Shape()]
	dims := ""
	if backupDims > 0 {
		dims = fmt.Sprintf(`, "embedding_dimensions": %d`, backupDims)
	}
	return fmt.Sprintf(`{
  "upstreams": {
    "primary": {"shape": %q, "base_url": %q, "ca_file": %q, "auth": {"from": "client"}},
    "backup":  {"shape": %q, "base_url": %q, "ca_file": %q, "auth": {"file": %q}, "models": {"*embedding*": %q, "*": "chat-model"}%s}
  },
  "routes": [{"name": "embed", "match": {"host": %q, "path": %q}, "chain": ["primary", "backup"]}]
}`, app, primary.BaseURL(), primary.CAFile, backup.Vendor.Shape(), backup.BaseURL(), backup.CAFile, keyFile, model, dims, app.DefaultHost(), path)
}

// TestEmbeddingsFailOverAcrossVendorsWithOfficialSDKs: an openai-go app's
// embeddings, its primary out of quota, are answered by a Gemini backup
// (and a genai app's by an OpenAI one), with the backup's exact vectors,
// the backup's own model and key, and the size the backup declares.
func TestEmbeddingsFailOverAcrossVendorsWithOfficialSDKs(t *testing.T) {
	t.Parallel()
	t.Run("openai-go app, gemini backup", func(t *testing.T) {
		t.Parallel()
		primary := detourtest.NewVendor(t, rewrite.OpenAI, "primary")
		primary.SetDefault(fv.Fault{Kind: fv.Status, Class: fv.ClassInsufficientQuota})
		backup := detourtest.NewVendor(t, rewrite.Gemini, "backup")
		h := detourtest.Start(t, embedPolicy(t, rewrite.OpenAI, primary, backup, 16))

		inputs := []string{"the cat sat", "on the mat"}
		res, err := openaiThrough(h).Embeddings.New(context.Background(), openai.EmbeddingNewParams{
			Model: openai.EmbeddingModelTextEmbedding3Small,
			Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: inputs},
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Data) != 2 || res.Model != "text-embedding-3-small" {
			t.Fatalf("got %d vectors for model %q", len(res.Data), res.Model)
		}
		for i, d := range res.Data {
			want := fv.EmbedVector(inputs[i], 16)
			got := make([]float32, len(d.Embedding))
			for j, f := range d.Embedding {
				got[j] = float32(f)
			}
			if d.Index != int64(i) || !reflect.DeepEqual(got, want) {
				t.Errorf("data[%d] = index %d %v; want the backup's vector %v", i, d.Index, got, want)
			}
		}
		rec := h.WaitRecords(t, 1)[0]
		if rec.AnsweredBy != "backup" || len(rec.Attempts) != 2 || rec.Attempts[0].Class != "quota_exhausted" || !rec.Attempts[1].Translated {
			t.Fatalf("record: answered by %q, attempts %+v", rec.AnsweredBy, rec.Attempts)
		}
		rs := backup.Requests()
		if len(rs) != 1 {
			t.Fatalf("backup got %d requests", len(rs))
		}
		r := rs[0]
		if r.Path != "/v1beta/models/gemini-embedding-001:batchEmbedContents" || r.Header.Get("X-Goog-Api-Key") != "backup-key" {
			t.Errorf("backup got %s with key %q", r.Path, r.Header.Get("X-Goog-Api-Key"))
		}
		if s := fmt.Sprint(r.Header); strings.Contains(s, detourtest.AppOpenAIKey) {
			t.Errorf("backup saw the app's key: %s", s)
		}
		if !strings.Contains(string(r.Body), `"outputDimensionality":16`) || strings.Count(string(r.Body), `"model":"models/gemini-embedding-001"`) != 2 {
			t.Errorf("backup body %s; want the declared size and its own model on both requests", r.Body)
		}
	})

	t.Run("genai app, openai backup", func(t *testing.T) {
		t.Parallel()
		primary := detourtest.NewVendor(t, rewrite.Gemini, "primary")
		primary.SetDefault(fv.Fault{Kind: fv.Status, Status: 503, Class: fv.ClassOverloaded})
		backup := detourtest.NewVendor(t, rewrite.OpenAI, "backup")
		h := detourtest.Start(t, embedPolicy(t, rewrite.Gemini, primary, backup, 1536))
		c, err := genai.NewClient(context.Background(), &genai.ClientConfig{
			APIKey: "gemini-app-key", Backend: genai.BackendGeminiAPI, HTTPClient: h.Client(),
			HTTPOptions: genai.HTTPOptions{BaseURL: "https://generativelanguage.googleapis.com/"},
		})
		if err != nil {
			t.Fatal(err)
		}
		dims := int32(12)
		res, err := c.Models.EmbedContent(context.Background(), "gemini-embedding-001",
			[]*genai.Content{genai.NewContentFromText("alpha", genai.RoleUser), genai.NewContentFromText("beta", genai.RoleUser)},
			&genai.EmbedContentConfig{OutputDimensionality: &dims})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Embeddings) != 2 {
			t.Fatalf("got %d embeddings", len(res.Embeddings))
		}
		for i, text := range []string{"alpha", "beta"} {
			if want := fv.EmbedVector(text, 12); !reflect.DeepEqual(res.Embeddings[i].Values, want) {
				t.Errorf("embedding %d = %v; want %v", i, res.Embeddings[i].Values, want)
			}
		}
		rs := backup.Requests()
		if len(rs) != 1 || rs[0].Model != "text-embedding-3-small" || rs[0].Header.Get("Authorization") != "Bearer backup-key" {
			t.Fatalf("backup requests %+v", rs)
		}
		if want := `"dimensions":12`; !strings.Contains(string(rs[0].Body), want) {
			t.Errorf("backup body %s; want the app's own size (%s), not the declared one", rs[0].Body, want)
		}
		if strings.Contains(fmt.Sprint(rs[0].Header)+rs[0].RawQuery, "gemini-app-key") {
			t.Error("backup saw the app's key")
		}
	})
}

// TestEmbeddingsBase64AndUndeclaredBackup: an OpenAI app asking for base64
// vectors (the Python SDK's default) gets the backup's floats in base64;
// a backup of another shape that declares no size is skipped with the
// reason, and the app hears the primary's failure, not a 400 from a chat
// model asked for embeddings.
func TestEmbeddingsBase64AndUndeclaredBackup(t *testing.T) {
	t.Parallel()
	post := func(t *testing.T, h *detourtest.Harness) (int, []byte) {
		req, _ := http.NewRequest(http.MethodPost, "https://api.openai.com/v1/embeddings", strings.NewReader(`{"model":"text-embedding-3-small","input":"hello","encoding_format":"base64"}`))
		req.Header.Set("Authorization", "Bearer "+detourtest.AppOpenAIKey)
		req.Header.Set("Content-Type", "application/json")
		resp, err := h.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	for _, declared := range []bool{true, false} {
		t.Run(fmt.Sprintf("declared %v", declared), func(t *testing.T) {
			t.Parallel()
			primary := detourtest.NewVendor(t, rewrite.OpenAI, "primary")
			primary.SetDefault(fv.Fault{Kind: fv.Status, Status: 503, Class: fv.ClassOverloaded})
			backup := detourtest.NewVendor(t, rewrite.Gemini, "backup")
			dims := 0
			if declared {
				dims = 4
			}
			h := detourtest.Start(t, embedPolicy(t, rewrite.OpenAI, primary, backup, dims))
			status, body := post(t, h)
			if !declared {
				if status != 503 || backup.Calls() != 0 {
					t.Fatalf("undeclared backup: %d %s, %d backup calls; want the primary's 503 and no call", status, body, backup.Calls())
				}
				a := h.WaitRecords(t, 1)[0].Attempts
				if len(a) != 2 || a[1].Outcome != "skipped" || !strings.Contains(a[1].Reason, "embedding_dimensions") {
					t.Errorf("attempts %+v; want the backup skipped for want of embedding_dimensions", a)
				}
				return
			}
			var got struct {
				Data []struct {
					Embedding string `json:"embedding"`
				} `json:"data"`
			}
			if err := json.Unmarshal(body, &got); status != 200 || err != nil || len(got.Data) != 1 {
				t.Fatalf("%d %s", status, body)
			}
			raw, err := base64.StdEncoding.DecodeString(got.Data[0].Embedding)
			if err != nil || len(raw) != 16 {
				t.Fatalf("embedding %q is not 4 base64 float32s", got.Data[0].Embedding)
			}
			for j, want := range fv.EmbedVector("hello", 4) {
				if f := math.Float32frombits(binary.LittleEndian.Uint32(raw[4*j:])); f != want {
					t.Errorf("value %d = %v; want %v", j, f, want)
				}
			}
		})
	}
}
