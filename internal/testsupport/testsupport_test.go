package testsupport

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestSyncBufferWaitWakesOnWrite(t *testing.T) {
	t.Parallel()
	var b SyncBuffer
	go func() {
		for i := 0; i < 5; i++ {
			fmt.Fprintf(&b, "line %d\n", i)
		}
	}()
	b.WaitFor(t, 10*time.Second, "line 4\n")
	if got := strings.Count(b.String(), "\n"); got != 5 {
		t.Errorf("%d lines; want 5", got)
	}
}

func TestSyncBufferWaitGivesUp(t *testing.T) {
	t.Parallel()
	var b SyncBuffer
	b.Write([]byte("something else"))
	if b.Wait(time.Millisecond, func(s string) bool { return strings.Contains(s, "never") }) {
		t.Error("Wait returned true for text that was never written")
	}
	b.Reset()
	if b.String() != "" {
		t.Errorf("after Reset: %q", b.String())
	}
}

func TestPollIsBounded(t *testing.T) {
	t.Parallel()
	var n atomic.Int64
	if !Poll(10*time.Second, func() bool { return n.Add(1) == 3 }) {
		t.Error("Poll gave up on a condition that became true")
	}
	if Poll(time.Millisecond, func() bool { return false }) {
		t.Error("Poll returned true for a condition that never held")
	}
}

func TestGoldenComparesAndUpdates(t *testing.T) {
	file := filepath.Join(t.TempDir(), "sub", "x.golden")
	*Update = true
	Golden(t, file, []byte("one\n"))
	*Update = false
	if data, err := os.ReadFile(file); err != nil || string(data) != "one\n" {
		t.Fatalf("-update wrote %q, %v", data, err)
	}
	ft := &fakeT{TB: t}
	Golden(ft, file, []byte("two\n"))
	if !ft.failed {
		t.Error("a differing output passed")
	}
}

// fakeT records a failure instead of failing the test.
type fakeT struct {
	testing.TB
	failed bool
}

func (f *fakeT) Errorf(string, ...any) { f.failed = true }
