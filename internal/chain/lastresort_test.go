package chain_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/detour-proxy/detour/internal/chain"
	"github.com/detour-proxy/detour/internal/detourtest"
	fv "github.com/detour-proxy/detour/internal/fakevendor"
	"github.com/detour-proxy/detour/rewrite"
)

const sorry = `"sorry": {"shape": "static", "text": "The assistant is busy."}`

func TestStaticAnswersWhenTheChainFails(t *testing.T) {
	t.Parallel()
	a := detourtest.NewVendor(t, rewrite.OpenAI, "a")
	r := newRunner(t, "api.openai.com", openaiPolicy([]string{upstreamJSON("a", a, ""), sorry}, `["a","sorry"]`, ""))
	a.SetDefault(fv.Fault{Kind: fv.Status, Status: 503})

	resp := post(t, r.srv.URL+"/v1/chat/completions", chatBody)
	if got := openaiText(t, resp); got != "The assistant is busy." {
		t.Fatalf("answer %q", got)
	}
	if by := resp.Header.Get(chain.HeaderAnsweredBy); by != "sorry" {
		t.Errorf("answered by %q", by)
	}
	rec := r.record(t)
	if got := trail(rec); got != "a:fallback:overloaded sorry:ok" || rec.AnsweredBy != "sorry" {
		t.Errorf("attempts %q answered by %q", got, rec.AnsweredBy)
	}

	resp = post(t, r.srv.URL+"/v1/chat/completions", streamBody)
	evs := events(t, resp.Body)
	if resp.Header.Get("Content-Type") != "text/event-stream" || len(evs) < 3 || string(evs[len(evs)-1].Data) != "[DONE]" {
		t.Fatalf("stream: %s, %d events; want SSE ending in [DONE]", resp.Header.Get("Content-Type"), len(evs))
	}
	var text strings.Builder
	for _, ev := range evs {
		if c := rewrite.ParseError(ev.Data); c.Parsed {
			t.Fatalf("error event %s", ev.Raw)
		}
		if s := string(ev.Data); strings.Contains(s, `"content":"`) {
			i := strings.Index(s, `"content":"`) + len(`"content":"`)
			text.WriteString(s[i : i+strings.Index(s[i:], `"`)])
		}
	}
	if text.String() != "The assistant is busy." {
		t.Errorf("streamed text %q", text.String())
	}
}

