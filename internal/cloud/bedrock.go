package cloud

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/detour-proxy/detour/internal/eventstream"
	"github.com/detour-proxy/detour/policy"
	"github.com/detour-proxy/detour/rewrite"
	bedrockcodec "github.com/detour-proxy/detour/rewrite/bedrock"
)

// bedrockService is the SigV4 signing name of bedrock-runtime.
const bedrockService = "bedrock"

// maxBedrockErrorBody bounds the error body read to add its type.
const maxBedrockErrorBody = 64 << 10

func (r *Registry) bedrock(u *policy.Upstream, next http.RoundTripper) http.RoundTripper {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.aws[u.Cloud.Region]
	if !ok {
		if r.aws == nil {
			r.aws = map[string]*awsCredentials{}
		}
		c = &awsCredentials{region: u.Cloud.Region, load: defaultAWSChain().load}
		r.aws[u.Cloud.Region] = c
	}
	return &bedrock{u: u, next: next, creds: c}
}

// bedrock signs requests for bedrock-runtime with SigV4 and turns the
// answers into what the chain reads: a ConverseStream's binary event
// stream becomes SSE, and an error body gets its x-amzn-ErrorType as
// __type (docs/vendors.md#amazon-bedrock-upstream).
type bedrock struct {
	u     *policy.Upstream
	next  http.RoundTripper
	creds *awsCredentials
}

func (b *bedrock) RoundTrip(req *http.Request) (*http.Response, error) {
	body, err := readBody(req)
	if err != nil {
		return nil, err
	}
	creds, err := b.creds.retrieve(req.Context())
	if err != nil {
		return nil, err
	}
	r := cloneRequest(req)
	u := *req.URL
	rel := strings.TrimPrefix(u.Path, b.u.BaseURL.Path)
	if esc, ok := bedrockcodec.EscapedModelPath(rel); ok {
		u.RawPath = b.u.BaseURL.EscapedPath() + esc
		r.URL = &u
	}
	// Bedrock wants the event stream asked for, not SSE.
	if r.Header.Get("Accept") == "text/event-stream" {
		r.Header.Set("Accept", "application/vnd.amazon.eventstream")
	}
	sum := sha256.Sum256(body)
	b.creds.signer.Sign(r, hex.EncodeToString(sum[:]), creds, bedrockService, b.u.Cloud.Region, time.Now())
	resp, err := b.next.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	switch {
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		typeErrorBody(resp)
	case resp.Header.Get("Content-Type") == "application/vnd.amazon.eventstream":
		resp.Body = newEventStreamSSE(resp.Body)
		resp.Header.Set("Content-Type", "text/event-stream")
		resp.Header.Del("Content-Length")
		resp.ContentLength = -1
	}
	return resp, nil
}

// typeErrorBody adds x-amzn-ErrorType to a Bedrock error body, which is
// only {"message": …}, as __type: then the body alone says what failed,
// for the classifier and for the error the app gets.
func typeErrorBody(resp *http.Response) {
	typ := rewrite.AWSErrorType(resp.Header.Get("X-Amzn-Errortype"))
	if typ == "" {
		return
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxBedrockErrorBody))
	resp.Body.Close()
	out := withAWSType(b, typ)
	if err != nil {
		out = b // a broken read stays broken, for the chain to judge
	}
	resp.Body = io.NopCloser(bytes.NewReader(out))
	resp.ContentLength = int64(len(out))
	resp.Header.Set("Content-Length", strconv.Itoa(len(out)))
}

// withAWSType returns payload, a JSON object, with "__type" first; a
// payload that is not an object becomes {"__type": typ}.
func withAWSType(payload []byte, typ string) []byte {
	t, _ := json.Marshal(typ)
	p := bytes.TrimSpace(payload)
	var probe map[string]json.RawMessage
	if len(p) < 2 || p[0] != '{' || json.Unmarshal(p, &probe) != nil {
		return []byte(`{"__type":` + string(t) + `}`)
	}
	if _, has := probe["__type"]; has {
		return p
	}
	out := make([]byte, 0, len(p)+len(t)+12)
	out = append(out, `{"__type":`...)
	out = append(out, t...)
	if rest := bytes.TrimSpace(p[1:]); len(rest) > 0 && rest[0] != '}' {
		out = append(out, ',')
	}
	return append(out, p[1:]...)
}

// eventStreamSSE reads an AWS event stream (internal/eventstream: prelude,
// headers, payload, both CRCs checked, lengths bounded) and yields one SSE event
// per message: "event: <:event-type>" and the payload as data; an exception
// as "event: <:exception-type>" with the payload's __type set; an error
// message as an internalServerException.
type eventStreamSSE struct {
	body io.ReadCloser
	// The decoder reads through a buffer: it reads a message in two reads
	// (prelude, rest), and a stream's messages are small, so one read of
	// the transport's body serves several.
	dec *eventstream.Decoder
	buf []byte
	off int
	err error
}

func newEventStreamSSE(body io.ReadCloser) *eventStreamSSE {
	return &eventStreamSSE{body: body, dec: eventstream.NewDecoder(bufio.NewReaderSize(body, 8<<10))}
}

func (e *eventStreamSSE) Read(p []byte) (int, error) {
	for e.off == len(e.buf) {
		if e.err != nil {
			return 0, e.err
		}
		e.buf, e.off = e.buf[:0], 0
		msg, err := e.dec.Next()
		if err != nil {
			e.err = err
			continue
		}
		e.buf = appendSSE(e.buf, msg)
	}
	n := copy(p, e.buf[e.off:])
	e.off += n
	return n, nil
}

func (e *eventStreamSSE) Close() error { return e.body.Close() }

func appendSSE(dst []byte, m eventstream.Message) []byte {
	// The event's name is appended from the decoder's buffer: an event
	// costs no allocation.
	name, data := m.HeaderBytes(":event-type"), m.Payload
	switch string(m.HeaderBytes(":message-type")) {
	case "exception":
		name = m.HeaderBytes(":exception-type")
		data = withAWSType(data, string(name))
	case "error":
		name = []byte("internalServerException")
		msg, _ := json.Marshal(m.HeaderString(":error-message"))
		code, _ := json.Marshal(m.HeaderString(":error-code"))
		data = []byte(`{"__type":` + string(code) + `,"message":` + string(msg) + `}`)
	}
	if bytes.ContainsAny(data, "\r\n") {
		// One SSE data line per event: a pretty-printed payload is
		// compacted (JSON strings hold no raw line breaks).
		var c bytes.Buffer
		if json.Compact(&c, data) == nil {
			data = c.Bytes()
		} else {
			data = bytes.ReplaceAll(bytes.ReplaceAll(data, []byte("\r"), nil), []byte("\n"), nil)
		}
	}
	dst = append(dst, "event: "...)
	dst = append(dst, name...)
	dst = append(dst, "\ndata: "...)
	dst = append(dst, data...)
	return append(dst, "\n\n"...)
}
