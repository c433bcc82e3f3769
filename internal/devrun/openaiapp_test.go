package devrun

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/detour-proxy/detour/internal/testsupport"
)

// openaiApp is the unmodified openai-go app (testdata/app), built once per
// test binary into a file kept between runs: go build relinks it only when
// its inputs changed (it depends on openai-go alone), and otherwise costs a
// tenth of a second. Linking openai-go into this race test binary instead,
// for the app to be a re-exec of it, cost every run one to two seconds of
// CPU.
//
// The file is the checkout's own (a directory per absolute path of the
// app's source, which is in the binary's debug information): two checkouts
// would otherwise relink it in turn. Building in that directory (GOTMPDIR)
// makes go build rename the new binary into place, never write over one a
// run is executing. A directory no run has used for 30 days is removed.
var openaiApp = sync.OnceValues(func() (string, error) {
	src, err := filepath.Abs(filepath.Join("testdata", "app"))
	if err != nil {
		return "", err
	}
	root, err := os.UserCacheDir()
	if err != nil {
		root = os.TempDir()
	}
	root = filepath.Join(root, "detour-devrun")
	sum := sha256.Sum256([]byte(src))
	dir := filepath.Join(root, hex.EncodeToString(sum[:8]))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	trimApps(root, dir, time.Now())
	bin := filepath.Join(dir, "openai-app")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Dir = src
	// GOGC=off: a go build that finds the binary up to date lives a tenth
	// of a second, a fifth of it in its collector otherwise.
	cmd.Env = append(os.Environ(), "GOTMPDIR="+dir, "GOGC=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./testdata/app: %v\n%s", err, out)
	}
	// Used now: trimApps keeps it. go build leaves a binary that is up to
	// date as it is.
	now := time.Now()
	_ = os.Chtimes(dir, now, now)
	return bin, nil
})

// trimApps removes the directories under root other than keep that no run
// has used for 30 days (a checkout since deleted).
func trimApps(root, keep string, now time.Time) {
	entries, err := os.ReadDir(root)
	if err != nil {
		return
	}
	for _, e := range entries {
		dir := filepath.Join(root, e.Name())
		if fi, err := e.Info(); err == nil && dir != keep && now.Sub(fi.ModTime()) > 30*24*time.Hour {
			os.RemoveAll(dir)
		}
	}
}

// appCommand returns the command that runs the unmodified openai-go app.
func appCommand(t *testing.T) string {
	t.Helper()
	bin, err := openaiApp()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// selfCommand returns this test binary, which a child runs in a helper
// role (dialerEnv, serverEnv, a -test.run of a helper test), and a GORACE
// (under -race) that skips the race runtime's one-second sleep at exit,
// which only delays the child's end.
func selfCommand(t *testing.T) (string, string) {
	t.Helper()
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return bin, testsupport.ChildGORACE()
}
