package proxy

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/detour-proxy/detour/internal/testsupport"
)

// writeRecorder keeps every write it is given, as one string each.
type writeRecorder struct {
	mu     sync.Mutex
	writes []string
	buf    testsupport.SyncBuffer
}

func (w *writeRecorder) Write(p []byte) (int, error) {
	w.mu.Lock()
	w.writes = append(w.writes, string(p))
	w.mu.Unlock()
	return w.buf.Write(p)
}

func (w *writeRecorder) all() (writes []string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.writes...), strings.Join(w.writes, "")
}

// TestLogBatchKeepsOrder: batched lines are written together, a direct
// line goes out at once after every line before it, and the batch is
// written by itself within its delay without a Flush.
func TestLogBatchKeepsOrder(t *testing.T) {
	t.Parallel()
	w := &writeRecorder{}
	b := newLogBatch(w)
	defer b.Close()
	_, _ = b.Write([]byte("a\n"))
	_, _ = b.Write([]byte("b\n"))
	_, _ = b.Direct().Write([]byte("c\n"))
	if writes, text := w.all(); text != "a\nb\nc\n" || len(writes) != 2 {
		t.Fatalf("after a direct line: writes %q; want \"a\\nb\\n\" then \"c\\n\"", writes)
	}
	_, _ = b.Write([]byte("d\n"))
	// No Flush: the timer writes it.
	w.buf.WaitFor(t, 10*time.Second, "d\n")
	if _, text := w.all(); text != "a\nb\nc\nd\n" {
		t.Fatalf("got %q", text)
	}
}

// TestLogBatchFull: a batch that reaches logBatchBytes is written at once.
func TestLogBatchFull(t *testing.T) {
	t.Parallel()
	w := &writeRecorder{}
	b := newLogBatch(w)
	defer b.Close()
	line := []byte(strings.Repeat("x", 1023) + "\n")
	for range logBatchBytes / len(line) {
		_, _ = b.Write(line)
	}
	if writes, text := w.all(); len(writes) != 1 || len(text) != logBatchBytes {
		t.Fatalf("%d writes of %d bytes; want one of %d", len(writes), len(text), logBatchBytes)
	}
}

// TestLogBatchConcurrentLines: lines written from many goroutines, batched
// and direct, each reach the writer once and whole, and each goroutine's
// in its order.
func TestLogBatchConcurrentLines(t *testing.T) {
	t.Parallel()
	w := &writeRecorder{}
	b := newLogBatch(w)
	const writers, lines = 16, 300
	var wg sync.WaitGroup
	for g := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range lines {
				line := []byte(fmt.Sprintf("g%d l%d %s\n", g, i, strings.Repeat("y", i%50)))
				if i%37 == 0 {
					_, _ = b.Direct().Write(line)
				} else {
					_, _ = b.Write(line)
				}
			}
		}()
	}
	wg.Wait()
	b.Close()
	_, text := w.all()
	next := make([]int, writers)
	got := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	if len(got) != writers*lines {
		t.Fatalf("%d lines; want %d", len(got), writers*lines)
	}
	for _, l := range got {
		var g, i int
		if _, err := fmt.Sscanf(l, "g%d l%d", &g, &i); err != nil || i != next[g] {
			t.Fatalf("line %q out of order or broken (want l%d of g%d)", l, next[g], g)
		}
		if want := fmt.Sprintf("g%d l%d %s", g, i, strings.Repeat("y", i%50)); l != want {
			t.Fatalf("line %q; want %q", l, want)
		}
		next[g]++
	}
	if !bytes.HasSuffix([]byte(text), []byte("\n")) {
		t.Fatalf("the last line is cut")
	}
}
