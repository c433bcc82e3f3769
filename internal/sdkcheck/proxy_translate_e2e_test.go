package sdkcheck

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go/v3"
	"google.golang.org/genai"

	"github.com/detour-proxy/detour/internal/detourtest"
	fv "github.com/detour-proxy/detour/internal/fakevendor"
	"github.com/detour-proxy/detour/rewrite"
)

// appResult is what an app's SDK made of an answer.
type appResult struct {
	text   string
	finish string
	tool   string
	args   map[string]any
	output int64
}

// appClient drives one vendor's official SDK through detour.
type appClient interface {
	// ask sends a question, with the get_weather tool declared when tools.
	ask(t *testing.T, stream, tools bool) appResult
	// answerTool sends the tool's result back and returns the final answer.
	answerTool(t *testing.T, stream bool, result string) appResult
}

var upstreamModel = map[rewrite.Shape]string{
	rewrite.OpenAI: "gpt-4o-mini", rewrite.Anthropic: "claude-haiku-4-5", rewrite.Gemini: "gemini-2.5-flash",
}

// crossPolicy routes the app's vendor host to a failing primary of the
// app's shape and then a backup of another shape.
func crossPolicy(t *testing.T, app rewrite.Shape, primary, backup *detourtest.Vendor) string {
	keyFile := filepath.Join(t.TempDir(), "backup.key")
	os.WriteFile(keyFile, []byte("backup-key"), 0o600)
	path := map[rewrite.Shape]string{rewrite.OpenAI: "/v1/chat/completions", rewrite.Anthropic: "/v1/messages", rewrite.Gemini: "/v1beta/models/*"}[app]
	return fmt.Sprintf(`{
  "upstreams": {
    "primary": {"shape": %q, "base_url": %q, "ca_file": %q, "auth": {"from": "client"}},
    "backup":  {"shape": %q, "base_url": %q, "ca_file": %q, "auth": {"file": %q}, "models": {"*": %q}}
  },
  "routes": [{"name": "r", "match": {"host": %q, "path": %q}, "chain": ["primary", "backup"]}]
}`, app, primary.BaseURL(), primary.CAFile, backup.Vendor.Shape(), backup.BaseURL(), backup.CAFile, keyFile,
		upstreamModel[backup.Vendor.Shape()], app.DefaultHost(), path)
}

func TestCrossVendorFailoverWithOfficialSDKs(t *testing.T) {
	t.Parallel()
	for _, app := range rewrite.Shapes {
		for _, up := range rewrite.Shapes {
			if app == up {
				continue
			}
			for _, stream := range []bool{false, true} {
				name := fmt.Sprintf("%s app, %s backup, stream %v", app, up, stream)
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					primary := detourtest.NewVendor(t, app, "primary")
					primary.SetDefault(fv.Fault{Kind: fv.Status, Status: 503, Class: fv.ClassOverloaded})
					backup := detourtest.NewVendor(t, up, "backup")
					h := detourtest.Start(t, crossPolicy(t, app, primary, backup))
					c := newAppClient(t, app, h)

					got := c.ask(t, stream, false)
					if got.text != "Hello from backup." {
						t.Fatalf("text = %q; want the %s backup's answer", got.text, up)
					}
					if got.finish == "" || got.output == 0 {
						t.Errorf("finish %q, output tokens %d; want both", got.finish, got.output)
					}
					if rs := h.WaitRecords(t, 1); rs[0].AnsweredBy != "backup" {
						t.Fatalf("answered by %q", rs[0].AnsweredBy)
					}

					// A tool round trip: call → result → final answer.
					got = c.ask(t, stream, true)
					if got.tool != "get_weather" || got.args["city"] != "Paris" {
						t.Fatalf("tool call = %q %v; want get_weather {city: Paris}", got.tool, got.args)
					}
					final := c.answerTool(t, stream, "sunny, 21°C")
					if final.text != fv.ToolResultPrefix+"sunny, 21°C" {
						t.Errorf("final answer = %q; want the tool result to have reached the backup", final.text)
					}
					// The backup never saw the app's key, and got its own model.
					for _, r := range backup.Requests() {
						if s := fmt.Sprint(r.Header) + r.RawQuery; strings.Contains(s, "SECRET") || strings.Contains(s, "gemini-app-key") {
							t.Errorf("backup saw the app's key: %v", r.Header)
						}
						if r.Model != upstreamModel[up] {
							t.Errorf("backup got model %q; want %q", r.Model, upstreamModel[up])
						}
					}
				})
			}
		}
	}
}

