package fakevendor

import (
	"context"
	"math"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/detour-proxy/detour/rewrite"
)

func TestScriptThenDefault(t *testing.T) {
	t.Parallel()
	v, srv := serve(t, rewrite.OpenAI, Options{})
	v.Script(Fault{Kind: Status, Status: 429}, Fault{Kind: Status, Status: 500})
	v.SetDefault(Fault{Kind: Status, Class: ClassOverloaded})
	var got []int
	for range 4 {
		got = append(got, ask(t, srv, rewrite.OpenAI, false).status)
	}
	if want := []int{429, 500, 503, 503}; !reflect.DeepEqual(got, want) {
		t.Errorf("statuses = %v; want %v", got, want)
	}
	v.SetDefault(Fault{})
	if s := ask(t, srv, rewrite.OpenAI, false).status; s != 200 {
		t.Errorf("after SetDefault(OK): %d", s)
	}
	reqs := v.Requests()
	if len(reqs) != 5 || reqs[0].Fault.Status != 429 || reqs[2].Fault.Class != ClassOverloaded || reqs[4].Fault != (Fault{}) {
		t.Errorf("recorded faults: %+v", reqs)
	}
}

func TestCallsAndRequests(t *testing.T) {
	t.Parallel()
	v, srv := serve(t, rewrite.OpenAI, Options{})
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/openai/v1/chat/completions?trace=1", strings.NewReader(`{"model":"gpt-4o-mini","stream":true}`))
	req.Header.Set("Authorization", "Bearer sk-one")
	req.Header.Set("X-Custom", "a")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)
	if resp.StatusCode != 200 {
		t.Fatalf("any prefix before /chat/completions: status %d", resp.StatusCode)
	}
	mustPost(t, srv.URL+"/nowhere", `{}`)
	if v.Calls() != 2 {
		t.Fatalf("Calls = %d; want 2 (every path counts)", v.Calls())
	}

	reqs := v.Requests()
	r := reqs[0]
	if r.Method != "POST" || r.Path != "/openai/v1/chat/completions" || r.RawQuery != "trace=1" ||
		r.Model != "gpt-4o-mini" || !r.Stream || string(r.Body) != `{"model":"gpt-4o-mini","stream":true}` ||
		r.Header.Get("X-Custom") != "a" || r.RequestID != "req_fake0000000000000001" {
		t.Errorf("recorded %+v", r)
	}
	if reqs[1].Path != "/nowhere" || reqs[1].Model != "" {
		t.Errorf("recorded 404 %+v", reqs[1])
	}

	// Requests returns copies: changing them changes nothing recorded.
	r.Header.Set("X-Custom", "changed")
	r.Body[0] = 'X'
	again := v.Requests()[0]
	if again.Header.Get("X-Custom") != "a" || again.Body[0] != '{' {
		t.Errorf("Requests did not return copies: %+v", again)
	}

	v.Script(Fault{Kind: Hang})
	v.SetRandomFaults([]WeightedFault{{Fault{Kind: Hang}, 1}}, 1)
	v.SetDefault(Fault{Kind: Hang})
	v.Reset()
	if v.Calls() != 0 || len(v.Requests()) != 0 {
		t.Errorf("after Reset: %d calls, %d requests", v.Calls(), len(v.Requests()))
	}
	if s := ask(t, srv, rewrite.OpenAI, false).status; s != 200 {
		t.Errorf("after Reset the vendor still faults: %d", s)
	}
}

func TestConcurrentScript(t *testing.T) {
	t.Parallel()
	v, srv := serve(t, rewrite.Anthropic, Options{})
	const n, faults = 40, 15
	for range faults {
		v.Script(Fault{Kind: Status, Class: ClassOverloaded})
	}
	var wg sync.WaitGroup
	statuses := make(chan int, n)
	path, body := pathAndBody(rewrite.Anthropic, true)
	for range n {
		wg.Go(func() {
			r, err := post(t, context.Background(), srv.URL+path, body)
			if err != nil {
				t.Error(err)
			}
			statuses <- r.status
		})
	}
	wg.Wait()
	close(statuses)
	count := map[int]int{}
	for s := range statuses {
		count[s]++
	}
	if count[529] != faults || count[200] != n-faults {
		t.Errorf("statuses %v; want %d × 529 and %d × 200", count, faults, n-faults)
	}
	if v.Calls() != n || len(v.Requests()) != n {
		t.Errorf("Calls %d, recorded %d; want %d", v.Calls(), len(v.Requests()), n)
	}
}

