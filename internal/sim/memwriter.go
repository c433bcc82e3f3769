package sim

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
	"time"
)

// memWriter is the http.ResponseWriter of the in-memory network and of the
// app's side of a simulated request: it keeps the status, the headers as
// they were when the status was written, and the body. It is what
// net/http/httptest's recorder does, without linking a test package into
// the detour binary.
type memWriter struct {
	header  http.Header
	sent    http.Header // the header at WriteHeader time
	code    int
	written bool
	body    bytes.Buffer
}

func newMemWriter() *memWriter { return &memWriter{header: http.Header{}, code: http.StatusOK} }

func (w *memWriter) Header() http.Header { return w.header }

func (w *memWriter) WriteHeader(code int) {
	if w.written {
		return
	}
	w.written, w.code, w.sent = true, code, w.header.Clone()
}

func (w *memWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.body.Write(p)
}

// Flush is there for the runner's streams (http.ResponseController); the
// body is kept whole anyway.
func (w *memWriter) Flush() { w.WriteHeader(http.StatusOK) }

// SetReadDeadline is there for the runner's bound on reading the app's body
// (http.ResponseController), as a real server's writer has it: the body is
// in memory and cannot trickle, so there is nothing to bound. Without it
// every simulated request built and wrapped an ErrNotSupported error twice.
func (w *memWriter) SetReadDeadline(time.Time) error { return nil }

// response is the answer as a client would receive it.
func (w *memWriter) response(req *http.Request) *http.Response {
	w.WriteHeader(http.StatusOK)
	resp := &http.Response{
		Status:        strconv.Itoa(w.code) + " " + http.StatusText(w.code),
		StatusCode:    w.code,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        w.sent,
		Body:          io.NopCloser(bytes.NewReader(w.body.Bytes())),
		ContentLength: -1,
		Request:       req,
	}
	if n, err := strconv.ParseInt(w.sent.Get("Content-Length"), 10, 64); err == nil {
		resp.ContentLength = n
	}
	return resp
}
