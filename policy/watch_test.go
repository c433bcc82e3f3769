package policy

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"
)

// startWatch runs s.Watch until the test ends, and returns once its
// directories are watched (opts.Ready is set here).
func startWatch(t *testing.T, s *Store, path string, compile CompileFunc, opts WatchOptions) {
	t.Helper()
	ready := make(chan struct{})
	opts.Ready = func() { close(ready) }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Watch(ctx, path, compile, opts) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Error("Watch did not return after its context ended")
		}
	})
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("Watch returned before it was ready: %v", err)
	case <-time.After(5 * time.Second):
		t.Fatal("Watch not ready within 5s")
	}
}

// countingCompile is compileTest counting its calls: each call is one
// reload attempt, whatever came of it.
func countingCompile(n *atomic.Int64) CompileFunc {
	return func(name string, data []byte) (*Compiled, error) {
		n.Add(1)
		return compileTest(name, data)
	}
}

// churn writes to file until the test ends, as a busy process logging
// there would. The ticker paces it so that the writes are a steady stream
// (far more often than any debounce in these tests) without spinning a CPU.
func churn(t *testing.T, write func(i int)) {
	t.Helper()
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-tick.C:
				write(i)
			}
		}
	}()
	t.Cleanup(func() { close(stop); <-done })
}

// appendTo returns a churn writer that appends a line to path.
func appendTo(t *testing.T, path string) func(int) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return func(i int) { fmt.Fprintf(f, `{"level":"info","message":"request %d"}`+"\n", i) }
}

// replaceFile writes content to path by write and rename, as editors do.
func replaceFile(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Error(err)
		return
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Error(err)
	}
}

// TestReloadOfTheSameRefusedFileIsRecordedOnce: the same broken file found
// again is not a new refusal. Before, every reload of it was recorded and
// counted, and 20 of them pushed every ok entry out of History.
func TestReloadOfTheSameRefusedFileIsRecordedOnce(t *testing.T) {
	t.Parallel()
	s, path := fileStore(t)
	writeFile(t, path, `{"upstreams": 1}`)
	first := s.ReloadAs(TriggerWatch, path, compileTest)
	if !first.Changed || first.Err == nil {
		t.Fatalf("first reload of the broken file = %+v; want a refusal", first)
	}
	for i := 0; i < 2*HistorySize; i++ {
		trig := TriggerWatch
		if i%2 == 1 {
			trig = TriggerSIGHUP
		}
		r := s.ReloadAs(trig, path, compileTest)
		if r.Changed || r.Err == nil || r.Err.Error() != first.Err.Error() {
			t.Fatalf("reload %d of the same broken file = %+v; want Changed false and the same reason", i, r)
		}
	}
	if got, want := summary(s.History()), "watch:refused: start:ok:v1*"; got != want {
		t.Fatalf("history = %s; want %s", got, want)
	}
	if ok, failed := s.Reloads(); ok != 0 || failed != 1 {
		t.Errorf("Reloads = %d ok, %d failed; want 0, 1", ok, failed)
	}

	// A different mistake is a new refusal; so is the first one again
	// after a good file in between.
	writeFile(t, path, `{"upstreams": 2}`)
	if r := s.ReloadAs(TriggerWatch, path, compileTest); !r.Changed || r.Err == nil {
		t.Fatalf("another broken file = %+v; want a new refusal", r)
	}
	writeVersion(t, path, "v2")
	s.ReloadAs(TriggerWatch, path, compileTest)
	writeFile(t, path, `{"upstreams": 1}`)
	if r := s.ReloadAs(TriggerWatch, path, compileTest); !r.Changed || r.Err == nil {
		t.Fatalf("the first mistake made again = %+v; want a new refusal", r)
	}
	// A missing file is one refusal too, however often it is looked for.
	os.Remove(path)
	for i := 0; i < 3; i++ {
		s.ReloadAs(TriggerWatch, path, compileTest)
	}
	if got, want := summary(s.History()), "watch:refused: watch:refused: watch:ok:v2* watch:refused: watch:refused: start:ok:v1"; got != want {
		t.Fatalf("history = %s; want %s", got, want)
	}
	if _, failed := s.Reloads(); failed != 4 {
		t.Errorf("failed reloads = %d; want 4", failed)
	}
}

