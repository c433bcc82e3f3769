package chain_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/detour-proxy/detour/internal/chain"
	"github.com/detour-proxy/detour/internal/detourtest"
	fv "github.com/detour-proxy/detour/internal/fakevendor"
	"github.com/detour-proxy/detour/internal/health"
	"github.com/detour-proxy/detour/rewrite"
	"github.com/detour-proxy/detour/rewrite/sse"
)

// runner is detourtest's ChainRunner (the chain on its own, on a plain HTTP
// test server) under the names these tests use; the fields are the
// ChainRunner's own.
type runner struct {
	*detourtest.ChainRunner
	srv     *httptest.Server
	handler http.Handler
	health  *health.Registry
}

// asRunner names c's fields as these tests do.
func asRunner(c *detourtest.ChainRunner) *runner {
	return &runner{ChainRunner: c, srv: c.Srv, handler: c.Handler, health: c.Health}
}

func newRunner(t *testing.T, host, policyJSON string) *runner {
	t.Helper()
	return startRunner(t, host, policyJSON, nil)
}

// startRunner is newRunner with a hook that adjusts the Runner before it
// serves (a virtual clock, a log writer, a transport override).
func startRunner(t *testing.T, host, policyJSON string, tune func(*chain.Runner)) *runner {
	t.Helper()
	return asRunner(detourtest.StartChainRunner(t, host, policyJSON, tune))
}

// buildRunner is startRunner without the server: r.handler serves the
// chain, r.srv is nil.
func buildRunner(t *testing.T, host, policyJSON string, tune func(*chain.Runner)) *runner {
	t.Helper()
	return asRunner(detourtest.BuildChainRunner(t, host, policyJSON, tune))
}

// record returns the record of the request the test sent last, once every
// request has ended (ChainRunner.Record).
func (r *runner) record(t *testing.T) *chain.Record {
	t.Helper()
	return r.Record(t)
}

// settled returns every record once no request is running.
func (r *runner) settled(t *testing.T) []*chain.Record {
	t.Helper()
	return r.Settled(t)
}

// waitIdle waits for a fake vendor's requests to end, failing the test
// when one is still in flight after 5 s (a loser that was not cancelled).
func waitIdle(t *testing.T, v interface{ InFlight() int }, what string) {
	t.Helper()
	if !eventually(func() bool { return v.InFlight() == 0 }) {
		t.Error(what)
	}
}

func upstreamJSON(name string, v *detourtest.Vendor, extra string) string {
	return detourtest.UpstreamJSON(name, v, extra)
}

func openaiPolicy(ups []string, chainNames string, extra string) string {
	return detourtest.OpenAIChatPolicy(ups, chainNames, extra)
}

const streamBody = `{"model":"gpt-4o","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`

func post(t *testing.T, url, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer sk-app")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func events(t *testing.T, r io.Reader) []sse.Event {
	t.Helper()
	var out []sse.Event
	rd := sse.NewReader(r)
	for {
		ev, err := rd.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("reading stream: %v", err)
		}
		out = append(out, ev.Clone())
	}
}

func TestStreamCutAfterCommitEndsWithAppShapedError(t *testing.T) {
	t.Parallel()
	a := detourtest.NewVendor(t, rewrite.OpenAI, "a")
	b := detourtest.NewVendor(t, rewrite.OpenAI, "b")
	r := newRunner(t, "api.openai.com", openaiPolicy([]string{upstreamJSON("a", a, ""), upstreamJSON("b", b, "")}, `["a","b"]`, ""))
	a.Script(fv.Fault{Kind: fv.StreamCut})

	resp := post(t, r.srv.URL+"/v1/chat/completions", streamBody)
	evs := events(t, resp.Body)
	if resp.StatusCode != 200 || len(evs) < 2 {
		t.Fatalf("status %d, %d events", resp.StatusCode, len(evs))
	}
	last := evs[len(evs)-1]
	info := rewrite.ParseError(last.Data)
	if !info.Parsed || !strings.Contains(info.Message, "ended the stream before it was complete") {
		t.Errorf("last event = %s; want an OpenAI-shaped in-stream error", last.Raw)
	}
	if b.Calls() != 0 {
		t.Error("fell over after the commit point: the app already has part of an answer")
	}
	rec := r.record(t)
	if a := rec.Attempts[0]; a.Outcome != chain.OutcomeCut || a.Class != "server_error" {
		t.Errorf("attempt = %+v; want cut server_error", a)
	}
}

