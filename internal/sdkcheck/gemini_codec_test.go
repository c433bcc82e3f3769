package sdkcheck

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"

	"google.golang.org/genai"

	"github.com/detour-proxy/detour/internal/codectest"
	"github.com/detour-proxy/detour/rewrite"
	"github.com/detour-proxy/detour/rewrite/gemini"
	"github.com/detour-proxy/detour/rewrite/ir"
)

// These tests prove that google.golang.org/genai, the official Go SDK, reads
// what rewrite/gemini's encoders write exactly as it reads Gemini, and that
// what it sends decodes. The answer and the streams are those of
// rewrite/gemini's response and stream tests.

// fakeGemini is a Gemini endpoint that answers every request with the next
// canned body and records what the SDK sent.
type fakeGemini struct {
	mu       sync.Mutex
	answers  [][]byte
	requests []geminiRecorded
}

type geminiRecorded struct {
	path string
	body []byte
}

func (f *fakeGemini) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.requests = append(f.requests, geminiRecorded{r.URL.Path, body})
	answer := f.answers[0]
	f.answers = f.answers[1:]
	f.mu.Unlock()
	if strings.Contains(r.URL.Path, ":streamGenerateContent") {
		w.Header().Set("Content-Type", "text/event-stream")
	} else {
		w.Header().Set("Content-Type", "application/json")
	}
	_, _ = w.Write(answer)
}

// genaiClient returns a genai genaiClient talking to a fake that gives answers.
func genaiClient(t *testing.T, answers ...[]byte) (*genai.Client, *fakeGemini) {
	t.Helper()
	fake := &fakeGemini{answers: answers}
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	c, err := genai.NewClient(context.Background(), &genai.ClientConfig{
		APIKey: "test-key", Backend: genai.BackendGeminiAPI,
		HTTPOptions: genai.HTTPOptions{BaseURL: srv.URL},
	})
	if err != nil {
		t.Fatal(err)
	}
	return c, fake
}

// TestGeminiCodecGenAIDecodesEncodeResponse decodes EncodeResponse straight into
// genai's types.
func TestGeminiCodecGenAIDecodesEncodeResponse(t *testing.T) {
	b, err := gemini.EncodeResponse(codectest.GeminiSampleResponse(), "gemini-2.5-flash")
	if err != nil {
		t.Fatal(err)
	}
	var resp genai.GenerateContentResponse
	if err := json.Unmarshal(b, &resp); err != nil {
		t.Fatal(err)
	}
	checkGeminiSampleResponse(t, &resp)
}

func checkGeminiSampleResponse(t *testing.T, resp *genai.GenerateContentResponse) {
	t.Helper()
	if got := resp.Text(); got != "Let me check <that>." {
		t.Errorf("Text() = %q", got)
	}
	calls := resp.FunctionCalls()
	if len(calls) != 2 || calls[0].ID != "call_1" || calls[0].Name != "get_weather" ||
		!reflect.DeepEqual(calls[0].Args, map[string]any{"city": "Paris"}) || calls[1].Name != "get_time" {
		t.Errorf("FunctionCalls() = %s", jsonString(calls))
	}
	c := resp.Candidates[0]
	if c.FinishReason != genai.FinishReasonStop || c.Content.Role != genai.RoleModel || !c.Content.Parts[0].Thought {
		t.Errorf("candidate %s", jsonString(c))
	}
	u := resp.UsageMetadata
	if u.PromptTokenCount != 120 || u.CachedContentTokenCount != 100 || u.CandidatesTokenCount != 30 ||
		u.ThoughtsTokenCount != 15 || u.TotalTokenCount != 165 {
		t.Errorf("usage %s", jsonString(u))
	}
	if resp.ModelVersion != "gemini-2.5-flash" || resp.ResponseID != "chatcmpl-9" {
		t.Errorf("modelVersion %q responseId %q", resp.ModelVersion, resp.ResponseID)
	}
}

