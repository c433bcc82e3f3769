package proxy

import (
	"io"
	"sync"
	"time"
)

// logBatchDelay is how long a request's log line may wait to be written
// with the lines that follow it; logBatchBytes how much may wait. At
// 10 ms a busy detour (thousands of requests a second) writes when 32 KiB
// wait, some 45 lines a write; at 2 ms it wrote a dozen at a time, and a
// write (the system call, the timer's goroutine before it) shared among a
// dozen lines still cost each of their requests a microsecond or two. A
// log shipper does not see the difference.
const (
	logBatchDelay = 10 * time.Millisecond
	logBatchBytes = 32 << 10
)

// logBatch gathers the log lines written to a file (detour serve's stderr,
// a pipe to the container runtime) and writes them together: one write
// system call per line, and the reader's wake-up it causes, cost a
// request more CPU than anything else its line does. A line waits at most
// logBatchDelay, or until logBatchBytes are waiting; lines keep their
// order, and a line written through Direct (everything but the chain's)
// first writes out the lines before it, then itself at once. Flush writes
// out what waits; Serve closes it last, after every request has ended.
//
// Only detour serve's log file or pipe gets it (Options.BatchLog): a line
// still in the batch when the process is killed is lost, `detour run`
// writes lines of its own beside detour's into the same file, and the
// in-process writers of tests are cheap to write to and read their lines
// as they come.
type logBatch struct {
	w io.Writer
	// wmu orders the writes to w; mu guards the batch. A buffered Write
	// takes only mu, so it never waits for a write system call.
	wmu   sync.Mutex
	mu    sync.Mutex
	buf   []byte
	spare []byte
	armed bool
	timer *time.Timer
}

func newLogBatch(w io.Writer) *logBatch {
	b := &logBatch{w: w, buf: make([]byte, 0, logBatchBytes), spare: make([]byte, 0, logBatchBytes)}
	b.timer = time.AfterFunc(time.Hour, b.Flush)
	b.timer.Stop()
	return b
}

// Write adds one line to the batch. It reports p written: an error of the
// later write goes nowhere, as zerolog's own report of one would go to the
// same stream.
func (b *logBatch) Write(p []byte) (int, error) {
	b.mu.Lock()
	b.buf = append(b.buf, p...)
	full := len(b.buf) >= logBatchBytes
	if !full && !b.armed {
		b.armed = true
		b.timer.Reset(logBatchDelay)
	}
	b.mu.Unlock()
	if full {
		b.Flush()
	}
	return len(p), nil
}

// Close writes out the lines waiting and stops the timer.
func (b *logBatch) Close() {
	b.timer.Stop()
	b.Flush()
}

// Flush writes out the lines waiting.
func (b *logBatch) Flush() {
	b.wmu.Lock()
	defer b.wmu.Unlock()
	b.writeOut(nil)
}

// writeOut writes what waits and then p; wmu is held.
func (b *logBatch) writeOut(p []byte) (int, error) {
	b.mu.Lock()
	out := b.buf
	b.buf, b.spare = b.spare[:0], nil
	b.armed = false
	b.mu.Unlock()
	if len(out) > 0 {
		_, _ = b.w.Write(out)
	}
	b.mu.Lock()
	b.spare = out[:0]
	b.mu.Unlock()
	if p == nil {
		return 0, nil
	}
	return b.w.Write(p)
}

// Direct is a writer of lines that are written at once, after the lines
// waiting before them.
func (b *logBatch) Direct() io.Writer { return logDirect{b} }

type logDirect struct{ b *logBatch }

func (d logDirect) Write(p []byte) (int, error) {
	d.b.wmu.Lock()
	defer d.b.wmu.Unlock()
	return d.b.writeOut(p)
}
