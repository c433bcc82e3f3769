package sdkcheck

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"

	"github.com/detour-proxy/detour/internal/detourtest"
	fv "github.com/detour-proxy/detour/internal/fakevendor"
	"github.com/detour-proxy/detour/rewrite"
)

func bedrockUpstream(url, ca string) string {
	return fmt.Sprintf(`{"shape": "bedrock", "base_url": %q, "ca_file": %q, "bedrock": {"region": "us-west-2"}, "models": {"*": %q}}`, url, ca, detourtest.BedrockModel)
}

// TestBedrockBackupWithOfficialSDKs: apps of every shape fall over to
// Amazon Bedrock's Converse and ConverseStream APIs, with a tool round
// trip; the fake checks every SigV4 signature by signing the request again
// (internal/sigv4, which its own tests hold to the AWS SDK's signer).
// Not parallel: the AWS credential chain reads the environment.
func TestBedrockBackupWithOfficialSDKs(t *testing.T) {
	detourtest.AWSSharedCredentials(t, "AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYSECRETKEY")
	for _, app := range rewrite.Shapes {
		for _, stream := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s app, stream %v", app, stream), func(t *testing.T) {
				primary := detourtest.NewVendor(t, app, "primary")
				primary.SetDefault(fv.Fault{Kind: fv.Status, Status: 503, Class: fv.ClassOverloaded})
				br := fv.NewBedrock("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYSECRETKEY", "us-west-2", fv.Options{Name: "backup"})
				url, ca := detourtest.CloudServer(t, br)
				h := detourtest.Start(t, detourtest.CloudPolicy(app, primary, bedrockUpstream(url, ca)))
				c := newAppClient(t, app, h)

				got := c.ask(t, stream, false)
				if got.text != "Hello from backup." {
					t.Fatalf("text = %q; want the Bedrock backup's answer", got.text)
				}
				if got.finish == "" || got.output == 0 {
					t.Errorf("finish %q, output tokens %d; want both", got.finish, got.output)
				}
				got = c.ask(t, stream, true)
				if got.tool != "get_weather" || got.args["city"] != "Paris" {
					t.Fatalf("tool call = %q %v; want get_weather {city: Paris}", got.tool, got.args)
				}
				if final := c.answerTool(t, stream, "sunny, 21°C"); final.text != fv.ToolResultPrefix+"sunny, 21°C" {
					t.Errorf("final answer = %q; want the tool result to have reached Bedrock", final.text)
				}
				seen := br.Seen()
				if len(seen) != 3 {
					t.Fatalf("bedrock saw %d requests; want 3", len(seen))
				}
				for _, s := range seen {
					if !s.Signed || s.Model != detourtest.BedrockModel || s.Stream != stream {
						t.Errorf("bedrock saw model %q stream %v signed %v; want %q, %v, signed", s.Model, s.Stream, s.Signed, detourtest.BedrockModel, stream)
					}
				}
				if rs := h.WaitRecords(t, 3); rs[0].AnsweredBy != "backup" {
					t.Fatalf("answered by %q", rs[0].AnsweredBy)
				}
				if strings.Contains(h.Log(), "SECRETKEY") {
					t.Errorf("the log shows the AWS secret")
				}
			})
		}
	}
}

