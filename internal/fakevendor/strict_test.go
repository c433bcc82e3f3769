package fakevendor

import (
	"bytes"
	"testing"

	"github.com/detour-proxy/detour/rewrite"
)

// A Strict vendor refuses a request without a conversation with its exact
// invalid_request body, and the refusal takes no fault: the next request
// still gets the fault that was queued.
func TestStrictRefusesRequestWithoutConversationAndKeepsFaults(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		shape      rewrite.Shape
		path, body string
	}{
		{rewrite.OpenAI, "/v1/chat/completions", `{"model":"gpt-4o","max_tokens":16}`},
		{rewrite.Anthropic, "/v1/messages", `{"model":"claude-sonnet-4-5","max_tokens":16,"messages":null}`},
		{rewrite.Gemini, "/v1beta/models/gemini-2.5-flash:generateContent", `{"generationConfig":{}}`},
	} {
		t.Run(string(tc.shape), func(t *testing.T) {
			v, srv := serve(t, tc.shape, Options{Strict: true})
			v.Script(Fault{Kind: Status, Class: ClassOverloaded})
			got := mustPost(t, srv.URL+tc.path, tc.body)
			wantStatus, wantBody := errorBody(tc.shape, Fault{Class: ClassInvalidRequest}, testModel[tc.shape], v.Requests()[0].RequestID, fixedNow())
			if got.status != wantStatus || !bytes.Equal(got.body, wantBody) {
				t.Errorf("refusal = %d %s\nwant      %d %s", got.status, got.body, wantStatus, wantBody)
			}
			if got.status != 400 {
				t.Errorf("status %d; want 400", got.status)
			}
			if r := ask(t, srv, tc.shape, false); r.status == 200 || r.status == 400 {
				t.Errorf("the request after the refusal got %d; want the queued overloaded fault", r.status)
			}
			if f := v.Requests()[0].Fault; f != (Fault{}) {
				t.Errorf("refused request recorded fault %v; want none", f)
			}
		})
	}
}

// Without Strict a request without messages is answered as any other.
func TestNotStrictAnswersRequestWithoutConversation(t *testing.T) {
	t.Parallel()
	_, srv := serve(t, rewrite.OpenAI, Options{})
	if r := mustPost(t, srv.URL+"/v1/chat/completions", `{"model":"gpt-4o"}`); r.status != 200 {
		t.Errorf("status %d; want 200", r.status)
	}
}
