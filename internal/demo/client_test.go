package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sync"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// sdkAsk is what the demo's client replaces: openai-go asking the demo's
// question, streamed or not.
func sdkAsk(ctx context.Context, baseURL string, stream bool) error {
	c := openai.NewClient(option.WithBaseURL(baseURL), option.WithAPIKey("sk-demo-not-a-real-key"), option.WithMaxRetries(0))
	params := openai.ChatCompletionNewParams{
		Model:    "gpt-4o",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Say hello.")},
	}
	if !stream {
		_, err := c.Chat.Completions.New(ctx, params)
		return err
	}
	s := c.Chat.Completions.NewStreaming(ctx, params)
	acc := openai.ChatCompletionAccumulator{}
	for s.Next() {
		acc.AddChunk(s.Current())
	}
	return s.Err()
}

// seen is one request as the server received it.
type seen struct {
	method, path, auth, contentType string
	body                            any
}

// TestClientSendsWhatOpenAIGoSends: the demo's plain client sends the same
// request as openai-go, streamed and not: method, path, key, content type
// and JSON body.
func TestClientSendsWhatOpenAIGoSends(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var got []seen
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var body any
		if err := json.Unmarshal(b, &body); err != nil {
			t.Errorf("body is not JSON: %q", b)
		}
		mu.Lock()
		got = append(got, seen{r.Method, r.URL.Path, r.Header.Get("Authorization"), r.Header.Get("Content-Type"), body})
		mu.Unlock()
		if bytes.Contains(b, []byte(`"stream":true`)) {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}\n\ndata: [DONE]\n\n")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"Hi"},"finish_reason":"stop"}]}`)
	}))
	defer srv.Close()
	ctx := context.Background()
	for _, stream := range []bool{false, true} {
		got = nil
		if err := sdkAsk(ctx, srv.URL+"/v1/", stream); err != nil {
			t.Fatalf("openai-go, stream %v: %v", stream, err)
		}
		c := &client{baseURL: srv.URL + "/v1/", apiKey: "sk-demo-not-a-real-key", http: srv.Client()}
		if err := c.ask(ctx, stream); err != nil {
			t.Fatalf("demo client, stream %v: %v", stream, err)
		}
		if len(got) != 2 || !reflect.DeepEqual(got[0], got[1]) {
			t.Errorf("stream %v: openai-go and the demo client sent different requests:\n%+v", stream, got)
		}
	}
}

// TestClientReadsAnswersAsOpenAIGo: for each answer, the demo's client sees
// an error exactly when openai-go does.
func TestClientReadsAnswersAsOpenAIGo(t *testing.T) {
	t.Parallel()
	const chunk = "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}\n\n"
	for _, tc := range []struct {
		name        string
		stream      bool
		status      int
		contentType string
		body        string
	}{
		{"completion", false, 200, "application/json", `{"id":"c","object":"chat.completion","choices":[]}`},
		{"status 529", false, 529, "application/json", `{"error":{"type":"overloaded_error","message":"Overloaded"}}`},
		{"status 429", true, 429, "application/json", `{"error":{"type":"insufficient_quota","message":"quota"}}`},
		{"html", false, 200, "application/json", `<html><body>Bad gateway</body></html>`},
		{"stream", true, 200, "text/event-stream", chunk + chunk + "data: [DONE]\n\n"},
		{"stream without DONE", true, 200, "text/event-stream", chunk},
		{"stream error event", true, 200, "text/event-stream", chunk + "data: {\"error\":{\"message\":\"overloaded\",\"type\":\"server_error\"}}\n\n"},
		{"stream event not JSON", true, 200, "text/event-stream", chunk + "data: <html>\n\n"},
		{"stream multi-line data", true, 200, "text/event-stream", "data: {\"id\":\"c\",\n" + "data: \"choices\":[]}\n\n" + "data: [DONE]\n\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				w.Header().Set("Content-Type", tc.contentType)
				w.WriteHeader(tc.status)
				io.WriteString(w, tc.body)
			}))
			defer srv.Close()
			ctx := context.Background()
			sdkErr := sdkAsk(ctx, srv.URL+"/v1/", tc.stream)
			c := &client{baseURL: srv.URL + "/v1/", apiKey: "sk-demo-not-a-real-key", http: srv.Client()}
			err := c.ask(ctx, tc.stream)
			if (err == nil) != (sdkErr == nil) {
				t.Errorf("demo client error %v; openai-go error %v", err, sdkErr)
			}
		})
	}
}
