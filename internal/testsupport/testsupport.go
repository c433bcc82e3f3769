// Package testsupport holds the helpers detour's tests share: golden files
// with one -update flag, a log sink safe for concurrent writers that a test
// can wait on, a bounded poll and a manual clock. It imports only the standard library, so
// that any package's tests can use it without pulling the proxy in (the
// end-to-end helpers are in internal/detourtest).
package testsupport

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Update is the -update flag of every test binary that imports this
// package: golden files are rewritten with what the test produced instead of
// compared. Read the diff before committing it.
var Update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// Golden compares got with file (a path relative to the package, usually
// under testdata/). With -update it first writes got to file, creating its
// directory.
func Golden(t testing.TB, file string, got []byte) {
	t.Helper()
	if *Update {
		if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v (go test -run '%s' -update writes it)", err, t.Name())
	}
	if !bytes.Equal(got, want) {
		t.Errorf("output differs from %s (go test -update rewrites it; review the diff)\ngot:\n%s\nwant:\n%s", file, got, want)
	}
}

// SyncBuffer is a bytes.Buffer safe for concurrent writers and readers: a
// log sink for a server's goroutines or a child process's output. WaitFor
// wakes on every write, so a test waits for a log line without polling.
// The zero value is ready to use.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
	// changed is closed (and replaced) by every Write.
	changed chan struct{}
}

// Write appends p and wakes the waiters.
func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, err := s.b.Write(p)
	if s.changed != nil {
		close(s.changed)
		s.changed = nil
	}
	return n, err
}

// String returns the contents so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Reset empties the buffer.
func (s *SyncBuffer) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.b.Reset()
}

// Changed returns a channel that the next Write closes. Take it before
// reading String, so that no write falls between the two: a loop that also
// waits for something else selects on it.
func (s *SyncBuffer) Changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.changed == nil {
		s.changed = make(chan struct{})
	}
	return s.changed
}

// Wait waits until cond holds for the contents, at most timeout, and says
// whether it did.
func (s *SyncBuffer) Wait(timeout time.Duration, cond func(string) bool) bool {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		changed := s.Changed()
		if cond(s.String()) {
			return true
		}
		select {
		case <-changed:
		case <-deadline.C:
			return cond(s.String())
		}
	}
}

// WaitFor waits until the contents hold want, at most timeout, and fails the
// test with what was written if they do not.
func (s *SyncBuffer) WaitFor(t testing.TB, timeout time.Duration, want string) {
	t.Helper()
	if !s.Wait(timeout, func(text string) bool { return strings.Contains(text, want) }) {
		t.Fatalf("no %q within %v; so far:\n%s", want, timeout, s.String())
	}
}

// Poll checks cond until it holds or timeout passes, and says whether it
// held. It checks often at first and then less often (up to every 20ms), so
// a condition that is quickly true costs no fixed wait and a slow one no
// busy loop.
func Poll(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	pause := 100 * time.Microsecond
	for !cond() {
		if time.Now().After(deadline) {
			return cond()
		}
		time.Sleep(pause)
		if pause < 20*time.Millisecond {
			pause *= 2
		}
	}
	return true
}

// Eventually fails the test when cond does not hold within timeout; what
// says what was awaited.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	if !Poll(timeout, cond) {
		t.Fatalf("timed out after %v waiting for %s", timeout, what)
	}
}

// Clock is a manual clock for code that takes its time from a func() time.Time
// (Runner.Now, a credential cache's now): it moves only when a test calls
// Advance, and is safe for the goroutines that read it meanwhile.
type Clock struct{ ns atomic.Int64 }

// NewClock returns a Clock reading t.
func NewClock(t time.Time) *Clock {
	c := &Clock{}
	c.ns.Store(t.UnixNano())
	return c
}

// Now is the clock's time.
func (c *Clock) Now() time.Time { return time.Unix(0, c.ns.Load()) }

// Advance moves the clock on by d.
func (c *Clock) Advance(d time.Duration) { c.ns.Add(int64(d)) }
