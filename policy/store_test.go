package policy

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/detour-proxy/detour/internal/testsupport"
)

func policyWithVersion(v string) string {
	return strings.Replace(goodPolicy, `"version": "t1"`, `"version": "`+v+`"`, 1)
}

func compileTest(name string, data []byte) (*Compiled, error) {
	return Compile(name, data, testOptions())
}

// TestWatchFollowsConfigMapSymlinkSwap reproduces how the kubelet updates a
// ConfigMap volume: files are symlinks through "..data", which is swapped
// atomically to a new timestamped directory.
func TestWatchFollowsConfigMapSymlinkSwap(t *testing.T) {
	dir := t.TempDir()
	writeGen := func(gen, content string) {
		d := filepath.Join(dir, gen)
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "policy.json"), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		tmp := filepath.Join(dir, "..data_tmp")
		if err := os.Symlink(gen, tmp); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
			t.Fatal(err)
		}
	}
	writeGen("..2026_11_30_01", policyWithVersion("v1"))
	if err := os.Symlink(filepath.Join("..data", "policy.json"), filepath.Join(dir, "policy.json")); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "policy.json")
	first, err := compileTest(path, mustRead(t, path))
	if err != nil {
		t.Fatal(err)
	}
	s := NewStore(first)
	var mu sync.Mutex
	var results []ReloadResult
	startWatch(t, s, path, compileTest, WatchOptions{Debounce: 20 * time.Millisecond, OnResult: func(r ReloadResult) {
		mu.Lock()
		results = append(results, r)
		mu.Unlock()
	}})

	writeGen("..2026_11_30_02", policyWithVersion("v2"))
	waitFor(t, func() bool { return s.Load().Version == "v2" }, "ConfigMap swap to v2")

	writeGen("..2026_11_30_03", `{"upstreams": 1}`)
	waitFor(t, func() bool { _, failed := s.Reloads(); return failed == 1 }, "refused reload counted")
	if v := s.Load().Version; v != "v2" {
		t.Errorf("after a bad swap version = %q; want v2 kept", v)
	}
	mu.Lock()
	defer mu.Unlock()
	last := results[len(results)-1]
	if last.Err == nil || !strings.Contains(last.Err.Error(), "upstreams: expected an object") {
		t.Errorf("last result = %+v; want the reason", last)
	}
	if ok, _ := s.Reloads(); ok != 1 {
		t.Errorf("ok reloads = %d; want 1", ok)
	}
}

func TestReloadSameContentIsNoop(t *testing.T) {
	path := filepath.Join(t.TempDir(), "policy.json")
	if err := os.WriteFile(path, []byte(goodPolicy), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := compileTest(path, []byte(goodPolicy))
	if err != nil {
		t.Fatal(err)
	}
	s := NewStore(c)
	if r := s.Reload(path, compileTest); r.Changed || s.Load() != c {
		t.Errorf("reload of identical content swapped the policy: %+v", r)
	}
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	testsupport.Eventually(t, 5*time.Second, what, cond)
}

func TestWatchReloadsWhenAReferencedKeyRotates(t *testing.T) {
	polDir, secretDir := t.TempDir(), t.TempDir()
	keyFile := filepath.Join(secretDir, "key")
	os.WriteFile(keyFile, []byte("sk-old"), 0o600)
	path := filepath.Join(polDir, "policy.json")
	pol := strings.Replace(goodPolicy, `"auth": {"env": "BACKUP_KEY"}`, `"auth": {"file": "`+keyFile+`"}`, 1)
	os.WriteFile(path, []byte(pol), 0o644)
	c, err := compileTest(path, []byte(pol))
	if err != nil {
		t.Fatal(err)
	}
	s := NewStore(c)
	startWatch(t, s, path, compileTest, WatchOptions{Debounce: 20 * time.Millisecond})

	os.WriteFile(keyFile, []byte("sk-new"), 0o600)
	waitFor(t, func() bool { return s.Load().Upstreams["backup"].Key == "sk-new" }, "the rotated key")
	if s.Load().Hash != c.Hash || s.Load().Fingerprint == c.Fingerprint {
		t.Error("file hash should stay, fingerprint should change")
	}
}

func TestCompileEdgeCases(t *testing.T) {
	mk := func(up, extra string) string {
		return `{"upstreams": {"o": {"shape": "openai", "base_url": "https://api.openai.com/v1", "auth": {"from": "client"}` + up + `}},
"routes": [{"name": "r", "match": {"host": "api.openai.com"}, "chain": ["o"]}]` + extra + `}`
	}
	c, err := Compile("p.json", []byte(mk(`, "models": null`, `, "errors": {"classes": {"quota_exhausted": {"cooldown": "0s"}}}`)), testOptions())
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Upstreams["o"].Models) != 0 {
		t.Error(`"models": null should mean no mapping`)
	}
	if a := c.Action(ClassQuotaExhausted); a.Cooldown != 0 {
		t.Errorf(`explicit "0s" cooldown = %v; want none`, a.Cooldown)
	}
	_, err = Compile("p.json", []byte(mk(`, "headers": {"X-Team": "a", "x-team": "b"}`, "")), testOptions())
	if err == nil || !strings.Contains(err.Error(), "X-Team is set twice") {
		t.Errorf("headers differing in case: %v", err)
	}
	// Columns count characters: the Chinese text before the bad field is
	// two characters, six bytes (byte counting would say 23).
	_, err = Compile("p.json", []byte(`{"version": "设计", "bogus": 1}`), testOptions())
	if err == nil || !strings.Contains(err.Error(), "p.json:1:19: bogus") {
		t.Errorf("column: %v", err)
	}
}