func TestCacheServesTheLastGoodAnswerWhenEverythingFails(t *testing.T) {
	t.Parallel()
	a := detourtest.NewVendor(t, rewrite.OpenAI, "a")
	r := newRunner(t, "api.openai.com", openaiPolicy([]string{upstreamJSON("a", a, "")}, `["a"]`, `, "cache": {"entries": 10, "ttl": "1h"}`))
	cold := `{"model":"gpt-4o","temperature":0,"messages":[{"role":"user","content":"What is 2+2?"}]}`
	// The same question, its keys in another order and streamed.
	coldStream := `{"messages":[{"content":"What is 2+2?","role":"user"}],"stream":true,"temperature":0,"model":"gpt-4o"}`
	warm := `{"model":"gpt-4o","temperature":0.7,"messages":[{"role":"user","content":"What is 2+2?"}]}`

	if got := openaiText(t, post(t, r.srv.URL+"/v1/chat/completions", cold)); got != "Hello from a." {
		t.Fatal(got)
	}
	if rec := r.record(t); rec.Cache != chain.CacheStored {
		t.Errorf("first answer: cache %q; want stored", rec.Cache)
	}
	openaiText(t, post(t, r.srv.URL+"/v1/chat/completions", warm))
	if rec := r.record(t); rec.Cache != chain.CacheBypass {
		t.Errorf("temperature 0.7: cache %q; want bypass", rec.Cache)
	}

	a.SetDefault(fv.Fault{Kind: fv.Status, Status: 503})
	resp := post(t, r.srv.URL+"/v1/chat/completions", cold)
	if got := openaiText(t, resp); got != "Hello from a." {
		t.Fatalf("answer %q; want the cached one", got)
	}
	if by := resp.Header.Get(chain.HeaderAnsweredBy); by != "cache" {
		t.Errorf("answered by %q", by)
	}
	rec := r.record(t)
	if rec.Cache != chain.CacheHit || rec.AnsweredBy != "cache" || trail(rec) != "a:exhausted:overloaded" {
		t.Errorf("record cache %q answered by %q attempts %q", rec.Cache, rec.AnsweredBy, trail(rec))
	}

	// Another credential never gets this app's answers.
	other, _ := http.NewRequest(http.MethodPost, r.srv.URL+"/v1/chat/completions", strings.NewReader(cold))
	other.Header.Set("Authorization", "Bearer sk-someone-else")
	oresp, err := http.DefaultClient.Do(other)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, oresp.Body)
	oresp.Body.Close()
	if oresp.StatusCode != 503 {
		t.Errorf("another key: %d; want 503 (cache entries belong to a credential)", oresp.StatusCode)
	}

	// A stored whole answer serves a streaming request, as a stream.
	resp = post(t, r.srv.URL+"/v1/chat/completions", coldStream)
	evs := events(t, resp.Body)
	all := ""
	for _, ev := range evs {
		all += string(ev.Data)
	}
	if resp.StatusCode != 200 || !strings.Contains(all, "Hello from a.") || string(evs[len(evs)-1].Data) != "[DONE]" {
		t.Errorf("stream from cache: %d %s", resp.StatusCode, all)
	}

	// Never for a sampled request: it fails as the vendor failed.
	resp = post(t, r.srv.URL+"/v1/chat/completions", warm)
	io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != 503 {
		t.Errorf("temperature 0.7 with everything down: %d; want 503", resp.StatusCode)
	}
}

func TestCacheStoresStreamsAndServesThemWhole(t *testing.T) {
	t.Parallel()
	for _, shape := range []rewrite.Shape{rewrite.OpenAI, rewrite.Anthropic, rewrite.Gemini} {
		t.Run(string(shape), func(t *testing.T) {
			t.Parallel()
			a := detourtest.NewVendor(t, shape, "a")
			path, streamPath, body, streamB := "/v1/chat/completions", "/v1/chat/completions",
				`{"model":"gpt-4o","temperature":0,"messages":[{"role":"user","content":"hi"}]}`,
				`{"model":"gpt-4o","temperature":0,"stream":true,"messages":[{"role":"user","content":"hi"}]}`
			switch shape {
			case rewrite.Anthropic:
				path, streamPath = "/v1/messages", "/v1/messages"
				body = `{"model":"claude-sonnet-4-5","max_tokens":50,"temperature":0,"messages":[{"role":"user","content":"hi"}]}`
				streamB = `{"model":"claude-sonnet-4-5","max_tokens":50,"temperature":0,"stream":true,"messages":[{"role":"user","content":"hi"}]}`
			case rewrite.Gemini:
				path, streamPath = "/v1beta/models/gemini-2.5-flash:generateContent", "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
				body = `{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"generationConfig":{"temperature":0}}`
				streamB = body
			}
			pol := fmt.Sprintf(`{"upstreams": {%s}, "routes": [{"name": "r", "match": {"host": %q}, "chain": ["a"]}], "cache": {}}`,
				upstreamJSON("a", a, ""), shape.DefaultHost())
			r := newRunner(t, shape.DefaultHost(), pol)
			resp := post(t, r.srv.URL+streamPath, streamB)
			io.Copy(io.Discard, resp.Body)
			if rec := r.record(t); rec.Cache != chain.CacheStored {
				t.Fatalf("stream: cache %q; want stored", rec.Cache)
			}
			a.SetDefault(fv.Fault{Kind: fv.Status, Status: 503})
			resp = post(t, r.srv.URL+path, body)
			got, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != 200 || resp.Header.Get(chain.HeaderAnsweredBy) != "cache" || !strings.Contains(string(got), "Hello from a.") {
				t.Errorf("whole answer from a cached stream: %d %s %s", resp.StatusCode, resp.Header.Get(chain.HeaderAnsweredBy), got)
			}
		})
	}
}