// TestBedrockFailureClasses: each of Bedrock's exceptions, as an error
// answer or inside the event stream before the first content, gets its
// class and the class its action.
func TestBedrockFailureClasses(t *testing.T) {
	detourtest.AWSSharedCredentials(t, "AKIDEXAMPLE", "secret")
	for _, tc := range []struct {
		fail       fv.BedrockError
		stream     bool
		class      string
		answeredBy string
	}{
		{fv.BedrockThrottling, false, "rate_limited", "backup"},
		{fv.BedrockQuota, false, "quota_exhausted", "backup"},
		{fv.BedrockModelNotReady, false, "overloaded", "backup"},
		{fv.BedrockModelTimeout, false, "timeout", "backup"},
		{fv.BedrockUnavailable, false, "overloaded", "backup"},
		{fv.BedrockContextTooLong, false, "context_too_long", "backup"},
		// A translated request refused as invalid or unauthorised passes
		// the upstream over (docs/architecture.md#what-a-class-does).
		{fv.BedrockValidation, false, "invalid_request", "backup"},
		{fv.BedrockAccessDenied, false, "auth", "backup"},
		{fv.BedrockThrottling, true, "rate_limited", "backup"},
		// An exception in the event stream before any content fails over.
		{fv.BedrockStreamEarly, true, "rate_limited", "backup"},
	} {
		t.Run(fmt.Sprintf("%s stream %v", tc.fail, tc.stream), func(t *testing.T) {
			br := fv.NewBedrock("AKIDEXAMPLE", "secret", "us-west-2", fv.Options{Name: "bedrock"})
			br.Fail(tc.fail)
			url, ca := detourtest.CloudServer(t, br)
			backup := detourtest.NewVendor(t, rewrite.OpenAI, "backup")
			keyFile := filepath.Join(t.TempDir(), "backup.key")
			os.WriteFile(keyFile, []byte("b"), 0o600)
			h := detourtest.Start(t, fmt.Sprintf(`{
  "upstreams": {
    "bedrock": %s,
    "backup":  {"shape": "openai", "base_url": %q, "ca_file": %q, "auth": {"file": %q}}
  },
  "errors": {"classes": {"rate_limited": {"retries": 0, "then": "fallback"}}},
  "routes": [{"name": "r", "match": {"host": "api.openai.com", "path": "/v1/chat/completions"}, "chain": ["bedrock", "backup"]}]
}`, bedrockUpstream(url, ca), backup.BaseURL(), backup.CAFile, keyFile))
			body := `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`
			if tc.stream {
				body = `{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"hi"}]}`
			}
			req, _ := http.NewRequest("POST", "https://api.openai.com/v1/chat/completions", strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer app-key")
			resp, err := h.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			rec := h.WaitRecords(t, 1)[0]
			if got := rec.Attempts[0].Class; got != tc.class {
				t.Errorf("class = %q (%s); want %q", got, rec.Attempts[0].Reason, tc.class)
			}
			if rec.AnsweredBy != tc.answeredBy {
				t.Errorf("answered by %q; want %q", rec.AnsweredBy, tc.answeredBy)
			}
		})
	}
}

// TestBedrockMidStreamException: an exception inside the event stream after
// the first text delta reaches the app as its own shape's in-stream error,
// and the attempt is marked cut, as for any vendor's mid-stream error.
func TestBedrockMidStreamException(t *testing.T) {
	detourtest.AWSSharedCredentials(t, "AKIDEXAMPLE", "secret")
	for _, fail := range []fv.BedrockError{fv.BedrockStreamThrottled, fv.BedrockStreamModel} {
		t.Run(string(fail), func(t *testing.T) {
			br := fv.NewBedrock("AKIDEXAMPLE", "secret", "us-west-2", fv.Options{Name: "bedrock"})
			br.Fail(fail)
			url, ca := detourtest.CloudServer(t, br)
			h := detourtest.Start(t, fmt.Sprintf(`{
  "upstreams": {"bedrock": %s},
  "routes": [{"name": "r", "match": {"host": "api.openai.com", "path": "/v1/chat/completions"}, "chain": ["bedrock"]}]
}`, bedrockUpstream(url, ca)))
			c := openaiThrough(h)
			s := c.Chat.Completions.NewStreaming(detourtest.TestContext(t), openai.ChatCompletionNewParams{
				Model: "gpt-4o", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
			})
			text := ""
			for s.Next() {
				if ch := s.Current(); len(ch.Choices) > 0 {
					text += ch.Choices[0].Delta.Content
				}
			}
			if s.Err() == nil {
				t.Fatalf("stream ended without an error after %q", text)
			}
			if !strings.HasPrefix("Hello from bedrock.", text) || text == "" {
				t.Errorf("text before the error = %q; want the first delta", text)
			}
			rec := h.WaitRecords(t, 1)[0]
			if rec.AnsweredBy != "bedrock" || rec.Attempts[0].Outcome != "cut" {
				t.Errorf("answered by %q, outcome %q; want bedrock, cut", rec.AnsweredBy, rec.Attempts[0].Outcome)
			}
		})
	}
}