// TestRefusalFingerprintCoversReferencedFiles: a policy refused because of
// a file it references is refused anew when that file changes (the reason
// may differ), and published once the file is right.
func TestRefusalFingerprintCoversReferencedFiles(t *testing.T) {
	t.Parallel()
	s, path := fileStore(t)
	keyFile := filepath.Join(t.TempDir(), "key")
	writeFile(t, keyFile, "  \n")
	writeFile(t, path, strings.Replace(policyWithVersion("v2"), `"auth": {"env": "BACKUP_KEY"}`, `"auth": {"file": "`+keyFile+`"}`, 1))
	if r := s.ReloadAs(TriggerWatch, path, compileTest); !r.Changed || r.Err == nil || !strings.Contains(r.Err.Error(), "is empty") {
		t.Fatalf("empty key file = %+v; want refused", r)
	}
	if r := s.ReloadAs(TriggerWatch, path, compileTest); r.Changed {
		t.Fatalf("again = %+v; want the same refusal", r)
	}
	if refs := s.readRefs(); len(refs) != 1 || refs[0] != keyFile {
		t.Errorf("refs after the refusal = %q; want the key file, so that the watcher reloads when it is fixed", refs)
	}
	os.Remove(keyFile)
	if r := s.ReloadAs(TriggerWatch, path, compileTest); !r.Changed || r.Err == nil || !strings.Contains(r.Err.Error(), "cannot read key file") {
		t.Fatalf("missing key file = %+v; want a new refusal", r)
	}
	writeFile(t, keyFile, "sk-fixed")
	if r := s.ReloadAs(TriggerWatch, path, compileTest); r.Policy == nil || r.Policy.Upstreams["backup"].Key != "sk-fixed" {
		t.Fatalf("fixed key file = %+v; want v2 published", r)
	}
}

// TestWatchIgnoresALogInThePolicyDirectory reproduces `detour run` with the
// policy in $TMPDIR: detour's log is in the policy's directory, appended to
// for every request and for every reload result. A refused edit is recorded
// once, a good edit after it applies, and the ok entries stay in History.
// Before, every log line reset the debounce (no edit applied while the log
// was busy) and, once quiet, every refusal line caused another refusal.
func TestWatchIgnoresALogInThePolicyDirectory(t *testing.T) {
	t.Parallel()
	s, path := fileStore(t)
	logFile := filepath.Join(filepath.Dir(path), "detour-run-123.log")
	logLine := appendTo(t, logFile)
	var compiles atomic.Int64
	startWatch(t, s, path, countingCompile(&compiles), WatchOptions{
		Debounce: 50 * time.Millisecond,
		MaxWait:  time.Minute, // only the events that matter may start a reload
		OnResult: func(ReloadResult) { logLine(-1) },
	})
	churn(t, logLine)

	replaceFile(t, path, `{"upstreams": 1}`)
	waitFor(t, func() bool { _, failed := s.Reloads(); return failed == 1 }, "the refused edit")
	writeVersion(t, path+".new", "v2")
	if err := os.Rename(path+".new", path); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return s.Load().Version == "v2" }, "the good edit under a busy log")

	if got, want := summary(s.History()), "watch:ok:v2* watch:refused: start:ok:v1"; got != want {
		t.Errorf("history = %s; want %s", got, want)
	}
	if ok, failed := s.Reloads(); ok != 1 || failed != 1 {
		t.Errorf("Reloads = %d ok, %d failed; want 1, 1", ok, failed)
	}
	if n := compiles.Load(); n != 2 {
		t.Errorf("%d reload attempts; want 2, one per edit (log lines must not start one)", n)
	}
}