func newAppClient(t *testing.T, app rewrite.Shape, h *detourtest.Harness) appClient {
	switch app {
	case rewrite.OpenAI:
		return &openaiApp{c: openaiThrough(h)}
	case rewrite.Anthropic:
		return &anthropicApp{c: anthropicThrough(h)}
	default:
		c, err := genai.NewClient(context.Background(), &genai.ClientConfig{
			APIKey: "gemini-app-key", Backend: genai.BackendGeminiAPI, HTTPClient: h.Client(),
			HTTPOptions: genai.HTTPOptions{BaseURL: "https://generativelanguage.googleapis.com/"},
		})
		if err != nil {
			t.Fatal(err)
		}
		return &geminiApp{c: c}
	}
}

var weatherSchema = map[string]any{
	"type":       "object",
	"properties": map[string]any{"city": map[string]any{"type": "string"}},
	"required":   []string{"city"},
}

// --- OpenAI ---

type openaiApp struct {
	c    *openai.Client
	msgs []openai.ChatCompletionMessageParamUnion
	call string
}

func (a *openaiApp) params(tools bool) openai.ChatCompletionNewParams {
	p := openai.ChatCompletionNewParams{Model: "gpt-4o", Messages: a.msgs}
	if tools {
		p.Tools = []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{
			Name: "get_weather", Parameters: openai.FunctionParameters(weatherSchema),
		})}
	}
	p.StreamOptions = openai.ChatCompletionStreamOptionsParam{}
	return p
}

func (a *openaiApp) run(t *testing.T, stream, tools bool) appResult {
	p := a.params(tools)
	var msg openai.ChatCompletionMessage
	var res appResult
	if stream {
		p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
		s := a.c.Chat.Completions.NewStreaming(detourtest.TestContext(t), p)
		acc := openai.ChatCompletionAccumulator{}
		for s.Next() {
			acc.AddChunk(s.Current())
		}
		if err := s.Err(); err != nil {
			t.Fatalf("openai stream: %v", err)
		}
		msg, res.finish, res.output = acc.Choices[0].Message, acc.Choices[0].FinishReason, acc.Usage.CompletionTokens
	} else {
		r, err := a.c.Chat.Completions.New(detourtest.TestContext(t), p)
		if err != nil {
			t.Fatalf("openai: %v", err)
		}
		msg, res.finish, res.output = r.Choices[0].Message, r.Choices[0].FinishReason, r.Usage.CompletionTokens
	}
	res.text = msg.Content
	if len(msg.ToolCalls) > 0 {
		tc := msg.ToolCalls[0]
		res.tool = tc.Function.Name
		if err := json.Unmarshal([]byte(tc.Function.Arguments), &res.args); err != nil {
			t.Fatalf("tool arguments %q: %v", tc.Function.Arguments, err)
		}
		if res.finish != "tool_calls" {
			t.Errorf("finish_reason = %q; want tool_calls", res.finish)
		}
		a.call = tc.ID
		a.msgs = append(a.msgs, msg.ToParam())
	}
	return res
}

func (a *openaiApp) ask(t *testing.T, stream, tools bool) appResult {
	a.msgs = []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What is the weather in Paris?")}
	return a.run(t, stream, tools)
}

func (a *openaiApp) answerTool(t *testing.T, stream bool, result string) appResult {
	a.msgs = append(a.msgs, openai.ToolMessage(result, a.call))
	return a.run(t, stream, true)
}

// --- Anthropic ---

type anthropicApp struct {
	c    *anthropic.Client
	msgs []anthropic.MessageParam
	call string
}

