package proxy

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// netHTTPRequests parses a byte stream the way net/http's server does,
// request after request, each body read whole, and returns the offset at
// which each request's header block ended, up to where the stream ended or
// broke.
func netHTTPRequests(stream []byte) []int {
	src := bytes.NewReader(stream)
	br := bufio.NewReader(src)
	var ends []int
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return ends
		}
		// What left the stream, less what the reader still holds.
		ends = append(ends, len(stream)-src.Len()-br.Buffered())
		if req.Method == http.MethodConnect || req.Header.Get("Upgrade") != "" {
			return ends
		}
		if _, err := io.Copy(io.Discard, req.Body); err != nil {
			return ends
		}
	}
}

// scanAll feeds stream to a scanner step bytes at a time.
func scanAll(stream []byte, step int) []bool {
	f := framingScanner{state: stRequestLine}
	for len(stream) > 0 {
		k := min(step, len(stream))
		f.scan(stream[:k])
		stream = stream[k:]
	}
	return f.verdicts
}

// scanEnds feeds stream a byte at a time and returns the offset at which
// each verdict was taken: the end of a header block, as the scanner saw it.
func scanEnds(stream []byte) []int {
	f := framingScanner{state: stRequestLine}
	var ends []int
	for i := range stream {
		f.scan(stream[i : i+1])
		if len(f.verdicts) > len(ends) {
			ends = append(ends, i+1)
		}
	}
	return ends
}

const (
	reqPlain   = "POST /v1/chat/completions HTTP/1.1\r\nHost: h\r\nContent-Length: 11\r\n\r\n{\"a\":\"b\r\n\"}"
	reqGet     = "GET /v1/models HTTP/1.1\r\nHost: h\r\n\r\n"
	reqChunked = "POST /x HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n" +
		"4;ext=1\r\nabc\n\r\n" + "B\r\n\r\nPOST / HT\r\n" + "0\r\nX-Trailer: 1\r\n\r\n"
	reqBoth = "POST /x HTTP/1.1\r\nHost: h\r\ncontent-length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
	// HTTP/1.0 has no Transfer-Encoding: net/http frames it by length.
	reqBoth10 = "POST /x HTTP/1.0\r\nHost: h\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\nabc"
	reqBareLF = "POST /x HTTP/1.1\nHost: h\nContent-Length: 2\n\n{}"
)

// TestFramingScannerFollowsNetHTTP: the scanner finds the same requests in
// a stream as net/http does — bodies that contain request-like bytes,
// chunk extensions, trailers, bare-LF lines, pipelining — and flags exactly
// the ones with both Content-Length and Transfer-Encoding, whichever way the
// bytes are split into reads.
func TestFramingScannerFollowsNetHTTP(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		stream string
		want   []bool
	}{
		{"content-length", reqPlain, []bool{false}},
		{"no body", reqGet, []bool{false}},
		{"chunked", reqChunked, []bool{false}},
		{"both", reqBoth, []bool{true}},
		{"both in HTTP/1.0", reqBoth10, []bool{false}},
		{"bare LF", reqBareLF, []bool{false}},
		{"pipelined", reqPlain + reqChunked + reqGet + reqPlain, []bool{false, false, false, false}},
		// After a refused request the connection is closed: nothing more
		// is followed.
		{"both after others", reqGet + reqChunked + reqBoth + reqPlain, []bool{false, false, true}},
		{"CONNECT ends it", "CONNECT h:443 HTTP/1.1\r\nHost: h:443\r\n\r\n" + reqBoth, []bool{false}},
		// net/http answers OPTIONS * without calling a handler.
		{"OPTIONS * takes no verdict", "OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n" + reqBoth, []bool{true}},
	}
	for _, tt := range tests {
		for _, step := range []int{1, 3, 7, 4096} {
			if got := scanAll([]byte(tt.stream), step); !slices.Equal(got, tt.want) {
				t.Errorf("%s (reads of %d): verdicts %v; want %v", tt.name, step, got, tt.want)
			}
		}
		if strings.HasPrefix(tt.stream, "OPTIONS") {
			continue
		}
		got, want := scanEnds([]byte(tt.stream)), netHTTPRequests([]byte(tt.stream))
		if n := min(len(got), len(want)); !slices.Equal(got[:n], want[:n]) {
			t.Errorf("%s: header blocks end at %v; net/http's at %v", tt.name, got, want)
		}
	}
}

// FuzzFramingScanner checks the scanner against net/http on arbitrary
// streams: every request both read must be found at the same place, so
// that each verdict is taken by the request it is about. (Past a request
// net/http refuses, the connection is closed, and what the scanner makes of
// the rest does not matter.)
func FuzzFramingScanner(f *testing.F) {
	for _, s := range []string{reqPlain, reqGet, reqChunked, reqBoth, reqBoth10, reqBareLF, reqPlain + reqChunked + reqGet} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, stream []byte) {
		if bytes.Contains(bytes.ToUpper(stream), []byte("OPTIONS")) {
			t.Skip("OPTIONS * is answered by net/http without a handler")
		}
		got, want := scanEnds(stream), netHTTPRequests(stream)
		if n := min(len(got), len(want)); !slices.Equal(got[:n], want[:n]) {
			t.Fatalf("header blocks end at %v; net/http's at %v, in %q", got, want, stream)
		}
	})
}