// TestWatchAppliesAnEditAmidUnrelatedChurn: files created, written, renamed
// and removed next to the policy do not hold a valid edit back.
func TestWatchAppliesAnEditAmidUnrelatedChurn(t *testing.T) {
	t.Parallel()
	s, path := fileStore(t)
	dir := filepath.Dir(path)
	var compiles atomic.Int64
	startWatch(t, s, path, countingCompile(&compiles), WatchOptions{Debounce: 50 * time.Millisecond, MaxWait: time.Minute})
	churn(t, func(i int) {
		// An editor's swap file, a sibling policy, a temp file renamed.
		f := filepath.Join(dir, fmt.Sprintf("scratch-%d", i%4))
		switch i % 3 {
		case 0:
			os.WriteFile(f, []byte("x"), 0o644)
		case 1:
			os.Rename(f, filepath.Join(dir, "policy.json.bak"))
		case 2:
			os.Remove(filepath.Join(dir, "policy.json.bak"))
		}
	})

	writeVersion(t, path+".new", "v2")
	written := time.Now()
	if err := os.Rename(path+".new", path); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return s.Load().Version == "v2" }, "the edit amid churn")
	t.Logf("v2 in effect %v after the write", time.Since(written).Round(time.Millisecond))
	if n := compiles.Load(); n != 1 {
		t.Errorf("%d reload attempts; want 1", n)
	}
}

// TestWatchReloadsAFileWrittenWithoutPause: a policy file rewritten more
// often than the debounce is still reloaded, within MaxWait.
func TestWatchReloadsAFileWrittenWithoutPause(t *testing.T) {
	t.Parallel()
	s, path := fileStore(t)
	startWatch(t, s, path, compileTest, WatchOptions{Debounce: 300 * time.Millisecond, MaxWait: 600 * time.Millisecond})
	v2 := policyWithVersion("v2")
	churn(t, func(int) { replaceFile(t, path, v2) })
	waitFor(t, func() bool { return s.Load().Version == "v2" }, "a reload while the file is rewritten every millisecond")
	if _, failed := s.Reloads(); failed != 0 {
		t.Errorf("%d refused reloads; want none (every write is a rename of a whole file)", failed)
	}
}

// TestWatchReloadsWhenAMissingKeyFileAppears: the edit names a key file
// that does not exist yet; creating it (next to the policy) applies the
// edit. The watcher learns the file from the refused compile.
func TestWatchReloadsWhenAMissingKeyFileAppears(t *testing.T) {
	t.Parallel()
	s, path := fileStore(t)
	keyFile := filepath.Join(filepath.Dir(path), "backup.key")
	startWatch(t, s, path, compileTest, WatchOptions{Debounce: 20 * time.Millisecond})
	replaceFile(t, path, strings.Replace(policyWithVersion("v2"), `"auth": {"env": "BACKUP_KEY"}`, `"auth": {"file": "`+keyFile+`"}`, 1))
	waitFor(t, func() bool { _, failed := s.Reloads(); return failed == 1 }, "the refusal for the missing key file")
	replaceFile(t, keyFile, "sk-new")
	waitFor(t, func() bool { return s.Load().Version == "v2" }, "the edit once its key file exists")
	if k := s.Load().Upstreams["backup"].Key; k != "sk-new" {
		t.Errorf("key = %q; want sk-new", k)
	}
}

// TestWatchFollowsASymlinkIntoAnotherDirectory: policy.json is a symlink to
// a file elsewhere, edited in place there.
func TestWatchFollowsASymlinkIntoAnotherDirectory(t *testing.T) {
	t.Parallel()
	linkDir, realDir := t.TempDir(), t.TempDir()
	target := filepath.Join(realDir, "detour.json")
	writeVersion(t, target, "v1")
	path := filepath.Join(linkDir, "policy.json")
	if err := os.Symlink(target, path); err != nil {
		t.Fatal(err)
	}
	c, err := compileTest(path, mustRead(t, path))
	if err != nil {
		t.Fatal(err)
	}
	s := NewStore(c)
	startWatch(t, s, path, compileTest, WatchOptions{Debounce: 20 * time.Millisecond})
	writeVersion(t, target, "v2") // in place: truncate and write
	waitFor(t, func() bool { return s.Load().Version == "v2" }, "the edit of the symlink's target")
}