func (a *anthropicApp) run(t *testing.T, stream, tools bool) appResult {
	p := anthropic.MessageNewParams{Model: "claude-sonnet-4-5", MaxTokens: 256, Messages: a.msgs}
	if tools {
		p.Tools = []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{
			Name:        "get_weather",
			InputSchema: anthropic.ToolInputSchemaParam{Properties: weatherSchema["properties"], Required: []string{"city"}},
		}}}
	}
	var msg anthropic.Message
	if stream {
		s := a.c.Messages.NewStreaming(detourtest.TestContext(t), p)
		for s.Next() {
			if err := msg.Accumulate(s.Current()); err != nil {
				t.Fatalf("accumulate: %v", err)
			}
		}
		if err := s.Err(); err != nil {
			t.Fatalf("anthropic stream: %v", err)
		}
	} else {
		r, err := a.c.Messages.New(detourtest.TestContext(t), p)
		if err != nil {
			t.Fatalf("anthropic: %v", err)
		}
		msg = *r
	}
	res := appResult{finish: string(msg.StopReason), output: msg.Usage.OutputTokens}
	for _, b := range msg.Content {
		switch b.Type {
		case "text":
			res.text += b.Text
		case "tool_use":
			res.tool = b.Name
			if err := json.Unmarshal(b.Input, &res.args); err != nil {
				t.Fatalf("tool input %s: %v", b.Input, err)
			}
			a.call = b.ID
		}
	}
	if res.tool != "" {
		if res.finish != "tool_use" {
			t.Errorf("stop_reason = %q; want tool_use", res.finish)
		}
		a.msgs = append(a.msgs, msg.ToParam())
	}
	return res
}

func (a *anthropicApp) ask(t *testing.T, stream, tools bool) appResult {
	a.msgs = []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("What is the weather in Paris?"))}
	return a.run(t, stream, tools)
}

func (a *anthropicApp) answerTool(t *testing.T, stream bool, result string) appResult {
	a.msgs = append(a.msgs, anthropic.NewUserMessage(anthropic.NewToolResultBlock(a.call, result, false)))
	return a.run(t, stream, true)
}

// --- Gemini ---

type geminiApp struct {
	c        *genai.Client
	contents []*genai.Content
}

func (a *geminiApp) run(t *testing.T, stream, tools bool) appResult {
	cfg := &genai.GenerateContentConfig{}
	if tools {
		cfg.Tools = []*genai.Tool{{FunctionDeclarations: []*genai.FunctionDeclaration{{
			Name: "get_weather",
			Parameters: &genai.Schema{Type: genai.TypeObject, Required: []string{"city"},
				Properties: map[string]*genai.Schema{"city": {Type: genai.TypeString}}},
		}}}}
	}
	var res appResult
	var model *genai.Content
	collect := func(r *genai.GenerateContentResponse) {
		if len(r.Candidates) == 0 {
			return
		}
		cand := r.Candidates[0]
		if cand.FinishReason != "" {
			res.finish = string(cand.FinishReason)
		}
		if r.UsageMetadata != nil && r.UsageMetadata.CandidatesTokenCount > 0 {
			res.output = int64(r.UsageMetadata.CandidatesTokenCount)
		}
		if cand.Content == nil {
			return
		}
		if model == nil {
			model = &genai.Content{Role: "model"}
		}
		for _, p := range cand.Content.Parts {
			model.Parts = append(model.Parts, p)
			if p.Text != "" {
				res.text += p.Text
			}
			if p.FunctionCall != nil {
				res.tool, res.args = p.FunctionCall.Name, p.FunctionCall.Args
			}
		}
	}
	if stream {
		for r, err := range a.c.Models.GenerateContentStream(detourtest.TestContext(t), "gemini-2.5-pro", a.contents, cfg) {
			if err != nil {
				t.Fatalf("gemini stream: %v", err)
			}
			collect(r)
		}
	} else {
		r, err := a.c.Models.GenerateContent(detourtest.TestContext(t), "gemini-2.5-pro", a.contents, cfg)
		if err != nil {
			t.Fatalf("gemini: %v", err)
		}
		collect(r)
	}
	if res.tool != "" && model != nil {
		a.contents = append(a.contents, model)
	}
	return res
}

func (a *geminiApp) ask(t *testing.T, stream, tools bool) appResult {
	a.contents = []*genai.Content{genai.NewContentFromText("What is the weather in Paris?", genai.RoleUser)}
	return a.run(t, stream, tools)
}

func (a *geminiApp) answerTool(t *testing.T, stream bool, result string) appResult {
	a.contents = append(a.contents, &genai.Content{Role: genai.RoleUser, Parts: []*genai.Part{
		genai.NewPartFromFunctionResponse("get_weather", map[string]any{"output": result}),
	}})
	return a.run(t, stream, true)
}