func TestStreamStallAfterCommitTimesOutIdle(t *testing.T) {
	t.Parallel()
	a := detourtest.NewVendor(t, rewrite.Anthropic, "a")
	pol := fmt.Sprintf(`{"upstreams": {%s},
  "routes": [{"name": "m", "match": {"host": "api.anthropic.com"}, "chain": ["a"]}]}`, upstreamJSON("a", a, `, "timeouts": {"idle": "200ms"}`))
	r := newRunner(t, "api.anthropic.com", pol)
	a.Script(fv.Fault{Kind: fv.StreamStall})

	resp := post(t, r.srv.URL+"/v1/messages", `{"model":"claude-sonnet-4-5","max_tokens":10,"stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	evs := events(t, resp.Body)
	last := evs[len(evs)-1]
	if last.Name != "error" || !strings.Contains(string(last.Data), `"type":"timeout_error"`) && !strings.Contains(string(last.Data), "sent nothing for 200ms") {
		t.Errorf("last event = %q; want an Anthropic error event about the idle timeout", last.Raw)
	}
	if evs[0].Name != "message_start" {
		t.Errorf("first event %q; want message_start", evs[0].Name)
	}
	if a := r.record(t).Attempts[0]; a.Class != "timeout" || a.Outcome != chain.OutcomeCut {
		t.Errorf("attempt = %+v", a)
	}
}

// TestEventsFlowAsTheyArriveAfterCommit proves there is no buffering past
// the commit point causally rather than by timing: the upstream does not
// send its second content event until the client has received the first.
func TestEventsFlowAsTheyArriveAfterCommit(t *testing.T) {
	t.Parallel()
	got1 := make(chan struct{})
	up := detourtest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fl := w.(http.Flusher)
		write := func(s string) { io.WriteString(w, s); fl.Flush() }
		write(`data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}` + "\n\n")
		write(`data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"one"}}]}` + "\n\n")
		select {
		case <-got1:
		case <-time.After(5 * time.Second):
			write(`data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"TOO-LATE"}}]}` + "\n\n")
		}
		write(`data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":" two"},"finish_reason":"stop"}]}` + "\n\n")
		write("data: [DONE]\n\n")
	}))
	defer up.Close()
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	writeCert(t, caFile, up)
	pol := openaiPolicy([]string{fmt.Sprintf(`"u": {"shape": "openai", "base_url": %q, "ca_file": %q, "auth": {"from": "client"}}`, up.URL+"/v1", caFile)}, `["u"]`, "")
	r := newRunner(t, "api.openai.com", pol)

	resp := post(t, r.srv.URL+"/v1/chat/completions", streamBody)
	br := bufio.NewReader(resp.Body)
	var all bytes.Buffer
	for {
		line, err := br.ReadString('\n')
		all.WriteString(line)
		if strings.Contains(line, `"one"`) {
			close(got1)
		}
		if err != nil {
			break
		}
	}
	if strings.Contains(all.String(), "TOO-LATE") {
		t.Fatal("the first content event reached the client only after the upstream sent the next: detour buffered past the commit point")
	}
	// Same shape: the bytes the app gets are the bytes the upstream sent.
	if !strings.HasPrefix(all.String(), `data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}`) {
		t.Errorf("stream altered:\n%s", all.String())
	}
}

