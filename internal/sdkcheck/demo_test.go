package sdkcheck

import (
	"context"
	"reflect"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/detour-proxy/detour/internal/demo/demotest"
)

// The demo's app (internal/demo's client) is a plain net/http client that
// must behave as openai-go does. The two are compared through one file,
// internal/demo/testdata/openai_go.json: here openai-go is held to it (the
// requests it sends, and which answers it takes as an error), and
// internal/demo's TestClientSendsWhatOpenAIGoSends and
// TestClientReadsAnswersAsOpenAIGo hold the demo's client to the same file.
// A new openai-go that behaves otherwise fails here first.

// demoFixture is internal/demo/testdata/openai_go.json.
type demoFixture = demotest.Fixture

func readDemoFixture(t *testing.T) demoFixture {
	t.Helper()
	return demotest.ReadFixture(t, "../demo/testdata/openai_go.json")
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
	srv, sent := demotest.RecordingServer(t)
	for _, stream := range []bool{false, true} {
		if err := sdkAsk(context.Background(), srv.URL+"/v1/", stream); err != nil {
			t.Fatalf("openai-go, stream %v: %v", stream, err)
		}
	}
	if got := sent(); !reflect.DeepEqual(got, want) {
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
			srv := demotest.AnswerServer(t, tc)
			err := sdkAsk(context.Background(), srv.URL+"/v1/", tc.Stream)
			if (err != nil) != tc.Error {
				t.Errorf("openai-go error %v; the fixture says error: %v", err, tc.Error)
			}
		})
	}
}
