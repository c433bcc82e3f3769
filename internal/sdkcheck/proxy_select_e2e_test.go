package sdkcheck

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v3/option"

	"github.com/detour-proxy/detour/internal/chain"
	"github.com/detour-proxy/detour/internal/detourtest"
	fv "github.com/detour-proxy/detour/internal/fakevendor"
	"github.com/detour-proxy/detour/internal/health"
	"github.com/detour-proxy/detour/rewrite"
)

// selectPolicy routes the app's chat completions over two OpenAI fakes,
// primary then second, with a select section.
func selectPolicy(primary, second *detourtest.Vendor, sel string) string {
	return fmt.Sprintf(`{
  "upstreams": {
    "primary": {"shape": "openai", "base_url": %q, "ca_file": %q, "auth": {"from": "client"}},
    "second":  {"shape": "openai", "base_url": %q, "ca_file": %q, "auth": {"from": "client"}}
  },
  "routes": [{"name": "chat", "match": {"host": "api.openai.com", "path": "/v1/chat/completions"}, "chain": ["primary", "second"], "select": %s}]
}`, primary.BaseURL(), primary.CAFile, second.BaseURL(), second.CAFile, sel)
}

// A 10 % canary, through detour: over 1,000 requests the canary answers a
// share within four standard errors of 10 % (the draws come from a seeded
// generator, so the count is the same on every run), and every request is
// answered by one of the two. The official SDK sends the first 100 and
// parses both upstreams' answers; the other 900 are the SDK's own request
// body posted by plain net/http through the same HTTPS_PROXY, answered in
// the same wire format. The share is the selection's, not the client's,
// and under -race an SDK round trip costs nearly twice a plain one.
//
// 1,000 draws are enough: with this seed a canary weighted 15 or 5 instead
// of 10 is off by 5.8 and 5.5 standard errors and fails the bound (checked
// by changing the weights in the policy below).
func TestE2EWeightedCanaryWithOpenAISDK(t *testing.T) {
	t.Parallel()
	primary := detourtest.NewVendor(t, rewrite.OpenAI, "primary")
	canary := detourtest.NewVendor(t, rewrite.OpenAI, "canary")
	rng := rand.New(rand.NewPCG(10, 2000))
	var mu sync.Mutex
	h := detourtest.StartWith(t, selectPolicy(primary, canary, `{"strategy": "weighted", "weights": {"primary": 90, "second": 10}}`),
		detourtest.Options{Rand: func() uint64 { mu.Lock(); defer mu.Unlock(); return rng.Uint64() }})
	client := openaiThrough(h)
	const n, viaSDK = 1000, 100
	answered := map[string]int{}
	for i := range viaSDK {
		got, err := client.Chat.Completions.New(detourtest.TestContext(t), chatParams())
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if c := got.Choices[0].Message.Content; c != "Hello from primary." && c != "Hello from canary." {
			t.Fatalf("request %d: answer %q", i, c)
		}
		answered[got.Choices[0].Message.Content]++
	}
	if len(answered) != 2 {
		t.Fatalf("the SDK's %d requests were answered %v; want answers from both upstreams", viaSDK, answered)
	}
	body, err := chatParams().MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	plain := h.Client()
	for i := viaSDK; i < n; i++ {
		if c := postForContent(t, plain, string(body)); c != "Hello from primary." && c != "Hello from canary." {
			t.Fatalf("request %d: answer %q", i, c)
		}
	}
	got := canary.Calls()
	t.Logf("the canary answered %d of %d requests (%d of the SDK's %d)", got, n, answered["Hello from canary."], viaSDK)
	sigma := math.Sqrt(n * 0.1 * 0.9)
	if z := (float64(got) - n*0.1) / sigma; math.Abs(z) > 4 {
		t.Errorf("canary answered %d of %d; want 10 %% within four standard errors (z = %.2f)", got, n, z)
	}
	if primary.Calls()+got != n {
		t.Errorf("primary %d + canary %d calls; want %d", primary.Calls(), got, n)
	}
}

// postForContent posts an OpenAI chat completion request body through c
// and returns the answer's first choice's content; anything but a 200
// with a chat completion fails the test.
func postForContent(t *testing.T, c *http.Client, body string) string {
	t.Helper()
	resp, err := c.Do(detourtest.ChatRequest(detourtest.TestContext(t), body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || resp.StatusCode != http.StatusOK || len(got.Choices) == 0 {
		t.Fatalf("answer %s, %+v (%v); want a 200 chat completion", resp.Status, got, err)
	}
	return got.Choices[0].Message.Content
}

// virtualClock is the runner's clock in the scored test: it moves only
// when a fake vendor serves a request (by that upstream's latency) or the
// test moves it, so every latency the window records is exact.
type virtualClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *virtualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *virtualClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// slowVendor is a fake whose every answer takes latency on clk.
func slowVendor(t *testing.T, name string, clk *virtualClock, latency *atomic.Int64) *detourtest.Vendor {
	return detourtest.NewVendorAround(t, rewrite.OpenAI, fv.Options{Name: name}, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			clk.Advance(time.Duration(latency.Load()))
			next.ServeHTTP(w, r)
		})
	})
}

