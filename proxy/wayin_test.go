package proxy

import (
	"net"
	"sync"
	"testing"
	"time"
)

// deadlineConn records the read deadlines set on it; its reads return
// what reads holds, one entry each, then block until close.
type deadlineConn struct {
	net.Conn
	mu        sync.Mutex
	deadlines []time.Time
	reads     chan string
}

func (c *deadlineConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.deadlines = append(c.deadlines, t)
	return nil
}

func (c *deadlineConn) Read(p []byte) (int, error) {
	s, ok := <-c.reads
	if !ok {
		return 0, net.ErrClosed
	}
	return copy(p, s), nil
}

func (c *deadlineConn) set() []time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Time(nil), c.deadlines...)
}

// TestBodyDeadlineOnlyWhenAReadReachesTheConnection: a body net/http
// already holds is read without a deadline set or lifted; one whose read
// reaches the connection has it set before that read and lifted after;
// a refused body has it moved to now.
func TestBodyDeadlineOnlyWhenAReadReachesTheConnection(t *testing.T) {
	by := time.Now().Add(time.Minute)

	dc := &deadlineConn{reads: make(chan string, 4)}
	fc := newFramingConn(dc)
	fc.ArmBodyDeadline(by)
	fc.DisarmBodyDeadline(false)
	if got := dc.set(); len(got) != 0 {
		t.Fatalf("no read reached the connection, yet deadlines %v were set", got)
	}

	dc.reads <- "POST / HTTP/1.1\r\n"
	fc.ArmBodyDeadline(by)
	if _, err := fc.Read(make([]byte, 64)); err != nil {
		t.Fatal(err)
	}
	if got := dc.set(); len(got) != 1 || !got[0].Equal(by) {
		t.Fatalf("deadlines %v after a read; want the armed one, %v", got, by)
	}
	dc.reads <- "Host: x\r\n"
	if _, err := fc.Read(make([]byte, 64)); err != nil {
		t.Fatal(err)
	}
	if got := dc.set(); len(got) != 1 {
		t.Fatalf("deadlines %v after a second read; want it set once", got)
	}
	fc.DisarmBodyDeadline(false)
	if got := dc.set(); len(got) != 2 || !got[1].IsZero() {
		t.Fatalf("deadlines %v after disarming; want the deadline lifted last", got)
	}
	dc.reads <- "\r\n"
	if _, err := fc.Read(make([]byte, 64)); err != nil {
		t.Fatal(err)
	}
	if got := dc.set(); len(got) != 2 {
		t.Fatalf("deadlines %v: a read after disarming set one again", got)
	}

	dc2 := &deadlineConn{reads: make(chan string)}
	fc2 := newFramingConn(dc2)
	before := time.Now()
	fc2.ArmBodyDeadline(by)
	fc2.DisarmBodyDeadline(true)
	if got := dc2.set(); len(got) != 1 || got[0].Before(before) || got[0].After(time.Now()) {
		t.Fatalf("deadlines %v for a refused body; want one, now", got)
	}
}

// TestBodyDeadlineNeverOutlivesDisarm: net/http's background read starts
// on its own goroutine as the body ends, racing the disarm. Whichever comes
// first, the connection is left without the body's deadline, which would
// otherwise cut the answer (the background read's timeout cancels the
// request).
func TestBodyDeadlineNeverOutlivesDisarm(t *testing.T) {
	by := time.Now().Add(time.Minute)
	for i := range 200 {
		dc := &deadlineConn{reads: make(chan string)}
		fc := newFramingConn(dc)
		fc.ArmBodyDeadline(by)
		started := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			close(started)
			_, _ = fc.Read(make([]byte, 8)) // blocks until close
		}()
		if i%2 == 0 {
			<-started
		}
		fc.DisarmBodyDeadline(false)
		// The read may still be about to start: it must find the
		// deadline disarmed. Let it read, then end it.
		close(dc.reads)
		<-done
		got := dc.set()
		if n := len(got); n > 0 && !got[n-1].IsZero() {
			t.Fatalf("round %d: deadlines %v; the last must lift the body's", i, got)
		}
	}
}

// loopbackHostSplit is loopbackHost without its fast path.
func loopbackHostSplit(hostport string) bool {
	h, _ := splitHostPort(hostport)
	return loopbackName(h)
}

// TestLoopbackHostFastPathAgrees: 127.0.0.1 with a port, told without
// splitting it, is told as splitting and parsing it tells it.
func TestLoopbackHostFastPathAgrees(t *testing.T) {
	for _, hp := range []string{
		"127.0.0.1:8787", "127.0.0.1:", "127.0.0.1:0", "127.0.0.1:80:90", "127.0.0.1::",
		"127.0.0.1:]", "127.0.0.1:[", "127.0.0.1:8[0", "127.0.0.1", "127.0.0.1.evil:80",
		"127.0.0.10:80", "127.0.0.1%lo:80", "localhost:8787", "LOCALHOST:1", "[::1]:8787",
		"example.com:80", "", ":80", "127.0.0.1:http", "127.0.0.1: 80",
	} {
		if got, want := loopbackHost(hp), loopbackHostSplit(hp); got != want {
			t.Errorf("loopbackHost(%q) = %v; splitting it says %v", hp, got, want)
		}
	}
}

func FuzzLoopbackHost(f *testing.F) {
	for _, s := range []string{"127.0.0.1:8787", "127.0.0.1:]", "127.0.0.1:1:2", "localhost:1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, port string) {
		hp := "127.0.0.1:" + port
		if got, want := loopbackHost(hp), loopbackHostSplit(hp); got != want {
			t.Errorf("loopbackHost(%q) = %v; splitting it says %v", hp, got, want)
		}
	})
}
