package fakevendor

import (
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/detour-proxy/detour/rewrite"
)

// A Gate lets a stream's opening events and its first content event go at
// once, then one event per Release, then the rest at Open; whole answers
// pass untouched. synctest.Wait returns once the handler is blocked, so
// what the recorder holds then is all that the Gate let through.
func TestGateReleasesOneEventAtATime(t *testing.T) {
	for _, tc := range []struct {
		shape      rewrite.Shape
		path, body string
	}{
		{rewrite.OpenAI, "/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`},
		{rewrite.Anthropic, "/v1/messages", `{"model":"m","max_tokens":9,"stream":true,"messages":[{"role":"user","content":"hi"}]}`},
		{rewrite.Gemini, "/v1beta/models/m:streamGenerateContent?alt=sse", `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`},
	} {
		t.Run(string(tc.shape), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				g := NewGate(New(tc.shape, Options{Name: "primary"}))
				w := httptest.NewRecorder()
				done := make(chan struct{})
				go func() {
					defer close(done)
					g.ServeHTTP(w, httptest.NewRequest("POST", tc.path, strings.NewReader(tc.body)))
				}()
				contents := func() int {
					n := 0
					for _, ev := range strings.SplitAfter(w.Body.String(), "\n\n") {
						if isContentEvent(tc.shape, []byte(ev)) {
							n++
						}
					}
					return n
				}
				for want := 1; want <= DefaultChunks; want++ {
					synctest.Wait()
					if got := contents(); got != want {
						t.Fatalf("content events written: %d; want %d (one more per Release)\n%s", got, want, w.Body.String())
					}
					g.Release()
				}
				synctest.Wait()
				all := w.Body.String()
				g.Open()
				<-done
				if w.Body.String() == all && tc.shape != rewrite.Gemini {
					t.Errorf("Open let nothing more go; want the closing events after it:\n%s", all)
				}
				if got := contents(); got != DefaultChunks {
					t.Errorf("content events: %d; want %d", got, DefaultChunks)
				}
			})
		})
	}
	t.Run("whole answer", func(t *testing.T) {
		g := NewGate(New(rewrite.OpenAI, Options{}))
		w := httptest.NewRecorder()
		g.ServeHTTP(w, httptest.NewRequest("POST", "/v1/chat/completions", strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`)))
		if w.Code != 200 || !strings.Contains(w.Body.String(), "Hello from openai.") {
			t.Errorf("whole answer through a closed Gate: %d %s", w.Code, w.Body.String())
		}
	})
}