// By default a request without temperature (the vendors' default is 1) is
// neither stored nor served; TTL and entries bound what is served.
func TestCacheSkipsDefaultTemperatureAndBoundsTTLAndEntries(t *testing.T) {
	t.Parallel()
	a := detourtest.NewVendor(t, rewrite.OpenAI, "a")
	clk := newClock()
	r, _ := newLoggedRunner(t, "api.openai.com", openaiPolicy([]string{upstreamJSON("a", a, "")}, `["a"]`, `, "cache": {"entries": 1, "ttl": "10m"}`), clk)
	q := func(s string) string {
		return `{"model":"gpt-4o","temperature":0,"messages":[{"role":"user","content":"` + s + `"}]}`
	}
	// No temperature: bypass.
	openaiText(t, post(t, r.srv.URL+"/v1/chat/completions", chatBody))
	if rec := r.record(t); rec.Cache != chain.CacheBypass {
		t.Errorf("no temperature: cache %q; want bypass", rec.Cache)
	}
	openaiText(t, post(t, r.srv.URL+"/v1/chat/completions", q("one")))
	openaiText(t, post(t, r.srv.URL+"/v1/chat/completions", q("two"))) // evicts "one"
	a.SetDefault(fv.Fault{Kind: fv.Status, Status: 503})

	status := func(body string) (int, string) {
		resp := post(t, r.srv.URL+"/v1/chat/completions", body)
		io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, resp.Header.Get(chain.HeaderAnsweredBy)
	}
	if code, _ := status(chatBody); code != 503 {
		t.Errorf("no temperature, all down: %d; want 503", code)
	}
	if code, _ := status(q("one")); code != 503 {
		t.Errorf("evicted entry: %d; want 503 (entries 1)", code)
	}
	if code, by := status(q("two")); code != 200 || by != "cache" {
		t.Errorf("kept entry: %d by %q; want 200 by cache", code, by)
	}
	clk.Advance(11 * time.Minute)
	if code, _ := status(q("two")); code != 503 {
		t.Errorf("after the ttl: %d; want 503", code)
	}
}

