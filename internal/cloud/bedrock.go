package cloud

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/config"

	"github.com/detour-proxy/detour/policy"
	"github.com/detour-proxy/detour/rewrite"
	bedrockcodec "github.com/detour-proxy/detour/rewrite/bedrock"
)

// bedrockService is the SigV4 signing name of bedrock-runtime.
const bedrockService = "bedrock"

// maxBedrockErrorBody bounds the error body read to add its type.
const maxBedrockErrorBody = 64 << 10

// awsCredentials loads the AWS SDK's default credential chain once per
// region, on first use, and keeps it: the chain's provider is an
// aws.CredentialsCache, which refreshes temporary credentials (web
// identity, SSO, container and instance roles) before they expire. A
// failed load is not kept, so credentials that appear later (a mounted
// token) are found by the next request.
type awsCredentials struct {
	region string
	load   func(ctx context.Context, region string) (aws.CredentialsProvider, error)

	mu       sync.Mutex
	provider aws.CredentialsProvider
}

// loadAWSChain is config.LoadDefaultConfig's credential chain: env,
// shared config and credentials files (profiles, SSO, process), web
// identity (EKS IRSA and Pod Identity's container endpoint), ECS and EC2
// roles.
func loadAWSChain(ctx context.Context, region string) (aws.CredentialsProvider, error) {
	cfg, err := config.LoadDefaultConfig(ctx, config.WithRegion(region))
	if err != nil {
		return nil, err
	}
	if cfg.Credentials == nil {
		return nil, errors.New("no AWS credentials found")
	}
	return cfg.Credentials, nil
}

func (c *awsCredentials) retrieve(ctx context.Context) (aws.Credentials, error) {
	c.mu.Lock()
	p := c.provider
	if p == nil {
		var err error
		if p, err = c.load(ctx, c.region); err != nil {
			c.mu.Unlock()
			return aws.Credentials{}, fmt.Errorf("bedrock: loading AWS credentials: %w", err)
		}
		c.provider = p
	}
	c.mu.Unlock()
	creds, err := p.Retrieve(ctx)
	if err != nil {
		// The SDK's errors name the source, never the secret.
		return aws.Credentials{}, fmt.Errorf("bedrock: AWS credentials: %w", err)
	}
	return creds, nil
}

func (r *Registry) bedrock(u *policy.Upstream, next http.RoundTripper) http.RoundTripper {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.aws[u.Cloud.Region]
	if !ok {
		if r.aws == nil {
			r.aws = map[string]*awsCredentials{}
		}
		c = &awsCredentials{region: u.Cloud.Region, load: loadAWSChain}
		r.aws[u.Cloud.Region] = c
	}
	return &bedrock{u: u, next: next, creds: c, signer: v4.NewSigner()}
}

// bedrock signs requests for bedrock-runtime with SigV4 and turns the
// answers into what the chain reads: a ConverseStream's binary event
// stream becomes SSE, and an error body gets its x-amzn-ErrorType as
// __type (docs/vendors.md#amazon-bedrock-upstream).
type bedrock struct {
	u      *policy.Upstream
	next   http.RoundTripper
	creds  *awsCredentials
	signer *v4.Signer
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
	if err := b.signer.SignHTTP(req.Context(), creds, r, hex.EncodeToString(sum[:]), bedrockService, b.u.Cloud.Region, time.Now()); err != nil {
		return nil, fmt.Errorf("bedrock: signing: %w", err)
	}
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

// eventStreamSSE reads an AWS event stream (decoded by the SDK's decoder:
// prelude, headers, payload, both CRCs checked) and yields one SSE event
// per message: "event: <:event-type>" and the payload as data; an exception
// as "event: <:exception-type>" with the payload's __type set; an error
// message as an internalServerException.
type eventStreamSSE struct {
	body io.ReadCloser
	// src buffers body: the SDK's decoder reads a message in a dozen
	// small reads (prelude, each header, payload, CRC), which would each
	// go to the transport's body.
	src     *bufio.Reader
	dec     *eventstream.Decoder
	payload []byte
	buf     []byte
	off     int
	err     error
}

func newEventStreamSSE(body io.ReadCloser) *eventStreamSSE {
	return &eventStreamSSE{body: body, src: bufio.NewReaderSize(body, 8<<10), dec: eventstream.NewDecoder()}
}

func (e *eventStreamSSE) Read(p []byte) (int, error) {
	for e.off == len(e.buf) {
		if e.err != nil {
			return 0, e.err
		}
		e.buf, e.off = e.buf[:0], 0
		msg, err := e.dec.Decode(e.src, e.payload[:0])
		if err != nil {
			e.err = err
			continue
		}
		e.payload = msg.Payload[:0]
		e.buf = appendSSE(e.buf, msg)
	}
	n := copy(p, e.buf[e.off:])
	e.off += n
	return n, nil
}

func (e *eventStreamSSE) Close() error { return e.body.Close() }

func headerString(m eventstream.Message, name string) string {
	if v := m.Headers.Get(name); v != nil {
		return v.String()
	}
	return ""
}

func appendSSE(dst []byte, m eventstream.Message) []byte {
	name, data := headerString(m, ":event-type"), m.Payload
	switch headerString(m, ":message-type") {
	case "exception":
		name = headerString(m, ":exception-type")
		data = withAWSType(data, name)
	case "error":
		name = "internalServerException"
		msg, _ := json.Marshal(headerString(m, ":error-message"))
		code, _ := json.Marshal(headerString(m, ":error-code"))
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
