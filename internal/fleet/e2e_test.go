package fleet_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/detour-proxy/detour/internal/detourtest"
	"github.com/detour-proxy/detour/internal/fakevendor"
	"github.com/detour-proxy/detour/internal/testsupport"
	"github.com/detour-proxy/detour/rewrite"
)

// fleetPolicy is a primary and a backup for OpenAI's chat completions,
// sharing state through redisURL under prefix.
func fleetPolicy(redisURL, prefix string, primary, backup *detourtest.Vendor) string {
	return fmt.Sprintf(`{
  "state": {"backend": "redis", "redis": {"url": %q, "key_prefix": %q, "timeout": "200ms"}},
  "upstreams": {
    "primary": {"shape": "openai", "base_url": %q, "ca_file": %q, "auth": {"none": true}},
    "backup":  {"shape": "openai", "base_url": %q, "ca_file": %q, "auth": {"none": true}}
  },
  "routes": [{"name": "chat", "match": {"host": "api.openai.com", "path": "/v1/chat/completions"}, "chain": ["primary", "backup"]}]
}`, redisURL, prefix, primary.BaseURL(), primary.CAFile, backup.BaseURL(), backup.CAFile)
}

const chatBody = `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`

// ask sends one chat request in base-URL mode and returns the status and
// the upstream that answered.
func ask(c *http.Client, h *detourtest.Harness) (int, string, error) {
	req, _ := http.NewRequest(http.MethodPost, "http://"+h.ProxyURL.Host+"/openai/v1/chat/completions", strings.NewReader(chatBody))
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, resp.Header.Get("X-Detour-Answered-By"), nil
}

