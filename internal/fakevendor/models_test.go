package fakevendor

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/detour-proxy/detour/rewrite"
)

// Each shape answers a GET of its model list with its list envelope, and a
// fault fails the list as it fails a completion.
func TestModelListAnswersAndFails(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		shape rewrite.Shape
		path  string
		key   string
	}{
		{rewrite.OpenAI, "/v1/models", "data"},
		{rewrite.Anthropic, "/v1/models", "data"},
		{rewrite.Gemini, "/v1beta/models", "models"},
	} {
		v := New(tc.shape, Options{})
		get := func() *httptest.ResponseRecorder {
			w := httptest.NewRecorder()
			v.ServeHTTP(w, httptest.NewRequest(http.MethodGet, tc.path, nil))
			return w
		}
		w := get()
		var list map[string]json.RawMessage
		if err := json.Unmarshal(w.Body.Bytes(), &list); w.Code != 200 || err != nil || len(list[tc.key]) == 0 {
			t.Errorf("%s GET %s: %d %s; want 200 with %q", tc.shape, tc.path, w.Code, w.Body, tc.key)
		}
		v.SetDefault(Fault{Kind: Status, Class: ClassOverloaded})
		if w := get(); w.Code == 200 || !rewrite.ParseError(w.Body.Bytes()).Parsed {
			t.Errorf("%s GET %s with an overloaded fault: %d %s; want the shape's error", tc.shape, tc.path, w.Code, w.Body)
		}
		if n := v.Calls(); n != 2 {
			t.Errorf("%s: %d calls recorded; want 2", tc.shape, n)
		}
	}
}
