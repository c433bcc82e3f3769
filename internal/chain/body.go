package chain

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"syscall"
	"time"

	"github.com/detour-proxy/detour/policy"
)

// BodyDeadline is a connection that bounds the reads of a request body
// itself (the proxy's HTTP/1 connections): readRequestBody arms it instead
// of setting a read deadline through the ResponseWriter.
type BodyDeadline interface {
	// ArmBodyDeadline bounds the connection's reads by t, from the first
	// read that reaches the connection on; a body the server has already
	// buffered is read without one.
	ArmBodyDeadline(t time.Time)
	// DisarmBodyDeadline ends what ArmBodyDeadline started: reads are
	// unbounded again, or, with cut, bounded by now (the rest of a refused
	// body is not waited for).
	DisarmBodyDeadline(cut bool)
}

type bodyDeadlineKey struct{}

// WithBodyDeadline returns ctx carrying d, for the requests read from d's
// connection (an http.Server's ConnContext).
func WithBodyDeadline(ctx context.Context, d BodyDeadline) context.Context {
	return context.WithValue(ctx, bodyDeadlineKey{}, d)
}

// BodyDeadlineOf returns the BodyDeadline WithBodyDeadline put in ctx, or
// nil.
func BodyDeadlineOf(ctx context.Context) BodyDeadline { return bodyDeadlineOf(ctx) }

func bodyDeadlineOf(ctx context.Context) BodyDeadline {
	d, _ := ctx.Value(bodyDeadlineKey{}).(BodyDeadline)
	return d
}

// firstBodyBuffer is the buffer a body of unknown length (chunked) starts
// with; it doubles as the body grows.
const firstBodyBuffer = 64 << 10

// bodyLimit is the largest body one request may have: the runner's
// per-request bound, and never more than the whole process's budget (a body
// that could never fit is refused with 413 rather than told to retry).
func (s *session) bodyLimit() int64 {
	return min(s.maxBody(), s.pol.Bounds.BufferedBytes)
}

// readRequestBody buffers the app's request body for replay, within three
// bounds: the per-request size (413, refused from Content-Length before a
// byte is read), the process-wide budget of buffered bytes (503 with
// retry-after: 1; the request holds its share until it ends), and
// timeouts.client_body counted from the request's arrival (408). Each
// refusal is an error in the app's shape and closes the connection, since
// the rest of the body is never read. A body whose framing is broken (a
// malformed chunk) gets 400; a client that went away gets nothing (499 in
// the log). It reports whether the request goes on.
func (s *session) readRequestBody() bool {
	b := s.req.Body
	if b == nil || b == http.NoBody {
		return true
	}
	limit := s.bodyLimit()
	if s.req.ContentLength > limit {
		s.refuseBody(http.StatusRequestEntityTooLarge, policy.ClassInvalidRequest,
			fmt.Sprintf("detour: request body of %d bytes exceeds the limit of %d bytes", s.req.ContentLength, limit), 0,
			"request body too large")
		return false
	}

	// The read deadline is set on the app's connection, so that a body
	// that trickles in (slowloris) is cut even inside a blocked Read. Once
	// the whole body is in it is lifted: net/http's background read, which
	// watches for the app hanging up during the answer, must not inherit
	// it. A body left unread is refused, and then the deadline is moved to
	// now, or net/http would wait (without a bound) to discard the rest of
	// it before closing the connection. Writers without deadlines (none of
	// detour's own servers) read without one.
	bound := min(s.pol.Bounds.ClientBody, s.pol.Deadline)
	if bd := bodyDeadlineOf(s.req.Context()); bd != nil {
		// The app's connection applies the deadline only to a read that
		// reaches it: a body net/http already holds (most of them: it
		// came with the headers) is read without arming a timer and
		// lifting it again.
		bd.ArmBodyDeadline(s.rec.Start.Add(bound))
		defer func() { bd.DisarmBodyDeadline(!s.bodyRead) }()
	} else if rc := http.NewResponseController(s.w); rc.SetReadDeadline(s.rec.Start.Add(bound)) == nil {
		defer func() {
			if s.bodyRead {
				_ = rc.SetReadDeadline(time.Time{})
			} else {
				_ = rc.SetReadDeadline(time.Now())
			}
		}()
	}

	var body []byte
	var err error
	if n := s.req.ContentLength; n >= 0 {
		if !s.reserve(n, n) {
			return false
		}
		body = make([]byte, n)
		_, err = io.ReadFull(b, body)
	} else {
		body, err = s.readChunked(b, limit)
		if body == nil && err == nil {
			return false // refused, already answered
		}
	}
	if err != nil {
		s.bodyReadFailed(err, bound)
		return false
	}
	s.body, s.bodyRead = body, true
	if s.req.ProtoMajor == 1 {
		// Read to its end (net/http's body has seen EOF): closed, it
		// spares net/http looking for more of it when the answer's
		// headers are written (an io.CopyN and its allocations per
		// request). Closing a body read whole changes nothing else: the
		// connection stays open for the next request.
		_ = b.Close()
	}
	return true
}

