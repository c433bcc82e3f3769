package proxy

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/detour-proxy/detour/internal/chain"
)

// A request with both Content-Length and Transfer-Encoding can be read two
// ways, which is how requests are smuggled past a proxy in front of detour
// (RFC 9112 §6.1, §11.2). net/http reads it as chunked, keeps the
// connection open, and deletes both headers before a handler sees the
// request, so detour cannot tell such a request from a plain chunked one
// afterwards. framingConn watches the raw bytes of each connection instead,
// following the same framing net/http does, and refuseAmbiguousFraming
// answers such a request 400 and closes the connection.

// Bounds of what framingScanner holds, as net/http's own: a header block of
// http.DefaultMaxHeaderBytes (plus the slack net/http allows), and a chunk
// size line of 4 KiB. Beyond them net/http refuses the request and closes
// the connection, and the scanner stops.
const (
	maxScannedHeaderBytes = http.DefaultMaxHeaderBytes + 4096
	maxChunkLine          = 4096
	// maxPendingVerdicts bounds the verdicts of requests read but not yet
	// served (pipelining).
	maxPendingVerdicts = 64
)

// framingConn is a connection whose requests' framing is watched. It is
// also the chain's BodyDeadline for the requests read from it.
type framingConn struct {
	net.Conn
	mu sync.Mutex
	sc framingScanner
	// bodyArmed is set while a request body is read under a deadline
	// (ArmBodyDeadline); bodyMu orders its deadline's setting with its
	// lifting, and bodyApplied says the connection has it.
	bodyArmed   atomic.Bool
	bodyMu      sync.Mutex
	bodyApplied bool
	bodyBy      time.Time
}

func newFramingConn(c net.Conn) *framingConn {
	return &framingConn{Conn: c, sc: framingScanner{state: stRequestLine}}
}

func (c *framingConn) Read(p []byte) (int, error) {
	if c.bodyArmed.Load() {
		c.applyBodyDeadline()
	}
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.mu.Lock()
		c.sc.scan(p[:n])
		c.mu.Unlock()
	}
	return n, err
}

// ArmBodyDeadline bounds the reads that reach the connection by t until
// DisarmBodyDeadline. Setting a deadline arms a runtime timer (and lifting
// it modifies it again), which most request bodies, already read by
// net/http with their headers, never need: the deadline is set only when a
// read reaches the connection, which is also the only read that can wait.
func (c *framingConn) ArmBodyDeadline(t time.Time) {
	c.bodyMu.Lock()
	c.bodyBy = t
	c.bodyArmed.Store(true)
	c.bodyMu.Unlock()
}

// applyBodyDeadline sets the armed deadline on the connection, once. It
// holds bodyMu while it does, so that a DisarmBodyDeadline racing it (net/http's
// background read starts as the body ends, on its own goroutine) either
// finds the deadline set and lifts it, or has disarmed before it is set:
// the background read, which lasts as long as the answer, never keeps it.
func (c *framingConn) applyBodyDeadline() {
	c.bodyMu.Lock()
	defer c.bodyMu.Unlock()
	if c.bodyArmed.Load() && !c.bodyApplied {
		_ = c.Conn.SetReadDeadline(c.bodyBy)
		c.bodyApplied = true
	}
}

// DisarmBodyDeadline ends ArmBodyDeadline's bound: lifted if it was set,
// or, with cut, replaced by now.
func (c *framingConn) DisarmBodyDeadline(cut bool) {
	c.bodyMu.Lock()
	defer c.bodyMu.Unlock()
	c.bodyArmed.Store(false)
	switch {
	case cut:
		_ = c.Conn.SetReadDeadline(time.Now())
	case c.bodyApplied:
		_ = c.Conn.SetReadDeadline(time.Time{})
	}
	c.bodyApplied = false
}

// nextAmbiguous takes the verdict on the next request whose headers were
// read: whether it had both Content-Length and Transfer-Encoding.
func (c *framingConn) nextAmbiguous() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.sc.verdicts) == 0 {
		return false
	}
	v := c.sc.verdicts[0]
	c.sc.verdicts = c.sc.verdicts[1:]
	return v
}