// statusOf reads /status's upstream entry.
func statusOf(t *testing.T, h *detourtest.Harness, name string) map[string]any {
	t.Helper()
	resp, err := http.Get(h.AdminURL.String() + "/status")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st struct {
		Upstreams map[string]map[string]any `json:"upstreams"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	return st.Upstreams[name]
}

// TestFleetQuotaCooldownSparesThePrimary: three detours share one Redis. A
// quota 429 seen by one cools the primary down in all three (/status says
// where from), and the other two never call the primary during the
// cooldown.
func TestFleetQuotaCooldownSparesThePrimary(t *testing.T) {
	t.Parallel()
	r := testsupport.StartRedis(t)
	primary := detourtest.NewVendor(t, rewrite.OpenAI, "primary")
	backup := detourtest.NewVendor(t, rewrite.OpenAI, "backup")
	primary.SetDefault(fakevendor.Fault{Kind: fakevendor.Status, Class: fakevendor.ClassInsufficientQuota})
	pol := fleetPolicy(r.URL(), "e2e-quota:", primary, backup)
	var hs []*detourtest.Harness
	for range 3 {
		h := detourtest.Start(t, pol)
		testsupport.Eventually(t, 10*time.Second, "the state backend is up", func() bool {
			return strings.Contains(metrics(t, h), "\ndetour_state_backend_up 1\n")
		})
		hs = append(hs, h)
	}
	c := &http.Client{}
	if st, by, err := ask(c, hs[0]); err != nil || st != 200 || by != "backup" {
		t.Fatalf("first request: %d answered by %q, %v; want 200 from backup", st, by, err)
	}
	if n := primary.Calls(); n != 1 {
		t.Fatalf("primary called %d times; want 1", n)
	}
	for i, h := range hs {
		testsupport.Eventually(t, 10*time.Second, "detour "+strconv.Itoa(i)+" shows the cooldown", func() bool {
			return statusOf(t, h, "primary")["cooldown_until"] != nil
		})
		want := "fleet"
		if i == 0 {
			want = "local"
		}
		if got := statusOf(t, h, "primary")["cooldown_source"]; got != want {
			t.Errorf("detour %d: cooldown_source %v; want %q", i, got, want)
		}
	}
	for round := range 5 {
		for i, h := range hs[1:] {
			if st, by, err := ask(c, h); err != nil || st != 200 || by != "backup" {
				t.Errorf("round %d detour %d: %d answered by %q, %v; want 200 from backup", round, i+1, st, by, err)
			}
		}
	}
	if n := primary.Calls(); n != 1 {
		t.Errorf("the primary was called %d times; want only the first call: the fleet knew it was out of quota", n)
	}
}

// TestFleetSurvivesRedis: requests keep being answered while Redis is
// killed mid-load and restarted empty; after the restart a cooldown started
// during the outage reaches the other detour. With Redis behind a proxy
// that delays every byte, the healthy path does not use Redis at all.
func TestFleetSurvivesRedis(t *testing.T) {
	t.Parallel()
	r := testsupport.StartRedis(t)
	slow := startDelayProxy(t, r.Addr())
	primary := detourtest.NewVendor(t, rewrite.OpenAI, "primary")
	backup := detourtest.NewVendor(t, rewrite.OpenAI, "backup")
	pol := fleetPolicy("redis://"+slow.addr, "e2e-outage:", primary, backup)
	hs := []*detourtest.Harness{detourtest.Start(t, pol), detourtest.Start(t, pol)}
	for _, h := range hs {
		testsupport.Eventually(t, 10*time.Second, "the state backend is up", func() bool {
			return strings.Contains(metrics(t, h), "\ndetour_state_backend_up 1\n")
		})
	}

	// Healthy path through a slow Redis (each way 40 ms: any command on
	// the path would add 80 ms, yet stay within the 200 ms timeout, so the
	// store stays up and nothing falls back): no command beyond the
	// members' background checks (EXISTS of the marker key).
	slow.delay.Store(int64(40 * time.Millisecond))
	before, err := r.Commands()
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{}
	for i := range 40 {
		if st, by, err := ask(c, hs[i%2]); err != nil || st != 200 || by != "primary" {
			t.Fatalf("healthy request %d: %d from %q, %v", i, st, by, err)
		}
	}
	after, err := r.Commands()
	if err != nil {
		t.Fatal(err)
	}
	for name, n := range after {
		if !background[name] && n != before[name] {
			t.Errorf("healthy requests ran %s %d times in Redis; want 0 commands on the healthy path", name, n-before[name])
		}
	}
	slow.delay.Store(0)

	// Kill Redis under load: no request may fail.
	var failed, done atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := &http.Client{}
			for {
				select {
				case <-stop:
					return
				default:
				}
				if st, _, err := ask(c, hs[w%2]); err != nil || st != 200 {
					failed.Add(1)
				}
				done.Add(1)
			}
		}()
	}
	testsupport.Eventually(t, 10*time.Second, "load is running", func() bool { return done.Load() > 20 })
	r.Kill()
	for _, h := range hs {
		testsupport.Eventually(t, 10*time.Second, "the state backend is down", func() bool {
			return strings.Contains(metrics(t, h), "\ndetour_state_backend_up 0\n")
		})
	}
	mark := done.Load()
	testsupport.Eventually(t, 10*time.Second, "load goes on", func() bool { return done.Load() > mark+20 })
	// A quota cooldown starts on one detour while Redis is away.
	primary.Script(fakevendor.Fault{Kind: fakevendor.Status, Class: fakevendor.ClassInsufficientQuota})
	testsupport.Eventually(t, 10*time.Second, "a detour cools the primary down", func() bool {
		return statusOf(t, hs[0], "primary")["cooldown_until"] != nil || statusOf(t, hs[1], "primary")["cooldown_until"] != nil
	})
	r.Restart()
	for i, h := range hs {
		testsupport.Eventually(t, 10*time.Second, "detour "+strconv.Itoa(i)+" has the cooldown after the resync", func() bool {
			return statusOf(t, h, "primary")["cooldown_until"] != nil
		})
	}
	close(stop)
	wg.Wait()
	if n := failed.Load(); n != 0 {
		t.Errorf("%d of %d app requests failed while Redis was killed and restarted; want 0", n, done.Load())
	}
	for i, h := range hs {
		if n := strings.Count(h.Log(), "state backend unreachable"); n != 1 {
			var lines []string
			for _, l := range strings.Split(h.Log(), "\n") {
				if strings.Contains(l, `"component":"state"`) {
					lines = append(lines, l)
				}
			}
			t.Errorf("detour %d logged the outage %d times; want once:\n%s", i, n, strings.Join(lines, "\n"))
		}
	}
}

// background are the commands a member sends on its own, whatever the
// traffic: the once-a-second check, the periodic resynchronisation, and a
// new pooled connection's handshake.
var background = map[string]bool{"exists": true, "scan": true, "get": true, "set": true, "hello": true, "client|setinfo": true, "ping": true, "subscribe": true}

func metrics(t *testing.T, h *detourtest.Harness) string {
	t.Helper()
	resp, err := http.Get(h.AdminURL.String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// delayProxy is a loopback TCP proxy in front of Redis that holds every
// chunk for delay before passing it on.
type delayProxy struct {
	addr  string
	delay atomic.Int64
}

func startDelayProxy(t *testing.T, target string) *delayProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &delayProxy{addr: ln.Addr().String()}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.serve(c, target)
		}
	}()
	return p
}

func (p *delayProxy) serve(c net.Conn, target string) {
	defer c.Close()
	u, err := net.Dial("tcp", target)
	if err != nil {
		return
	}
	defer u.Close()
	pipe := func(dst, src net.Conn) {
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				if d := time.Duration(p.delay.Load()); d > 0 {
					time.Sleep(d) // the delay under test, not a wait for a state
				}
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				dst.Close()
				src.Close()
				return
			}
		}
	}
	go pipe(u, c)
	pipe(c, u)
}
