package chain_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/detour-proxy/detour/internal/chain"
	"github.com/detour-proxy/detour/internal/detourtest"
	fv "github.com/detour-proxy/detour/internal/fakevendor"
	"github.com/detour-proxy/detour/rewrite"
)

// TestCacheEntriesBelongToTheAppIdentity: an answer stored for one
// organization, project or session cookie is not served to another one
// that shares the key (a team gateway keyed by cookie, one key used by two
// OpenAI projects); the same identity still gets it.
func TestCacheEntriesBelongToTheAppIdentity(t *testing.T) {
	t.Parallel()
	a := detourtest.NewVendor(t, rewrite.OpenAI, "a")
	r := newRunner(t, "api.openai.com", openaiPolicy([]string{upstreamJSON("a", a, "")}, `["a"]`, `, "cache": {"entries": 10, "ttl": "1h"}`))
	body := `{"model":"gpt-4o","temperature":0,"messages":[{"role":"user","content":"What is 2+2?"}]}`
	send := func(h map[string]string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, r.srv.URL+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer sk-app")
		for k, v := range h {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, resp.Header.Get(chain.HeaderAnsweredBy)
	}
	mine := map[string]string{"Cookie": "session=mine", "OpenAI-Organization": "org-mine", "OpenAI-Project": "proj_mine"}
	if st, by := send(mine); st != 200 || by != "a" {
		t.Fatalf("first answer: %d by %q", st, by)
	}
	a.SetDefault(fv.Fault{Kind: fv.Status, Status: 503})
	for _, k := range []string{"Cookie", "OpenAI-Organization", "OpenAI-Project"} {
		other := map[string]string{}
		for kk, v := range mine {
			other[kk] = v
		}
		other[k] = "someone-else"
		if st, by := send(other); st != 503 || by != "none" {
			t.Errorf("another %s: %d by %q; want 503 by none (the entry is not theirs)", k, st, by)
		}
	}
	if st, by := send(mine); st != 200 || by != "cache" {
		t.Errorf("same identity: %d by %q; want 200 from the cache", st, by)
	}
}
