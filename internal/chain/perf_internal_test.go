package chain

import (
	"mime"
	"net/http"
	"testing"
)

// The header names looked up or deleted without canonicalizing them again
// (copyHeader, copyResponseHeaders) must be canonical already, or a lookup
// would miss what Header.Values would find.
func TestHeaderNamesLookedUpAsTheyAreAreCanonical(t *testing.T) {
	lists := map[string][]string{
		"identityHeaders":   identityHeaders,
		"hopHeaders":        hopHeaders,
		"translatedHeaders": translatedHeaders,
		"credentials":       {"Authorization", "Api-Key", "X-Api-Key", "X-Goog-Api-Key"},
		"response":          {"Connection", "Content-Length", "Content-Encoding"},
	}
	for name, l := range lists {
		for _, k := range l {
			if c := http.CanonicalHeaderKey(k); c != k {
				t.Errorf("%s: %q is not canonical (%q)", name, k, c)
			}
		}
	}
}

// isEventStream's fast path must agree with mime.ParseMediaType, which it
// replaced on the stream path.
func TestIsEventStreamAgreesWithParseMediaType(t *testing.T) {
	for _, ct := range []string{
		"", "text/event-stream", "TEXT/Event-Stream", " text/event-stream ", "text/event-stream;",
		"text/event-stream; charset=utf-8", "text/event-stream;charset=UTF-8;", "text/event-stream; x",
		"text/event-stream; a=1; a=2", "text/event-stream; a=1; a=1", `text/event-stream; a="x=y"`,
		"text/event-streams", "text/event", "application/json", "text/event-stream\u00a0", "\u00a0text/event-stream",
		"text/event-ſtream", "text/event-stream; charset=utf-8; charset=latin1", "text/event-stream; a*0=x; a*1=y",
		"/", "text/", ";", "text/event-stream ; q=1",
	} {
		mt, _, _ := mime.ParseMediaType(ct)
		want := mt == "text/event-stream"
		if got := isEventStream(http.Header{"Content-Type": {ct}}); got != want {
			t.Errorf("isEventStream(%q) = %v; ParseMediaType says %v", ct, got, want)
		}
	}
}

func FuzzIsEventStream(f *testing.F) {
	for _, s := range []string{"text/event-stream", "text/event-stream; a=1; a=2", "TEXT/EVENT-STREAM;charset=utf-8"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, ct string) {
		mt, _, _ := mime.ParseMediaType(ct)
		if got, want := isEventStream(http.Header{"Content-Type": {ct}}), mt == "text/event-stream"; got != want {
			t.Errorf("isEventStream(%q) = %v; ParseMediaType says %v", ct, got, want)
		}
	})
}

func TestJoinPath(t *testing.T) {
	for _, c := range []struct{ base, rel, app, want string }{
		{"/v1", "/chat/completions", "/v1/chat/completions", "/v1/chat/completions"},
		{"/openai/v1", "/chat/completions", "/v1/chat/completions", "/openai/v1/chat/completions"},
		{"", "/v1/x", "/v1/x", "/v1/x"},
		{"/v1", "/x", "/v2/x", "/v1/x"},
		{"/v", "1/x", "/v1/x", "/v1/x"},
	} {
		if got := joinPath(c.base, c.rel, c.app); got != c.want {
			t.Errorf("joinPath(%q, %q, %q) = %q; want %q", c.base, c.rel, c.app, got, c.want)
		}
	}
}