// When the deadline passes before an upstream, the chain stops trying real
// upstreams but still reaches the static upstream at its end (the last
// resort that "never fails"), however many upstreams came before it and
// with hedging too: the same answer as the chain without the middle
// upstreams gives after the same deadline.
func TestDeadlineStillServesTheStaticLastResort(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, chain, extra string
	}{
		{"control: a then sorry", `["a","sorry"]`, ""},
		{"a, b then sorry", `["a","b","sorry"]`, ""},
		{"a, b, c then sorry, hedged", `["a","b","c","sorry"]`, `, "hedge_after": "250ms"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			// In memory, in a synctest bubble: the deadline passes on
			// virtual time.
			synctest.Test(t, func(t *testing.T) {
				vs := newMemVendors("a", "b", "c")
				vs["a"].SetDefault(fv.Fault{Kind: fv.Hang, Delay: time.Minute})
				vs["b"].SetDefault(fv.Fault{Kind: fv.Hang, Delay: time.Minute})
				r := newMemVendorRunner(t, vs, openaiPolicy([]string{memUpstream("a", ""), memUpstream("b", ""), memUpstream("c", ""), sorry}, c.chain,
					`, "deadline": "300ms"`+c.extra), nil)
				resp := r.post(t, "/v1/chat/completions", chatBody)
				body, _ := io.ReadAll(resp.Body)
				if resp.StatusCode != 200 || !strings.Contains(string(body), "The assistant is busy.") {
					t.Errorf("status %d body %s (attempts %q); want the static answer", resp.StatusCode, body, trail(r.record(t)))
				}
			})
		})
	}
}

func TestCachedAnswerBeatsTheStaticText(t *testing.T) {
	t.Parallel()
	a := detourtest.NewVendor(t, rewrite.OpenAI, "a")
	r := newRunner(t, "api.openai.com", openaiPolicy([]string{upstreamJSON("a", a, ""), sorry}, `["a","sorry"]`, `, "cache": {"allow_temperature": true}`))
	openaiText(t, post(t, r.srv.URL+"/v1/chat/completions", chatBody))
	a.SetDefault(fv.Fault{Kind: fv.Status, Status: 503})
	resp := post(t, r.srv.URL+"/v1/chat/completions", chatBody)
	if got := openaiText(t, resp); got != "Hello from a." || resp.Header.Get(chain.HeaderAnsweredBy) != "cache" {
		t.Errorf("answer %q by %q; want the cached answer", got, resp.Header.Get(chain.HeaderAnsweredBy))
	}
	// A request never answered before still gets the static text.
	resp = post(t, r.srv.URL+"/v1/chat/completions", `{"model":"gpt-4o","messages":[{"role":"user","content":"new"}]}`)
	if got := openaiText(t, resp); got != "The assistant is busy." {
		t.Errorf("answer %q; want the static text", got)
	}
}

// TestGeminiArrayStreamFaultsFallOver: a Gemini stream asked for without
// alt=sse is one JSON array; an error chunk in it, or an array cut short,
// falls over like its SSE twin.
func TestGeminiArrayStreamFaultsFallOver(t *testing.T) {
	t.Parallel()
	for _, f := range []fv.Fault{{Kind: fv.StreamErrorEarly}, {Kind: fv.StreamErrorMid}, {Kind: fv.StreamEOF}, {Kind: fv.StreamCut}} {
		t.Run(string(f.Kind), func(t *testing.T) {
			t.Parallel()
			a := detourtest.NewVendor(t, rewrite.Gemini, "a")
			b := detourtest.NewVendor(t, rewrite.Gemini, "b")
			pol := fmt.Sprintf(`{"upstreams": {%s, %s}, "routes": [{"name": "r", "match": {"host": %q}, "chain": ["a", "b"]}]}`,
				upstreamJSON("a", a, ""), upstreamJSON("b", b, ""), rewrite.Gemini.DefaultHost())
			r := newRunner(t, rewrite.Gemini.DefaultHost(), pol)
			a.Script(f)
			resp := post(t, r.srv.URL+"/v1beta/models/gemini-2.5-flash:streamGenerateContent", `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`)
			all, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != 200 || resp.Header.Get(chain.HeaderAnsweredBy) != "b" || !strings.HasPrefix(strings.TrimSpace(string(all)), "[") {
				t.Errorf("%d by %q: %.300s; want b's array", resp.StatusCode, resp.Header.Get(chain.HeaderAnsweredBy), all)
			}
			if got := trail(r.record(t)); !strings.HasPrefix(got, "a:fallback:") || !strings.HasSuffix(got, "b:ok") {
				t.Errorf("attempts %q", got)
			}
		})
	}
}

// A Gemini stream without alt=sse is one JSON array (application/json):
// the vendor's own format, not a bad response.
func TestGeminiArrayStreamIsNotABadResponse(t *testing.T) {
	t.Parallel()
	a := detourtest.NewVendor(t, rewrite.Gemini, "a")
	b := detourtest.NewVendor(t, rewrite.Gemini, "b")
	r := newRunner(t, rewrite.Gemini.DefaultHost(), routePolicy(rewrite.Gemini, []string{upstreamJSON("a", a, ""), upstreamJSON("b", b, "")}, `["a","b"]`, ""))
	resp := post(t, r.srv.URL+"/v1beta/models/gemini-2.5-flash:streamGenerateContent", `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`)
	all, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || resp.Header.Get(chain.HeaderAnsweredBy) != "a" {
		t.Errorf("%d by %q: %.200s; want a's array stream", resp.StatusCode, resp.Header.Get(chain.HeaderAnsweredBy), all)
	}
	if got := trail(r.record(t)); got != "a:ok" {
		t.Errorf("attempts %q; want a:ok", got)
	}
}