// TestWatchFollowsASecretVolumeKeySwap: a key file in a Kubernetes Secret
// volume is a symlink through "..data"; the kubelet rotates it by swapping
// "..data" to a new timestamped directory.
func TestWatchFollowsASecretVolumeKeySwap(t *testing.T) {
	t.Parallel()
	polDir, secretDir := t.TempDir(), t.TempDir()
	swap := func(gen, key string) {
		d := filepath.Join(secretDir, gen)
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(d, "key"), key)
		tmp := filepath.Join(secretDir, "..data_tmp")
		if err := os.Symlink(gen, tmp); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(secretDir, "..data")); err != nil {
			t.Fatal(err)
		}
	}
	swap("..2026_11_30_01", "sk-one")
	keyFile := filepath.Join(secretDir, "key")
	if err := os.Symlink(filepath.Join("..data", "key"), keyFile); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(polDir, "policy.json")
	pol := strings.Replace(goodPolicy, `"auth": {"env": "BACKUP_KEY"}`, `"auth": {"file": "`+keyFile+`"}`, 1)
	writeFile(t, path, pol)
	c, err := compileTest(path, []byte(pol))
	if err != nil {
		t.Fatal(err)
	}
	s := NewStore(c)
	startWatch(t, s, path, compileTest, WatchOptions{Debounce: 20 * time.Millisecond})
	for i, key := range []string{"sk-two", "sk-three"} {
		old := filepath.Join(secretDir, fmt.Sprintf("..2026_11_30_%02d", i+1))
		swap(fmt.Sprintf("..2026_11_30_%02d", i+2), key)
		os.RemoveAll(old) // as the kubelet does once the swap is done
		waitFor(t, func() bool { return s.Load().Upstreams["backup"].Key == Secret(key) }, "the swapped key "+key)
	}
}

func TestWatchSetKnowsWhichNamesMatter(t *testing.T) {
	t.Parallel()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	gen := filepath.Join(dir, "..2026_11_30_01")
	os.Mkdir(gen, 0o755)
	writeFile(t, filepath.Join(gen, "policy.json"), goodPolicy)
	os.Symlink("..2026_11_30_01", filepath.Join(dir, "..data"))
	path := filepath.Join(dir, "policy.json")
	os.Symlink(filepath.Join("..data", "policy.json"), path)
	key := filepath.Join(dir, "keys", "backup")

	w, err := fsnotify.NewWatcher()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	ws := newWatchSet(w, path)
	if _, err := ws.update([]string{key}); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]bool{
		path:                                true,
		filepath.Join(dir, "..data"):        true,
		gen:                                 true, // removing the directory read through matters
		filepath.Join(gen, "policy.json"):   true,
		filepath.Join(dir, "keys"):          true, // the key's directory, created later
		key:                                 true,
		dir:                                 true, // the watched directory itself, removed
		filepath.Join(dir, "..data_tmp"):    false,
		filepath.Join(dir, "..2026_12_01"):  false,
		filepath.Join(dir, "policy.json~"):  false,
		filepath.Join(dir, "detour.log"):    false,
		filepath.Join(gen, "other-key.yml"): false,
	} {
		if got := ws.relevant(name); got != want {
			t.Errorf("relevant(%s) = %v; want %v", strings.TrimPrefix(name, dir), got, want)
		}
	}
	if !ws.dirs[dir] || !ws.dirs[gen] {
		t.Errorf("watched %v; want the policy's directory and its target's", ws.dirs)
	}
}

func TestWatchDelays(t *testing.T) {
	t.Parallel()
	ms := time.Millisecond
	for _, tc := range []struct {
		opts              WatchOptions
		debounce, maxWait time.Duration
	}{
		{WatchOptions{}, DefaultDebounce, time.Second},
		{WatchOptions{Debounce: 20 * ms}, 20 * ms, 200 * ms},
		{WatchOptions{Debounce: 20 * ms, MaxWait: 5 * ms}, 20 * ms, 20 * ms},
		{WatchOptions{MaxWait: 3 * time.Second}, DefaultDebounce, 3 * time.Second},
	} {
		if d, m := tc.opts.delays(); d != tc.debounce || m != tc.maxWait {
			t.Errorf("%+v: debounce %v, max wait %v; want %v, %v", tc.opts, d, m, tc.debounce, tc.maxWait)
		}
	}
}

// TestResolutionEndsOnASymlinkLoop: a loop is not followed forever.
func TestResolutionEndsOnASymlinkLoop(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	os.Symlink(b, a)
	os.Symlink(a, b)
	if n := len(resolution(a)); n != 1+2*maxLinks {
		t.Errorf("resolution of a loop has %d paths; want %d", n, 1+2*maxLinks)
	}
}