func writeCert(t *testing.T, path string, srv *httptest.Server) {
	t.Helper()
	data := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestModelMappingRewritesOnlyTheModel(t *testing.T) {
	t.Parallel()
	a := detourtest.NewVendor(t, rewrite.OpenAI, "a")
	b := detourtest.NewVendor(t, rewrite.OpenAI, "b")
	r := newRunner(t, "api.openai.com", openaiPolicy([]string{
		upstreamJSON("a", a, ""),
		upstreamJSON("b", b, `, "models": {"gpt-4o*": "llama-3.3-70b", "*": "small"}`),
	}, `["a","b"]`, ""))
	a.Script(fv.Fault{Kind: fv.Status, Status: 503, Class: fv.ClassOverloaded})
	body := `{"messages":[{"role":"user","content":"héllo \u00e9"}],  "model" : "gpt-4o-mini", "temperature":0.2}`
	resp := post(t, r.srv.URL+"/v1/chat/completions", body)
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, out)
	}
	if got := string(a.Requests()[0].Body); got != body {
		t.Errorf("primary (no mapping) got a changed body:\n%s\nwant byte-identical:\n%s", got, body)
	}
	want := `{"messages":[{"role":"user","content":"héllo \u00e9"}],  "model" : "llama-3.3-70b", "temperature":0.2}`
	if got := string(b.Requests()[0].Body); got != want {
		t.Errorf("backup body:\n%s\nwant only the model changed:\n%s", got, want)
	}
	var answer struct{ Model string }
	_ = json.Unmarshal(out, &answer)
	if answer.Model != "llama-3.3-70b" {
		t.Errorf("answer model %q", answer.Model)
	}
	if rec := r.record(t); rec.Attempts[1].Model != "llama-3.3-70b" || rec.Model != "gpt-4o-mini" {
		t.Errorf("record model %q attempts %+v", rec.Model, rec.Attempts)
	}
}

func TestGeminiKeyQueryIsRemovedAndModelPathMapped(t *testing.T) {
	t.Parallel()
	a := detourtest.NewVendor(t, rewrite.Gemini, "a")
	b := detourtest.NewVendor(t, rewrite.Gemini, "b")
	keyFile := filepath.Join(t.TempDir(), "k")
	os.WriteFile(keyFile, []byte("gem-backup"), 0o600)
	pol := fmt.Sprintf(`{"upstreams": {%s, "b": {"shape": "gemini", "base_url": %q, "ca_file": %q, "auth": {"file": %q}, "models": {"*": "gemini-2.5-flash-lite"}}},
  "routes": [{"name": "g", "match": {"host": "generativelanguage.googleapis.com", "path": "/v1beta/models/*"}, "chain": ["a","b"]}]}`,
		upstreamJSON("a", a, ""), b.BaseURL(), b.CAFile, keyFile)
	r := newRunner(t, "generativelanguage.googleapis.com", pol)
	a.Script(fv.Fault{Kind: fv.Status, Status: 429, Class: fv.ClassQuotaPerDay})

	resp := post(t, r.srv.URL+"/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse&key=APP-GEMINI-KEY",
		`{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`)
	evs := events(t, resp.Body)
	if resp.StatusCode != 200 || len(evs) == 0 || !strings.Contains(string(evs[0].Data), "Hello from b") && !strings.Contains(string(evs[0].Data), "Hello") {
		t.Fatalf("status %d events %d", resp.StatusCode, len(evs))
	}
	ra := a.Requests()[0]
	if ra.Header.Get("X-Goog-Api-Key") != "APP-GEMINI-KEY" || strings.Contains(ra.RawQuery, "key=") || ra.RawQuery != "alt=sse" {
		t.Errorf("primary got query %q header %q; want the app's key moved to x-goog-api-key", ra.RawQuery, ra.Header.Get("X-Goog-Api-Key"))
	}
	rb := b.Requests()[0]
	if rb.Path != "/v1beta/models/gemini-2.5-flash-lite:streamGenerateContent" || rb.Header.Get("X-Goog-Api-Key") != "gem-backup" {
		t.Errorf("backup got %s key %q", rb.Path, rb.Header.Get("X-Goog-Api-Key"))
	}
	if strings.Contains(fmt.Sprint(rb.Header)+rb.RawQuery, "APP-GEMINI-KEY") {
		t.Error("backup saw the app's key")
	}
	// Gemini's per-day quota cools the primary down until Pacific midnight.
	cd, ok := r.health.CoolingDown("a", time.Now())
	if !ok || time.Until(cd.Until) < time.Minute {
		t.Errorf("cooldown %+v %v; want one until the daily reset", cd, ok)
	}
}