// TestGeminiCodecGenAIGenerateContent: the SDK's request decodes, and our answer reads
// as Gemini's.
func TestGeminiCodecGenAIGenerateContent(t *testing.T) {
	answer, _ := gemini.EncodeResponse(codectest.GeminiSampleResponse(), "gemini-2.5-flash")
	c, fake := genaiClient(t, answer)
	temp := float32(0.5)
	resp, err := c.Models.GenerateContent(context.Background(), "gemini-2.5-flash",
		[]*genai.Content{
			genai.NewContentFromText("Weather in Paris?", genai.RoleUser),
			{Role: genai.RoleModel, Parts: []*genai.Part{{FunctionCall: &genai.FunctionCall{Name: "get_weather", Args: map[string]any{"city": "Paris"}}, ThoughtSignature: []byte("sig")}}},
			{Role: genai.RoleUser, Parts: []*genai.Part{genai.NewPartFromFunctionResponse("get_weather", map[string]any{"output": "18C"})}},
		},
		&genai.GenerateContentConfig{
			SystemInstruction: genai.NewContentFromText("Be terse.", genai.RoleUser),
			Temperature:       &temp,
			MaxOutputTokens:   100,
			StopSequences:     []string{"END"},
			Tools: []*genai.Tool{{FunctionDeclarations: []*genai.FunctionDeclaration{{
				Name: "get_weather", Description: "Weather",
				Parameters: &genai.Schema{Type: genai.TypeObject, Properties: map[string]*genai.Schema{"city": {Type: genai.TypeString}}, Required: []string{"city"}},
			}}}},
			ToolConfig: &genai.ToolConfig{FunctionCallingConfig: &genai.FunctionCallingConfig{Mode: genai.FunctionCallingConfigModeAny, AllowedFunctionNames: []string{"get_weather"}}},
		})
	if err != nil {
		t.Fatal(err)
	}
	checkGeminiSampleResponse(t, resp)

	req := fake.requests[0]
	model, method, ok := rewrite.GeminiModelFromPath(req.path)
	if !ok || model != "gemini-2.5-flash" || method != "generateContent" {
		t.Fatalf("path %s", req.path)
	}
	r, err := gemini.DecodeRequest(req.body, model, false)
	if err != nil {
		t.Fatalf("DecodeRequest of go-genai's body: %v\n%s", err, req.body)
	}
	call := r.Messages[1].Parts[0].ToolCall
	result := r.Messages[2].Parts[0].ToolResult
	if !reflect.DeepEqual(r.System, []string{"Be terse."}) || call.ID != "call_req_0" || call.ThoughtSignature != "c2ln" ||
		result.CallID != "call_req_0" || result.Content != "18C" || r.MaxTokens != 100 || *r.Temperature != 0.5 ||
		string(r.Tools[0].Parameters) != `{"properties":{"city":{"type":"string"}},"required":["city"],"type":"object"}` ||
		*r.ToolChoice != (ir.ToolChoice{Mode: ir.ToolChoiceTool, Name: "get_weather"}) {
		t.Errorf("go-genai's request decoded to\n%s\nfrom\n%s", codectest.MarshalIndent(t, r), req.body)
	}
}

// TestGeminiCodecGenAIStream reads encoded streams with the SDK's own stream reader.
func TestGeminiCodecGenAIStream(t *testing.T) {
	o := ir.StreamOptions{Model: "gemini-2.5-flash"}
	c, _ := genaiClient(t, geminiEncodeStream(o, codectest.GeminiTextEvents...), geminiEncodeStream(o, codectest.GeminiToolEvents...))

	var text, thoughts strings.Builder
	var last *genai.GenerateContentResponse
	for resp, err := range c.Models.GenerateContentStream(context.Background(), "gemini-2.5-flash", genai.Text("Hi"), nil) {
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range resp.Candidates[0].Content.Parts {
			if p.Thought {
				thoughts.WriteString(p.Text)
			} else {
				text.WriteString(p.Text)
			}
		}
		last = resp
	}
	if text.String() != "Hi! \"quoted\"\nnew line <b>" || thoughts.String() != "Greet back." {
		t.Errorf("text %q thoughts %q", text.String(), thoughts.String())
	}
	if last.Candidates[0].FinishReason != genai.FinishReasonStop || last.UsageMetadata.TotalTokenCount != 15 ||
		last.UsageMetadata.ThoughtsTokenCount != 3 || last.ResponseID != "msg_01" {
		t.Errorf("last chunk %s", jsonString(last))
	}

	var calls []*genai.FunctionCall
	for resp, err := range c.Models.GenerateContentStream(context.Background(), "gemini-2.5-flash", genai.Text("Weather?"), nil) {
		if err != nil {
			t.Fatal(err)
		}
		calls = append(calls, resp.FunctionCalls()...)
		last = resp
	}
	if len(calls) != 2 || calls[0].ID != "call_1" || !reflect.DeepEqual(calls[0].Args, map[string]any{"city": "Paris"}) ||
		calls[1].Name != "get_time" || len(calls[1].Args) != 0 {
		t.Errorf("calls %s", jsonString(calls))
	}
	if last.UsageMetadata.PromptTokenCount != 20 || last.UsageMetadata.CandidatesTokenCount != 15 {
		t.Errorf("usage %s", jsonString(last.UsageMetadata))
	}
}