func TestRandomFaultsAreSeeded(t *testing.T) {
	t.Parallel()
	fs, err := ParseFaults("429:insufficient_quota=0.2,529=0.1,html=0.1")
	if err != nil {
		t.Fatal(err)
	}
	run := func(seed int64) []Fault {
		v, srv := serve(t, rewrite.Gemini, Options{})
		v.SetRandomFaults(fs, seed)
		for range 60 {
			ask(t, srv, rewrite.Gemini, false)
		}
		var out []Fault
		for _, r := range v.Requests() {
			out = append(out, r.Fault)
		}
		return out
	}
	a, b, c := run(7), run(7), run(8)
	if !reflect.DeepEqual(a, b) {
		t.Error("the same seed gave different fault sequences")
	}
	if reflect.DeepEqual(a, c) {
		t.Error("different seeds gave the same fault sequence")
	}

	// Reseeding restarts the sequence; scripted faults come first and do
	// not draw.
	v, srv := serve(t, rewrite.Gemini, Options{})
	v.SetRandomFaults(fs, 7)
	v.Script(Fault{Kind: Status, Status: 418})
	if s := ask(t, srv, rewrite.Gemini, false).status; s != 418 {
		t.Errorf("scripted fault not first: %d", s)
	}
	for range 60 {
		ask(t, srv, rewrite.Gemini, false)
	}
	var got []Fault
	for _, r := range v.Requests()[1:] {
		got = append(got, r.Fault)
	}
	if !reflect.DeepEqual(got, a) {
		t.Error("a scripted fault shifted the random sequence")
	}
}

func TestRandomFaultFrequencies(t *testing.T) {
	t.Parallel()
	v := New(rewrite.OpenAI, Options{})
	fs := []WeightedFault{{Fault{Kind: Status, Status: 429}, 0.2}, {Fault{Kind: Hang}, 0.05}}
	v.SetRandomFaults(fs, 42)
	v.SetDefault(Fault{Kind: SlowFirstByte})
	const n = 20000
	count := map[FaultKind]int{}
	for range n {
		v.mu.Lock()
		count[v.nextFault().Kind]++
		v.mu.Unlock()
	}
	for kind, p := range map[FaultKind]float64{Status: 0.2, Hang: 0.05, SlowFirstByte: 0.75} {
		if got := float64(count[kind]) / n; math.Abs(got-p) > 0.02 {
			t.Errorf("%s drawn %.3f of the time; want about %.2f", kind, got, p)
		}
	}
}

func TestSplitText(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		text string
		n    int
		want []string
	}{
		{"Hello from alpha.", 3, []string{"Hello", " from", " alpha."}},
		{"Hello from alpha.", 1, []string{"Hello from alpha."}},
		{"Hello from alpha.", 2, []string{"Hello", " from alpha."}},
		{"one two three four five", 2, []string{"one two", " three four five"}},
		{"one  two\nthree", 3, []string{"one", "  two", "\nthree"}},
		{"Hi!", 3, []string{"H", "i", "!"}},
		{"Hi!", 5, []string{"H", "i", "!"}},
		{"héllo", 2, []string{"hé", "llo"}},
		{"", 3, []string{""}},
		{"x", 0, []string{"x"}},
	} {
		got := splitText(tc.text, tc.n)
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("splitText(%q, %d) = %q; want %q", tc.text, tc.n, got, tc.want)
		}
		if strings.Join(got, "") != tc.text {
			t.Errorf("splitText(%q, %d) loses text: %q", tc.text, tc.n, got)
		}
	}
}

func TestNew(t *testing.T) {
	t.Parallel()
	v := New(rewrite.Anthropic, Options{})
	if v.Shape() != rewrite.Anthropic || v.Name() != "anthropic" || v.Text() != "Hello from anthropic." {
		t.Errorf("defaults: shape %q name %q text %q", v.Shape(), v.Name(), v.Text())
	}
	defer func() {
		if recover() == nil {
			t.Error("New with an unknown shape did not panic")
		}
	}()
	New("bedrock", Options{})
}

func TestStreamSingleChunkStall(t *testing.T) {
	t.Parallel()
	// One delta: the partial stream carries it without finishReason, so the
	// resumed Gemini stream ends with a finish-only chunk.
	v, srv := serve(t, rewrite.Gemini, Options{Chunks: 1})
	v.Script(Fault{Kind: StreamStall, Delay: 10 * time.Millisecond})
	events := parseSSE(t, ask(t, srv, rewrite.Gemini, true).body)
	if len(events) != 2 || strings.Contains(events[0].data, "finishReason") ||
		!strings.Contains(events[1].data, `"parts":[{"text":""}]},"finishReason":"STOP"`) {
		t.Errorf("events = %+v", events)
	}
}