func TestEveryUpstreamCoolingDownWithoutNeverSkipLast(t *testing.T) {
	t.Parallel()
	a := detourtest.NewVendor(t, rewrite.OpenAI, "a")
	r := newRunner(t, "api.openai.com", openaiPolicy([]string{upstreamJSON("a", a, "")}, `["a"]`, `, "never_skip_last": false`))
	r.health.StartCooldown("a", time.Now().Add(90*time.Second), "test")
	resp := post(t, r.srv.URL+"/v1/chat/completions", `{"model":"gpt-4o","messages":[]}`)
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" || a.Calls() != 0 {
		t.Errorf("status %d retry-after %q calls %d body %s", resp.StatusCode, resp.Header.Get("Retry-After"), a.Calls(), body)
	}
	// never_skip_last (the default) tries the last upstream anyway.
	r2 := newRunner(t, "api.openai.com", openaiPolicy([]string{upstreamJSON("a", a, "")}, `["a"]`, ""))
	r2.health.StartCooldown("a", time.Now().Add(90*time.Second), "test")
	if resp := post(t, r2.srv.URL+"/v1/chat/completions", `{"model":"gpt-4o","messages":[]}`); resp.StatusCode != 200 || a.Calls() != 1 {
		t.Errorf("never_skip_last: status %d calls %d", resp.StatusCode, a.Calls())
	}
}

func TestDeadlineBoundsTheWholeChain(t *testing.T) {
	t.Parallel()
	a := detourtest.NewVendor(t, rewrite.OpenAI, "a")
	b := detourtest.NewVendor(t, rewrite.OpenAI, "b")
	r := newRunner(t, "api.openai.com", openaiPolicy([]string{upstreamJSON("a", a, ""), upstreamJSON("b", b, "")}, `["a","b"]`, `, "deadline": "300ms"`))
	a.SetDefault(fv.Fault{Kind: fv.Hang, Delay: time.Minute})
	b.SetDefault(fv.Fault{Kind: fv.Hang, Delay: time.Minute})
	resp := post(t, r.srv.URL+"/v1/chat/completions", `{"model":"gpt-4o","messages":[]}`)
	body, _ := io.ReadAll(resp.Body)
	info := rewrite.ParseError(body)
	if resp.StatusCode != 504 || info.Type != "timeout" {
		t.Errorf("status %d body %s; want a 504 timeout in OpenAI's envelope", resp.StatusCode, body)
	}
	rec := r.record(t)
	if len(rec.Attempts) == 0 || !strings.Contains(rec.Attempts[0].Reason, "deadline") {
		t.Errorf("attempts %+v; want the deadline named", rec.Attempts)
	}
}

func TestUpstreamTLSIsVerified(t *testing.T) {
	t.Parallel()
	a := detourtest.NewVendor(t, rewrite.OpenAI, "a")
	b := detourtest.NewVendor(t, rewrite.OpenAI, "b")
	// a has no ca_file: its self-signed certificate must be refused.
	noCA := fmt.Sprintf(`"a": {"shape": "openai", "base_url": %q, "auth": {"from": "client"}}`, a.BaseURL())
	r := newRunner(t, "api.openai.com", openaiPolicy([]string{noCA, upstreamJSON("b", b, "")}, `["a","b"]`, ""))
	resp := post(t, r.srv.URL+"/v1/chat/completions", `{"model":"gpt-4o","messages":[]}`)
	if resp.StatusCode != 200 || a.Calls() != 0 || b.Calls() != 1 {
		t.Errorf("status %d, calls a=%d b=%d; want a refused at the TLS handshake and b answering", resp.StatusCode, a.Calls(), b.Calls())
	}
	if at := r.record(t).Attempts[0]; at.Class != "unreachable" {
		t.Errorf("attempt on unverifiable upstream: %+v", at)
	}
}