// framingListener wraps every accepted connection in a framingConn.
type framingListener struct{ net.Listener }

func (l framingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return newFramingConn(c), nil
}

// withFraming is an http.Server ConnContext: it lets handlers find the
// framingConn of their request, the framing check and the chain (as its
// BodyDeadline) under one key.
func withFraming(ctx context.Context, c net.Conn) context.Context {
	if fc, ok := c.(*framingConn); ok {
		return chain.WithBodyDeadline(ctx, fc)
	}
	return ctx
}

// refuseAmbiguousFraming answers 400, and closes the connection, for a
// request that had both Content-Length and Transfer-Encoding. Every request
// of a watched connection must pass here, in order: each takes its verdict.
func refuseAmbiguousFraming(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if fc, ok := chain.BodyDeadlineOf(r.Context()).(*framingConn); ok && fc.nextAmbiguous() {
			w.Header().Set("Connection", "close")
			http.Error(w, "detour: the request has both Content-Length and Transfer-Encoding, which proxies may read differently (RFC 9112 §6.1); send only one of them", http.StatusBadRequest)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// Scanner states.
const (
	stRequestLine = iota // the first line of a request
	stHeader             // header lines, up to the blank line
	stBody               // remaining bytes of a Content-Length body
	stChunkSize          // a chunk's size line
	stChunkData          // remaining bytes of a chunk
	stChunkEnd           // the CRLF after a chunk's data
	stTrailer            // trailer lines after the last chunk
	stOff                // not HTTP any more (CONNECT, upgrade) or not followable
)

// framingScanner follows the requests on a byte stream as net/http frames
// them — header block, then a Content-Length body or a chunked one — and
// records a verdict per request. It never holds more than one line.
type framingScanner struct {
	state     int
	line      []byte
	headerLen int
	remaining int64

	// The request being read. Only what the verdict needs of its request
	// line is kept, so that scanning allocates nothing for a request
	// without framing headers.
	connect, optionsStar, http10 bool
	upgrade                      bool
	// Of the framing headers only what the verdict and the body's framing
	// need is kept, in the scanner itself: how many of each, the first
	// Content-Length (in clArr while it fits), whether every other one
	// repeats it, and whether the first Transfer-Encoding is "chunked".
	clCount, teCount int
	clFirst          []byte
	clArr            [24]byte
	clDiffers        bool
	teChunked        bool

	verdicts []bool
}

func (f *framingScanner) scan(p []byte) {
	for len(p) > 0 {
		switch f.state {
		case stOff:
			return
		case stBody, stChunkData:
			k := min(int64(len(p)), f.remaining)
			f.remaining -= k
			p = p[k:]
			if f.remaining == 0 {
				if f.state == stBody {
					f.nextRequest()
				} else {
					f.state = stChunkEnd
				}
			}
			continue
		}
		i := bytes.IndexByte(p, '\n')
		part := p
		if i >= 0 {
			part = p[:i]
		}
		limit := maxChunkLine
		if f.state == stRequestLine || f.state == stHeader || f.state == stTrailer {
			limit = maxScannedHeaderBytes - f.headerLen
		}
		if len(f.line)+len(part) > limit {
			f.state = stOff
			return
		}
		f.line = append(f.line, part...)
		if i < 0 {
			return
		}
		p = p[i+1:]
		if f.state == stRequestLine || f.state == stHeader {
			f.headerLen += len(f.line) + 1
		}
		line := bytes.TrimSuffix(f.line, []byte("\r"))
		f.onLine(line)
		f.line = f.line[:0]
	}
}

// onLine takes one line, without its line break. line is f.line's memory,
// reused for the next line: whatever is kept of it is copied.
func (f *framingScanner) onLine(line []byte) {
	switch f.state {
	case stRequestLine:
		method, rest, ok1 := bytes.Cut(line, []byte(" "))
		target, proto, ok2 := bytes.Cut(rest, []byte(" "))
		if !ok1 || !ok2 {
			// net/http refuses it and closes the connection.
			f.state = stOff
			return
		}
		f.connect = string(method) == http.MethodConnect
		f.optionsStar = string(method) == "OPTIONS" && string(target) == "*"
		f.http10 = string(proto) == "HTTP/1.0"
		f.state = stHeader
	case stHeader:
		if len(line) == 0 {
			f.endHeaders()
			return
		}
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			f.state = stOff
			return
		}
		// By length first: most headers are none of the three, and a
		// length compare spares them the case-folding compares.
		switch {
		case len(name) != len("Content-Length") && len(name) != len("Transfer-Encoding") && len(name) != len("Upgrade"):
		case bytes.EqualFold(name, []byte("Content-Length")):
			v := bytes.TrimSpace(value)
			if f.clCount == 0 {
				f.clFirst = append(f.clArr[:0], v...)
			} else if !bytes.Equal(v, f.clFirst) {
				f.clDiffers = true
			}
			f.clCount++
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			if f.teCount == 0 {
				f.teChunked = bytes.EqualFold(bytes.TrimSpace(value), []byte("chunked"))
			}
			f.teCount++
		case bytes.EqualFold(name, []byte("Upgrade")):
			f.upgrade = true
		}
	case stChunkSize:
		size, _, _ := bytes.Cut(line, []byte(";"))
		n, err := parseHex(bytes.TrimSpace(size))
		if err != nil {
			f.state = stOff
			return
		}
		if n == 0 {
			f.state = stTrailer
			return
		}
		f.remaining, f.state = int64(n), stChunkData
	case stChunkEnd:
		if len(line) != 0 {
			f.state = stOff
			return
		}
		f.state = stChunkSize
	case stTrailer:
		if len(line) == 0 {
			f.nextRequest()
		}
	}
}

// parseHex is strconv.ParseUint(string(b), 16, 63) without the copy: a
// chunk size line is scanned for every chunk of a chunked body.
func parseHex(b []byte) (uint64, error) {
	if len(b) == 0 {
		return 0, strconv.ErrSyntax
	}
	var n uint64
	for _, c := range b {
		var d byte
		switch {
		case '0' <= c && c <= '9':
			d = c - '0'
		case 'a' <= c && c <= 'f':
			d = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, strconv.ErrSyntax
		}
		if n >= 1<<59 { // one more digit would pass 63 bits
			return 0, strconv.ErrRange
		}
		n = n<<4 | uint64(d)
	}
	return n, nil
}

// endHeaders records the verdict on the request whose header block just
// ended and moves on to its body.
func (f *framingScanner) endHeaders() {
	// net/http answers OPTIONS * itself, without detour's handler: it
	// takes no verdict.
	if !f.optionsStar {
		if len(f.verdicts) == maxPendingVerdicts {
			f.state = stOff
			return
		}
		// Transfer-Encoding counts from HTTP/1.1 on; net/http ignores it
		// in HTTP/1.0 and frames by Content-Length alone.
		http11 := !f.http10
		ambiguous := http11 && f.teCount > 0 && f.clCount > 0
		f.verdicts = append(f.verdicts, ambiguous)
		if ambiguous {
			// Refused, and the connection closed.
			f.state = stOff
			return
		}
	}
	switch {
	case f.connect || f.upgrade:
		// What follows is a tunnel, not requests.
		f.state = stOff
	case !f.http10 && f.teCount > 0:
		if f.teCount != 1 || !f.teChunked {
			// net/http refuses any other transfer coding.
			f.state = stOff
			return
		}
		f.state = stChunkSize
	case f.clCount > 0:
		n, err := strconv.ParseUint(string(f.clFirst), 10, 63)
		if f.clDiffers {
			err = strconv.ErrSyntax
		}
		if err != nil {
			f.state = stOff
			return
		}
		if n == 0 {
			f.nextRequest()
			return
		}
		f.remaining, f.state = int64(n), stBody
	default:
		f.nextRequest()
	}
}

func (f *framingScanner) nextRequest() {
	f.state = stRequestLine
	f.headerLen = 0
	f.connect, f.optionsStar, f.http10 = false, false, false
	f.upgrade = false
	f.clCount, f.teCount, f.clFirst, f.clDiffers, f.teChunked = 0, 0, nil, false, false
}