// readChunked reads a body of unknown length, growing its buffer (and the
// request's reservation with it) as the bytes arrive. A nil body and nil
// error mean the body was refused and the app answered.
func (s *session) readChunked(b io.Reader, limit int64) ([]byte, error) {
	size := min(int64(firstBodyBuffer), limit+1)
	if !s.reserve(size, limit) {
		return nil, nil
	}
	buf := make([]byte, 0, size)
	for {
		if int64(len(buf)) == int64(cap(buf)) {
			if int64(len(buf)) > limit {
				s.refuseBody(http.StatusRequestEntityTooLarge, policy.ClassInvalidRequest,
					fmt.Sprintf("detour: request body exceeds the limit of %d bytes", limit), 0, "request body too large")
				return nil, nil
			}
			// Every buffer outgrown stays in memory until the garbage
			// collector frees it, so the reservation keeps counting it
			// until the request ends: a body of unknown length costs up
			// to twice its size. (Given back at once, the outgrown
			// buffers of many bodies growing together were measured to
			// take the process far past the budget.)
			grown := min(2*int64(cap(buf)), limit+1)
			if !s.reserve(grown, limit+1-int64(len(buf))) {
				return nil, nil
			}
			nb := make([]byte, len(buf), grown)
			copy(nb, buf)
			buf = nb
		}
		n, err := b.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if errors.Is(err, io.EOF) {
			if int64(len(buf)) > limit {
				s.refuseBody(http.StatusRequestEntityTooLarge, policy.ClassInvalidRequest,
					fmt.Sprintf("detour: request body exceeds the limit of %d bytes", limit), 0, "request body too large")
				return nil, nil
			}
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// reserve takes n bytes of the process's body budget for this request,
// answering 503 when they do not fit. What a request reserves is released
// when it ends (session.run).
//
// Before the 503 the rest of the body (at most unread bytes, the most the
// request may still send) is read and thrown away, which costs no memory:
// an app answered while it is still sending sees its write fail with a
// connection reset rather than the 503, and its SDK would not learn to wait
// for retry-after.
func (s *session) reserve(n, unread int64) bool {
	capacity := s.pol.Bounds.BufferedBytes
	if s.reserved+n > capacity {
		// This request alone would take more than the whole budget (a
		// growing chunked body, briefly held twice while it is copied):
		// no retry can help it.
		s.refuseBody(http.StatusRequestEntityTooLarge, policy.ClassInvalidRequest,
			fmt.Sprintf("detour: request body exceeds what limits.buffered_bytes (%d bytes) can hold", capacity), 0, "request body too large")
		return false
	}
	if !s.r.budget.reserve(n, capacity) {
		if m, err := io.CopyN(io.Discard, s.req.Body, unread+1); m <= unread && errors.Is(err, io.EOF) {
			// The whole body is read: the connection can serve the
			// retry.
			s.bodyRead = true
			s.writeAppError(http.StatusServiceUnavailable, policy.ClassOverloaded, budgetMessage(s.pol.Bounds.BufferedBytes), time.Second)
			s.rec.Error = "buffered request bodies at limits.buffered_bytes"
			return false
		}
		s.refuseBody(http.StatusServiceUnavailable, policy.ClassOverloaded, budgetMessage(s.pol.Bounds.BufferedBytes),
			time.Second, "buffered request bodies at limits.buffered_bytes")
		return false
	}
	s.reserved += n
	return true
}

func budgetMessage(capacity int64) string {
	return fmt.Sprintf("detour is holding as many request bodies as limits.buffered_bytes (%d bytes) allows; retry in a moment", capacity)
}

// refuseBody answers a request whose body detour will not read (further).
// The connection is closed after the answer: the unread rest of the body
// would otherwise be taken for the next request.
func (s *session) refuseBody(status int, class policy.Class, msg string, retryAfter time.Duration, logged string) {
	s.w.Header().Set("Connection", "close")
	s.writeAppError(status, class, msg, retryAfter)
	s.rec.Error = logged
}

// bodyReadFailed answers a body that could not be read: too slow (408),
// broken framing (400), or the app went away (nothing to answer).
func (s *session) bodyReadFailed(err error, bound time.Duration) {
	switch bodyFailure(err) {
	case bodyTimeout:
		s.refuseBody(http.StatusRequestTimeout, policy.ClassTimeout,
			fmt.Sprintf("detour: the request body was not received within %s (timeouts.client_body)", bound), 0,
			"request body not received within "+bound.String())
	case bodyMalformed:
		s.refuseBody(http.StatusBadRequest, policy.ClassInvalidRequest,
			"detour: the request body's framing is broken: "+err.Error(), 0, "malformed request body framing: "+err.Error())
	default:
		s.clientGone("reading the request body: " + err.Error())
	}
}

type bodyFailureKind int

const (
	bodyGone bodyFailureKind = iota
	bodyTimeout
	bodyMalformed
)

// bodyFailure sorts a request body read error. net/http reports a broken
// chunked encoding with errors of its own (unexported), so anything that is
// neither a timeout nor the connection ending is taken as malformed.
func bodyFailure(err error) bodyFailureKind {
	var ne net.Error
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return bodyTimeout
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed),
		errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE), errors.Is(err, http.ErrBodyReadAfterClose):
		return bodyGone
	}
	var op *net.OpError
	if errors.As(err, &op) {
		return bodyGone
	}
	return bodyMalformed
}