func TestClientCancelBeforeCommitIsNotAnUpstreamFailure(t *testing.T) {
	t.Parallel()
	a := detourtest.NewVendor(t, rewrite.OpenAI, "a")
	r := newRunner(t, "api.openai.com", openaiPolicy([]string{upstreamJSON("a", a, "")}, `["a"]`, ""))
	a.Script(fv.Fault{Kind: fv.Hang, Delay: time.Minute})
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, r.srv.URL+"/v1/chat/completions", strings.NewReader(`{"model":"gpt-4o","messages":[]}`))
	go func() {
		// Cancelled once a has the request (or after the poll's bound,
		// which the assertions below then catch).
		eventually(func() bool { return a.InFlight() != 0 })
		cancel()
	}()
	if _, err := http.DefaultClient.Do(req); err == nil {
		t.Fatal("request succeeded after cancel")
	}
	rec := r.record(t)
	if rec.Status != 499 || rec.Attempts[0].Outcome != chain.OutcomeClientGone {
		t.Errorf("record %d %+v", rec.Status, rec.Attempts)
	}
	if _, cooling := r.health.CoolingDown("a", time.Now()); cooling {
		t.Error("an abandoned request put the upstream in cooldown")
	}
}

// rawUpstream serves handler over TLS and returns an upstream JSON entry.
func rawUpstream(t *testing.T, name string, extra string, handler http.HandlerFunc) string {
	t.Helper()
	up := detourtest.NewTLSServer(handler)
	t.Cleanup(up.Close)
	caFile := filepath.Join(t.TempDir(), name+".pem")
	writeCert(t, caFile, up)
	return fmt.Sprintf(`%q: {"shape": "openai", "base_url": %q, "ca_file": %q, "auth": {"from": "client"}%s}`, name, up.URL+"/v1", caFile, extra)
}

func sseHandler(events []string, then func(w http.ResponseWriter, r *http.Request)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, e := range events {
			io.WriteString(w, e)
			w.(http.Flusher).Flush()
		}
		if then != nil {
			then(w, r)
		}
	}
}

const roleChunk = `data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}` + "\n\n"

func TestKeepAlivesBeforeCommitDoNotOutliveFirstByte(t *testing.T) {
	t.Parallel()
	pinger := rawUpstream(t, "a", `, "timeouts": {"first_byte": "300ms"}`, sseHandler([]string{roleChunk}, func(w http.ResponseWriter, r *http.Request) {
		for {
			select {
			case <-r.Context().Done():
				return
			case <-time.After(50 * time.Millisecond):
				io.WriteString(w, ": keep-alive\n\n")
				w.(http.Flusher).Flush()
			}
		}
	}))
	b := detourtest.NewVendor(t, rewrite.OpenAI, "b")
	r := newRunner(t, "api.openai.com", openaiPolicy([]string{pinger, upstreamJSON("b", b, "")}, `["a","b"]`, `, "deadline": "30s"`))
	resp := post(t, r.srv.URL+"/v1/chat/completions", streamBody)
	evs := events(t, resp.Body)
	if resp.StatusCode != 200 || b.Calls() != 1 || len(evs) == 0 {
		t.Fatalf("status %d, b calls %d; want b to answer after a's first_byte ran out", resp.StatusCode, b.Calls())
	}
	if a := r.record(t).Attempts[0]; a.Class != "timeout" || !strings.Contains(a.Reason, "first_byte") {
		t.Errorf("a's attempt = %+v; want timeout first_byte", a)
	}
}

