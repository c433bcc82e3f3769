package demo

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
)

// The demo's client must behave as openai-go does. The two are compared
// through testdata/openai_go.json: internal/sdkcheck holds openai-go to it
// (the requests it sends, and which answers it takes as an error), and the
// tests here hold the demo's client to the same file, so that this package's
// tests need not link openai-go.

// openaiGoFixture is testdata/openai_go.json.
type openaiGoFixture struct {
	Requests []seen `json:"requests"`
	Answers  []struct {
		Name        string `json:"name"`
		Stream      bool   `json:"stream"`
		Status      int    `json:"status"`
		ContentType string `json:"contentType"`
		Body        string `json:"body"`
		Error       bool   `json:"error"` // whether openai-go takes it as an error
	} `json:"answers"`
}

func readOpenAIGoFixture(t *testing.T) openaiGoFixture {
	t.Helper()
	b, err := os.ReadFile("testdata/openai_go.json")
	if err != nil {
		t.Fatal(err)
	}
	var f openaiGoFixture
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	return f
}

// seen is one request as the server received it.
type seen struct {
	Stream        bool   `json:"stream"`
	Method        string `json:"method"`
	Path          string `json:"path"`
	Authorization string `json:"authorization"`
	ContentType   string `json:"contentType"`
	Body          any    `json:"body"`
}

// TestClientSendsWhatOpenAIGoSends: the demo's plain client sends the same
// request as openai-go (the fixture's), streamed and not: method, path,
// key, content type and JSON body.
func TestClientSendsWhatOpenAIGoSends(t *testing.T) {
	t.Parallel()
	want := readOpenAIGoFixture(t).Requests
	var mu sync.Mutex
	var got []seen
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var body any
		if err := json.Unmarshal(b, &body); err != nil {
			t.Errorf("body is not JSON: %q", b)
		}
		stream := bytes.Contains(b, []byte(`"stream":true`))
		mu.Lock()
		got = append(got, seen{stream, r.Method, r.URL.Path, r.Header.Get("Authorization"), r.Header.Get("Content-Type"), body})
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
	ctx := context.Background()
	for _, stream := range []bool{false, true} {
		c := &client{baseURL: srv.URL + "/v1/", apiKey: "sk-demo-not-a-real-key", http: srv.Client()}
		if err := c.ask(ctx, stream); err != nil {
			t.Fatalf("demo client, stream %v: %v", stream, err)
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("openai-go and the demo client sent different requests:\ndemo client %+v\nopenai-go   %+v", got, want)
	}
}

// TestClientReadsAnswersAsOpenAIGo: for each answer, the demo's client sees
// an error exactly when openai-go does (the fixture says when).
func TestClientReadsAnswersAsOpenAIGo(t *testing.T) {
	t.Parallel()
	for _, tc := range readOpenAIGoFixture(t).Answers {
		t.Run(tc.Name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				w.Header().Set("Content-Type", tc.ContentType)
				w.WriteHeader(tc.Status)
				io.WriteString(w, tc.Body)
			}))
			defer srv.Close()
			c := &client{baseURL: srv.URL + "/v1/", apiKey: "sk-demo-not-a-real-key", http: srv.Client()}
			err := c.ask(context.Background(), tc.Stream)
			if (err == nil) == tc.Error {
				t.Errorf("demo client error %v; openai-go error: %v", err, tc.Error)
			}
		})
	}
}