// TestGeminiCodecGenAIStreamError: the in-stream error detour sends after a 200
// surfaces in go-genai as an APIError with the upstream's code.
func TestGeminiCodecGenAIStreamError(t *testing.T) {
	e := gemini.NewStreamEncoder(ir.StreamOptions{Model: "gemini-2.5-flash"})
	stream := e.Encode(nil, ir.StreamEvent{Kind: ir.StreamText, Text: "Hel"})
	stream = e.Encode(stream, ir.StreamEvent{Kind: ir.StreamError, Err: &rewrite.AppError{Status: 503, Class: "overloaded", Message: "busy"}})
	c, _ := genaiClient(t, stream)
	var text string
	var gotErr error
	for resp, err := range c.Models.GenerateContentStream(context.Background(), "gemini-2.5-flash", genai.Text("Hi"), nil) {
		if err != nil {
			gotErr = err
			break
		}
		text += resp.Text()
	}
	var apiErr genai.APIError
	if text != "Hel" || !errors.As(gotErr, &apiErr) || apiErr.Code != 503 || apiErr.Status != "UNAVAILABLE" || apiErr.Message != "busy" {
		t.Errorf("text %q err %#v; want the text, then APIError 503 UNAVAILABLE", text, gotErr)
	}
}

// TestGeminiCodecGenAIChatToolRoundTrip: a go-genai chat that gets a call from
// another vendor (with its id) sends the call back with that id and a
// response without one; DecodeRequest pairs them by name.
func TestGeminiCodecGenAIChatToolRoundTrip(t *testing.T) {
	first, _ := gemini.EncodeResponse(&ir.Response{
		ID: "msg_1", Parts: []ir.Part{{Kind: ir.PartToolCall, ToolCall: &ir.ToolCall{ID: "toolu_01A", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Paris"}`)}}},
		Finish: ir.FinishToolCalls,
	}, "gemini-2.5-flash")
	second, _ := gemini.EncodeResponse(&ir.Response{ID: "msg_2", Parts: []ir.Part{{Kind: ir.PartText, Text: "18C in Paris."}}, Finish: ir.FinishStop}, "gemini-2.5-flash")
	c, fake := genaiClient(t, first, second)
	chat, err := c.Chats.Create(context.Background(), "gemini-2.5-flash", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := chat.SendMessage(context.Background(), genai.Part{Text: "Weather in Paris?"})
	if err != nil {
		t.Fatal(err)
	}
	call := resp.FunctionCalls()[0]
	resp, err = chat.SendMessage(context.Background(), *genai.NewPartFromFunctionResponse(call.Name, map[string]any{"output": "18C"}))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text() != "18C in Paris." {
		t.Errorf("final answer %q", resp.Text())
	}
	r, err := gemini.DecodeRequest(fake.requests[1].body, "gemini-2.5-flash", false)
	if err != nil {
		t.Fatal(err)
	}
	gotCall := r.Messages[1].Parts[0].ToolCall
	gotResult := r.Messages[2].Parts[0].ToolResult
	if gotCall.ID != "toolu_01A" || gotResult.CallID != "toolu_01A" || gotResult.Name != "get_weather" || gotResult.Content != "18C" {
		t.Errorf("second request decoded to\n%s\nfrom\n%s", codectest.MarshalIndent(t, r), fake.requests[1].body)
	}
}

// geminiEncodeStream runs events through a StreamEncoder and Close.
func geminiEncodeStream(o ir.StreamOptions, evs ...ir.StreamEvent) []byte {
	e := gemini.NewStreamEncoder(o)
	var out []byte
	for _, ev := range evs {
		out = e.Encode(out, ev)
	}
	return e.Close(out)
}

// jsonString renders v compactly, for comparing parts of decoded JSON.
func jsonString(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