func TestBadResponseFallsOver(t *testing.T) {
	t.Parallel()
	for _, shape := range []rewrite.Shape{rewrite.OpenAI, rewrite.Anthropic, rewrite.Gemini} {
		for _, kind := range []fv.FaultKind{fv.HTML200, fv.Empty200, fv.Truncated200} {
			for _, stream := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/%s/stream=%v", shape, kind, stream), func(t *testing.T) {
					t.Parallel()
					a := detourtest.NewVendor(t, shape, "a")
					b := detourtest.NewVendor(t, shape, "b")
					r := newRunner(t, shape.DefaultHost(), routePolicy(shape, []string{upstreamJSON("a", a, ""), upstreamJSON("b", b, "")}, `["a","b"]`, ""))
					a.Script(fv.Fault{Kind: kind})
					path, body := requestFor(shape, stream)
					resp := post(t, r.srv.URL+path, body)
					all, _ := io.ReadAll(resp.Body)
					if resp.StatusCode != 200 || resp.Header.Get(chain.HeaderAnsweredBy) != "b" || !strings.Contains(string(all), "from b") && !strings.Contains(string(all), "Hello") {
						t.Fatalf("%d by %q: %s; want b's answer", resp.StatusCode, resp.Header.Get(chain.HeaderAnsweredBy), all)
					}
					if got := trail(r.record(t)); got != "a:fallback:bad_response b:ok" {
						t.Errorf("attempts %q", got)
					}
				})
			}
		}
	}
}

// A 200 event stream that is not the vendor's SSE before any content: no
// events at all, an HTML page under text/event-stream, a first event whose
// JSON is cut off.
func TestBadStreamBeforeContentFallsOver(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"no events":       "",
		"html page":       "<!DOCTYPE html>\n<html><body><h1>Sign in</h1></body></html>\n",
		"truncated event": `data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assis` + "\n\n",
	}
	for name, payload := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			raw := rawUpstream(t, "a", "", func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				io.WriteString(w, payload)
			})
			b := detourtest.NewVendor(t, rewrite.OpenAI, "b")
			r := newRunner(t, "api.openai.com", openaiPolicy([]string{raw, upstreamJSON("b", b, "")}, `["a","b"]`, ""))
			resp := post(t, r.srv.URL+"/v1/chat/completions", streamBody)
			all, _ := io.ReadAll(resp.Body)
			if by := resp.Header.Get(chain.HeaderAnsweredBy); by != "b" {
				t.Errorf("answered by %q (%d %q); want b after a bad_response", by, resp.StatusCode, all)
			}
			if got := trail(r.record(t)); got != "a:fallback:bad_response b:ok" {
				t.Errorf("attempts %q", got)
			}
		})
	}
}

