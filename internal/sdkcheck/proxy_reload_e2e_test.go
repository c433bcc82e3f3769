package sdkcheck

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/detour-proxy/detour/internal/admin"
	"github.com/detour-proxy/detour/internal/detourtest"
	"github.com/detour-proxy/detour/internal/mitm"
	"github.com/detour-proxy/detour/internal/testsupport"
	"github.com/detour-proxy/detour/proxy"
	"github.com/detour-proxy/detour/rewrite"
)

// TestHotReloadWithTheLogInThePolicyDirectoryUnderLoad is `detour run` with
// its policy in $TMPDIR: detour logs to a file next to the policy, a line
// per request, while the app keeps sending requests. Edits still apply
// within the debounce, a broken edit is logged and recorded once, and
// /policy/history keeps the ok entries. Before, every log line reset the
// debounce, so no edit applied while requests flowed.
func TestHotReloadWithTheLogInThePolicyDirectoryUnderLoad(t *testing.T) {
	t.Parallel()
	a := detourtest.NewVendor(t, rewrite.OpenAI, "a")
	b := detourtest.NewVendor(t, rewrite.OpenAI, "b")
	dir := t.TempDir()
	path := filepath.Join(dir, "policy.json")
	write := func(content string) {
		t.Helper()
		if err := os.WriteFile(path+".tmp", []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path+".tmp", path); err != nil {
			t.Fatal(err)
		}
	}
	pol := func(version, chain string) string {
		return fmt.Sprintf(`{
  "version": %q,
  "ca": {"cert_file": "ca.pem", "key_file": "ca-key.pem"},
  "upstreams": {
    "a": {"shape": "openai", "base_url": %q, "ca_file": %q, "auth": {"from": "client"}},
    "b": {"shape": "openai", "base_url": %q, "ca_file": %q, "auth": {"from": "client"}}
  },
  "routes": [{"name": "r", "match": {"host": "api.openai.com", "path": "/v1/chat/completions"}, "chain": %s}]
}`, version, a.BaseURL(), a.CAFile, b.BaseURL(), b.CAFile, chain)
	}
	write(pol("v1", `["a", "b"]`))
	logPath := filepath.Join(dir, "detour-run-1.log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { logFile.Close() })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	adminLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan *mitm.CA, 1)
	done := make(chan error, 1)
	go func() {
		done <- proxy.Serve(ctx, proxy.Options{
			PolicyPath: path, Stderr: logFile, Listener: ln, AdminListener: adminLn,
			Ready: func(net.Addr, *mitm.CA) { ready <- nil },
		})
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(proxy.DrainTimeout + 5*time.Second):
			t.Error("detour did not stop")
		}
	})
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("detour did not start: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("detour did not start within 10s")
	}

	client := openai.NewClient(
		option.WithBaseURL("http://"+ln.Addr().String()+"/openai/v1/"),
		option.WithAPIKey(detourtest.AppOpenAIKey),
		option.WithMaxRetries(0),
	)
	reqCtx := detourtest.TestContext(t)
	answer := func() (string, error) {
		got, err := client.Chat.Completions.New(reqCtx, chatParams())
		if err != nil {
			return "", err
		}
		return got.Choices[0].Message.Content, nil
	}
	// The load: requests back to back, each one a log line next to the
	// policy, until the test is done.
	stop := make(chan struct{})
	var loadWG sync.WaitGroup
	var loadErr error
	loadWG.Add(1)
	go func() {
		defer loadWG.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := answer(); err != nil && loadErr == nil {
				loadErr = err
			}
		}
	}()
	stopLoad := func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		loadWG.Wait()
	}
	t.Cleanup(stopLoad)
	waitAnswer := func(want string) time.Duration {
		t.Helper()
		start := time.Now()
		var got string
		var err error
		if !testsupport.Poll(5*time.Second, func() bool {
			got, err = answer()
			return err == nil && got == want
		}) {
			t.Fatalf("answer %q, %v 5s after the edit; want %q", got, err, want)
		}
		return time.Since(start)
	}
	refusals := func() int {
		b, err := os.ReadFile(logPath)
		if err != nil {
			t.Fatal(err)
		}
		return strings.Count(string(b), `"message":"policy reload refused; keeping the last good policy"`)
	}

	write(pol("v2", `["b", "a"]`))
	took := waitAnswer("Hello from b.")
	t.Logf("v2 in effect %v after the write, under load", took.Round(time.Millisecond))

	write(`{"upstreams": {}, "routes": [], "bogus": 1}`)
	if !testsupport.Poll(5*time.Second, func() bool { return refusals() != 0 }) {
		t.Fatal("the broken edit was not logged as refused within 5s")
	}
	write(pol("v3", `["a", "b"]`))
	waitAnswer("Hello from a.")
	stopLoad()
	if loadErr != nil {
		t.Errorf("a request failed during the reloads: %v", loadErr)
	}

	if n := refusals(); n != 1 {
		t.Errorf("the refusal was logged %d times; want once", n)
	}
	resp, err := http.Get("http://" + adminLn.Addr().String() + "/policy/history")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var hist admin.HistoryJSON
	if err := json.NewDecoder(resp.Body).Decode(&hist); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range hist.Entries {
		got = append(got, e.Trigger+" "+e.Result+" "+e.Version)
	}
	if want := "watch ok v3; watch refused ; watch ok v2; start ok v1"; strings.Join(got, "; ") != want {
		t.Errorf("history = %q; want %q", strings.Join(got, "; "), want)
	}
}
