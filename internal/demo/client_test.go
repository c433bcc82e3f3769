package demo

import (
	"context"
	"reflect"
	"testing"

	"github.com/detour-proxy/detour/internal/demo/demotest"
)

// The demo's client must behave as openai-go does. The two are compared
// through testdata/openai_go.json: internal/sdkcheck holds openai-go to it
// (the requests it sends, and which answers it takes as an error), and the
// tests here hold the demo's client to the same file, so that this package's
// tests need not link openai-go.

// openaiGoFixture is testdata/openai_go.json.
type openaiGoFixture = demotest.Fixture

func readOpenAIGoFixture(t *testing.T) openaiGoFixture {
	t.Helper()
	return demotest.ReadFixture(t, "testdata/openai_go.json")
}

// TestClientSendsWhatOpenAIGoSends: the demo's plain client sends the same
// request as openai-go (the fixture's), streamed and not: method, path,
// key, content type and JSON body.
func TestClientSendsWhatOpenAIGoSends(t *testing.T) {
	t.Parallel()
	want := readOpenAIGoFixture(t).Requests
	srv, sent := demotest.RecordingServer(t)
	ctx := context.Background()
	for _, stream := range []bool{false, true} {
		c := &client{baseURL: srv.URL + "/v1/", apiKey: "sk-demo-not-a-real-key", http: srv.Client()}
		if err := c.ask(ctx, stream); err != nil {
			t.Fatalf("demo client, stream %v: %v", stream, err)
		}
	}
	if got := sent(); !reflect.DeepEqual(got, want) {
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
			srv := demotest.AnswerServer(t, tc)
			c := &client{baseURL: srv.URL + "/v1/", apiKey: "sk-demo-not-a-real-key", http: srv.Client()}
			err := c.ask(context.Background(), tc.Stream)
			if (err == nil) == tc.Error {
				t.Errorf("demo client error %v; openai-go error: %v", err, tc.Error)
			}
		})
	}
}