func TestHalfEventAtEndOfStream(t *testing.T) {
	t.Parallel()
	half := `data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"tw`
	content := `data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"one"}}]}` + "\n\n"

	t.Run("before commit falls over", func(t *testing.T) {
		t.Parallel()
		a := rawUpstream(t, "a", "", sseHandler([]string{roleChunk, half}, nil))
		b := detourtest.NewVendor(t, rewrite.OpenAI, "b")
		r := newRunner(t, "api.openai.com", openaiPolicy([]string{a, upstreamJSON("b", b, "")}, `["a","b"]`, ""))
		resp := post(t, r.srv.URL+"/v1/chat/completions", streamBody)
		io.Copy(io.Discard, resp.Body)
		if b.Calls() != 1 {
			t.Fatalf("b calls = %d; half an event is not content, a must fall over", b.Calls())
		}
		if at := r.record(t).Attempts[0]; at.Class != "bad_response" {
			t.Errorf("a's attempt = %+v", at)
		}
	})
	t.Run("after commit is dropped, then an error event", func(t *testing.T) {
		t.Parallel()
		a := rawUpstream(t, "a", "", sseHandler([]string{roleChunk, content, half}, nil))
		r := newRunner(t, "api.openai.com", openaiPolicy([]string{a}, `["a"]`, ""))
		resp := post(t, r.srv.URL+"/v1/chat/completions", streamBody)
		evs := events(t, resp.Body)
		last := evs[len(evs)-1]
		if strings.Contains(string(last.Raw), `"tw`) || !rewrite.ParseError(last.Data).Parsed {
			t.Errorf("last event = %q; want only a whole error event", last.Raw)
		}
	})
	t.Run("whole JSON without the final blank line is repaired", func(t *testing.T) {
		t.Parallel()
		a := rawUpstream(t, "a", "", sseHandler([]string{roleChunk, content, `data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n", "data: [DONE]"}, nil))
		r := newRunner(t, "api.openai.com", openaiPolicy([]string{a}, `["a"]`, ""))
		resp := post(t, r.srv.URL+"/v1/chat/completions", streamBody)
		evs := events(t, resp.Body)
		if last := evs[len(evs)-1]; string(last.Data) != "[DONE]" || r.record(t).Error != "" {
			t.Errorf("last event %q, record error %q; want [DONE] and no error", last.Raw, r.record(t).Error)
		}
	})
}

func TestAccountHeadersStayWithTheAppKey(t *testing.T) {
	t.Parallel()
	a := detourtest.NewVendor(t, rewrite.OpenAI, "a")
	b := detourtest.NewVendor(t, rewrite.OpenAI, "b")
	keyFile := filepath.Join(t.TempDir(), "k")
	os.WriteFile(keyFile, []byte("sk-b"), 0o600)
	bJSON := fmt.Sprintf(`"b": {"shape": "openai", "base_url": %q, "ca_file": %q, "auth": {"file": %q}}`, b.BaseURL(), b.CAFile, keyFile)
	r := newRunner(t, "api.openai.com", openaiPolicy([]string{upstreamJSON("a", a, ""), bJSON}, `["a","b"]`, ""))
	a.Script(fv.Fault{Kind: fv.Status, Status: 503})
	req, _ := http.NewRequest(http.MethodPost, r.srv.URL+"/v1/chat/completions", strings.NewReader(`{"model":"gpt-4o","messages":[]}`))
	req.Header.Set("Authorization", "Bearer sk-app")
	req.Header.Set("OpenAI-Organization", "org-app")
	req.Header.Set("Expect", "100-continue")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := a.Requests()[0].Header.Get("OpenAI-Organization"); got != "org-app" {
		t.Errorf("a (auth from client) org header = %q; want the app's", got)
	}
	hb := b.Requests()[0].Header
	if hb.Get("OpenAI-Organization") != "" || hb.Get("Expect") != "" {
		t.Errorf("b got org %q expect %q; want neither", hb.Get("OpenAI-Organization"), hb.Get("Expect"))
	}
}

func crossUpstream(name string, v *detourtest.Vendor, keyFile string, model string) string {
	return fmt.Sprintf(`%q: {"shape": %q, "base_url": %q, "ca_file": %q, "auth": {"file": %q}, "models": {"*": %q}}`,
		name, v.Shape(), v.BaseURL(), v.CAFile, keyFile, model)
}

func TestTranslationSkipsWhatTheTargetCannotTakeAndNotesLossyChanges(t *testing.T) {
	t.Parallel()
	ant := detourtest.NewVendor(t, rewrite.Anthropic, "ant")
	gem := detourtest.NewVendor(t, rewrite.Gemini, "gem")
	keyFile := filepath.Join(t.TempDir(), "k")
	os.WriteFile(keyFile, []byte("k"), 0o600)
	r := newRunner(t, "api.openai.com", openaiPolicy([]string{
		crossUpstream("ant", ant, keyFile, "claude-haiku-4-5"),
		crossUpstream("gem", gem, keyFile, "gemini-2.5-flash"),
	}, `["ant","gem"]`, ""))

	// n > 1: Anthropic cannot; the chain goes on to Gemini.
	resp := post(t, r.srv.URL+"/v1/chat/completions", `{"model":"gpt-4o","n":2,"messages":[{"role":"user","content":"hi"}]}`)
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || ant.Calls() != 0 || gem.Calls() != 1 {
		t.Fatalf("status %d calls ant=%d gem=%d: %s", resp.StatusCode, ant.Calls(), gem.Calls(), body)
	}
	rec := r.record(t)
	if a := rec.Attempts[0]; a.Outcome != chain.OutcomeSkipped || a.Class != "invalid_request" || !strings.Contains(a.Reason, "n > 1") {
		t.Errorf("anthropic attempt = %+v; want skipped invalid_request naming n > 1", a)
	}

	// temperature 1.7 is clamped for Anthropic, and the log says so.
	resp = post(t, r.srv.URL+"/v1/chat/completions", `{"model":"gpt-4o","temperature":1.7,"messages":[{"role":"user","content":"hi"}]}`)
	io.Copy(io.Discard, resp.Body)
	var sent map[string]any
	json.Unmarshal(ant.Requests()[0].Body, &sent)
	if sent["temperature"] != 1.0 {
		t.Errorf("anthropic got temperature %v; want 1", sent["temperature"])
	}
	last := r.record(t)
	if a := last.Attempts[0]; !a.Translated || !strings.Contains(strings.Join(a.Notes, ";"), "temperature") {
		t.Errorf("attempt = %+v; want a translation note about temperature", a)
	}
}

func TestOnlyChatRequestsAreTranslated(t *testing.T) {
	t.Parallel()
	// The moderations endpoint has no meaning at Anthropic; this upstream
	// is overloaded for every path. (The Responses API and embeddings are
	// translated: see responses_test.go and the embeddings tests.)
	oa := rawUpstream(t, "oa", "", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(503)
		io.WriteString(w, `{"error":{"message":"The engine is currently overloaded","type":"server_error","param":null,"code":"server_is_overloaded"}}`)
	})
	ant := detourtest.NewVendor(t, rewrite.Anthropic, "ant")
	keyFile := filepath.Join(t.TempDir(), "k")
	os.WriteFile(keyFile, []byte("k"), 0o600)
	pol := fmt.Sprintf(`{"upstreams": {%s, %s},
  "routes": [{"name": "resp", "match": {"host": "api.openai.com", "path": "/v1/moderations"}, "chain": ["oa", "ant"]}]}`,
		oa, crossUpstream("ant", ant, keyFile, "claude-haiku-4-5"))
	r := newRunner(t, "api.openai.com", pol)
	resp := post(t, r.srv.URL+"/v1/moderations", `{"model":"omni-moderation-latest","input":"hi"}`)
	io.Copy(io.Discard, resp.Body)
	if ant.Calls() != 0 {
		t.Error("a moderations request was sent to an Anthropic upstream")
	}
	if a := r.record(t).Attempts[1]; a.Outcome != chain.OutcomeSkipped || !strings.Contains(a.Reason, "/v1/moderations goes to openai-shaped upstreams only") {
		t.Errorf("attempt = %+v", a)
	}
}

func TestARefusedTranslatedRequestFallsOver(t *testing.T) {
	t.Parallel()
	oa := detourtest.NewVendor(t, rewrite.OpenAI, "oa")
	gem := detourtest.NewVendor(t, rewrite.Gemini, "gem")
	oa.SetDefault(fv.Fault{Kind: fv.Status, Status: 400, Class: fv.ClassInvalidRequest})
	keyFile := filepath.Join(t.TempDir(), "k")
	os.WriteFile(keyFile, []byte("k"), 0o600)
	pol := fmt.Sprintf(`{"upstreams": {%s, %s},
  "routes": [{"name": "m", "match": {"host": "api.anthropic.com"}, "chain": ["oa", "gem"]}]}`,
		crossUpstream("oa", oa, keyFile, "gpt-4o"), crossUpstream("gem", gem, keyFile, "gemini-2.5-flash"))
	r := newRunner(t, "api.anthropic.com", pol)
	resp := post(t, r.srv.URL+"/v1/messages", `{"model":"claude-sonnet-4-5","max_tokens":50,"messages":[{"role":"user","content":"hi"}]}`)
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || gem.Calls() != 1 || !strings.Contains(string(body), "Hello from gem.") {
		t.Fatalf("status %d gem calls %d body %s; want the Gemini upstream to answer after the translated 400", resp.StatusCode, gem.Calls(), body)
	}
	if a := r.record(t).Attempts[0]; a.Outcome != chain.OutcomeFallback || !strings.Contains(a.Reason, "translated request refused") {
		t.Errorf("attempt = %+v", a)
	}
}
