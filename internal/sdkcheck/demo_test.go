package sdkcheck

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"sync"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// The demo's app (internal/demo's client) is a plain net/http client that
// must behave as openai-go does. The two are compared through one file,
// internal/demo/testdata/openai_go.json: here openai-go is held to it (the
// requests it sends, and which answers it takes as an error), and
// internal/demo's TestClientSendsWhatOpenAIGoSends and
// TestClientReadsAnswersAsOpenAIGo hold the demo's client to the same file.
// A new openai-go that behaves otherwise fails here first.

// demoFixture is internal/demo/testdata/openai_go.json.
type demoFixture struct {
	Requests []demoRequest `json:"requests"`
	Answers  []struct {
		Name        string `json:"name"`
		Stream      bool   `json:"stream"`
		Status      int    `json:"status"`
		ContentType string `json:"contentType"`
		Body        string `json:"body"`
		Error       bool   `json:"error"`
	} `json:"answers"`
}

// demoRequest is one request as the server received it.
type demoRequest struct {
	Stream        bool   `json:"stream"`
	Method        string `json:"method"`
	Path          string `json:"path"`
	Authorization string `json:"authorization"`
	ContentType   string `json:"contentType"`
	Body          any    `json:"body"`
}

func readDemoFixture(t *testing.T) demoFixture {
	t.Helper()
	b, err := os.ReadFile("../demo/testdata/openai_go.json")
	if err != nil {
		t.Fatal(err)
	}
	var f demoFixture
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	return f
}

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

// TestOpenAIGoSendsTheDemosRequests: openai-go sends the requests of the
// demo's fixture, streamed and not: method, path, key, content type and
// JSON body.
func TestOpenAIGoSendsTheDemosRequests(t *testing.T) {
	t.Parallel()
	want := readDemoFixture(t).Requests
	var mu sync.Mutex
	var got []demoRequest
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var body any
		if err := json.Unmarshal(b, &body); err != nil {
			t.Errorf("body is not JSON: %q", b)
		}
		stream := bytes.Contains(b, []byte(`"stream":true`))
		mu.Lock()
		got = append(got, demoRequest{stream, r.Method, r.URL.Path, r.Header.Get("Authorization"), r.Header.Get("Content-Type"), body})
		mu.Unlock()
		if stream {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}\n\ndata: [DONE]\n\n")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"Hi"},"finish_reason":"stop"}]}`)
	}))
	defer srv.Close()
	for _, stream := range []bool{false, true} {
		if err := sdkAsk(context.Background(), srv.URL+"/v1/", stream); err != nil {
			t.Fatalf("openai-go, stream %v: %v", stream, err)
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("openai-go sent\n%+v\nthe demo's fixture has\n%+v", got, want)
	}
}

// TestOpenAIGoReadsTheDemosAnswers: for each answer of the demo's fixture,
// openai-go sees an error exactly when the fixture says.
func TestOpenAIGoReadsTheDemosAnswers(t *testing.T) {
	t.Parallel()
	for _, tc := range readDemoFixture(t).Answers {
		t.Run(tc.Name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				w.Header().Set("Content-Type", tc.ContentType)
				w.WriteHeader(tc.Status)
				io.WriteString(w, tc.Body)
			}))
			defer srv.Close()
			err := sdkAsk(context.Background(), srv.URL+"/v1/", tc.Stream)
			if (err != nil) != tc.Error {
				t.Errorf("openai-go error %v; the fixture says error: %v", err, tc.Error)
			}
		})
	}
}