// Scored, through detour, with the official SDK: a primary whose p95
// becomes 3× the backup's loses first place within min_samples requests,
// and wins it back once it has recovered and its slow samples have aged
// out of its window. The latencies are moves of the runner's clock made by
// the fakes, not sleeps: the run is exact, and fast.
func TestE2EScoredSlowPrimaryLosesAndWinsBackWithOpenAISDK(t *testing.T) {
	t.Parallel()
	const minSamples = 10
	clk := &virtualClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	var primaryLat, backupLat atomic.Int64
	primaryLat.Store(int64(100 * time.Millisecond))
	backupLat.Store(int64(100 * time.Millisecond))
	primary := slowVendor(t, "primary", clk, &primaryLat)
	backup := slowVendor(t, "backup", clk, &backupLat)
	h := detourtest.StartWith(t, selectPolicy(primary, backup, fmt.Sprintf(`{"strategy": "scored", "score": {"latency": 1}, "min_samples": %d}`, minSamples)),
		detourtest.Options{Now: clk.Now})
	client := openaiThrough(h)
	first := func() string {
		t.Helper()
		var resp *http.Response
		if _, err := client.Chat.Completions.New(detourtest.TestContext(t), chatParams(), option.WithResponseInto(&resp)); err != nil {
			t.Fatal(err)
		}
		return resp.Header.Get(chain.HeaderAnsweredBy)
	}
	// Each is on trial for min_samples requests (the backup is the
	// upstream named second); then the tie keeps chain order.
	for i := range 2*minSamples + 5 {
		want := "primary"
		if i >= minSamples && i < 2*minSamples {
			want = "second"
		}
		if got := first(); got != want {
			t.Fatalf("request %d answered by %s; want %s", i, got, want)
		}
	}

	primaryLat.Store(int64(300 * time.Millisecond))
	lost := 0
	for i := 1; i <= minSamples && lost == 0; i++ {
		if first() == "second" {
			lost = i
		}
	}
	if lost == 0 {
		t.Fatalf("a primary with 3× the backup's latency still answers first after %d requests", minSamples)
	}
	t.Logf("the slow primary lost first place after %d of its slow requests", lost-1)

	primaryLat.Store(int64(100 * time.Millisecond))
	// A request every 10 virtual seconds: the backup answers them, the
	// primary's window ages, and the primary is tried again and wins.
	start, run := clk.Now(), 0
	for run < minSamples+5 {
		if clk.Now().Sub(start) > 2*health.WindowAge {
			t.Fatalf("the recovered primary has not won first place back after %s of virtual time", 2*health.WindowAge)
		}
		clk.Advance(10 * time.Second)
		if first() == "primary" {
			run++
		} else {
			run = 0
		}
	}
	var withSelection int
	for _, l := range h.LogLines("request") {
		if sel, ok := l["selection"].(map[string]any); ok && sel["strategy"] == "scored" {
			withSelection++
		}
	}
	if withSelection == 0 {
		t.Error("no request log line carries the scored selection")
	}
}

// detour serve's /status shows each upstream's selection window, fed by
// the runner's attempts (the window policy explain scores from).
func TestServeStatusShowsSelectionWindows(t *testing.T) {
	t.Parallel()
	primary := detourtest.NewVendor(t, rewrite.OpenAI, "primary")
	backup := detourtest.NewVendor(t, rewrite.OpenAI, "backup")
	h := detourtest.Start(t, detourtest.TwoUpstreams(t, rewrite.OpenAI, primary, backup, ""))
	if _, err := openaiThrough(h).Chat.Completions.New(detourtest.TestContext(t), chatParams()); err != nil {
		t.Fatal(err)
	}
	h.WaitRecord(t, h.LastRequestID(t))
	resp, err := http.Get(h.AdminURL.String() + "/status")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st struct {
		Upstreams map[string]struct {
			Window *struct {
				Samples int `json:"samples"`
			} `json:"window"`
		} `json:"upstreams"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	if w := st.Upstreams["primary"].Window; w == nil || w.Samples != 1 {
		t.Errorf("primary's window = %+v; want one sample", w)
	}
}
