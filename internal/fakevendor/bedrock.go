package fakevendor

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/detour-proxy/detour/internal/eventstream"
	"github.com/detour-proxy/detour/internal/sigv4"
	"github.com/detour-proxy/detour/rewrite"
)

// Bedrock is a fake bedrock-runtime endpoint: the Converse and
// ConverseStream APIs (POST /model/MODEL/converse, /converse-stream),
// answering as deterministically as Vendor does (the same text, tool calls
// and tool-result echo), the stream in AWS's binary event stream encoded
// with the AWS SDK's encoder. Every request must carry a SigV4 signature
// that the SDK's own signer, given the fake's credentials and the
// request's X-Amz-Date, reproduces byte for byte; the date must be within
// five minutes of Now, as AWS requires. Its errors are Bedrock's
// (docs/vendors.md#amazon-bedrock-upstream).
type Bedrock struct {
	// AccessKeyID, SecretAccessKey and SessionToken are the credentials
	// whose signatures are accepted (SessionToken empty: none expected).
	AccessKeyID, SecretAccessKey, SessionToken string
	// Region is the signing region expected.
	Region string
	// Now is the clock the signature's date is checked against; nil is
	// time.Now.
	Now func() time.Time

	v *Vendor

	mu     sync.Mutex
	script []BedrockError
	seen   []BedrockRequest
}

// BedrockRequest is one request the fake answered or refused.
type BedrockRequest struct {
	Model  string
	Stream bool
	// Signed reports that the signature checked out.
	Signed bool
	// Body is the Converse request body.
	Body []byte
	// Header is a clone of the request's headers.
	Header http.Header
}

// BedrockError is one of Bedrock's error answers, scripted with
// Bedrock.Fail. The Stream ones are sent as an exception message inside
// the event stream, after the first text delta.
type BedrockError string

// Bedrock's errors (API_runtime_Converse, API_runtime_ConverseStreamOutput).
const (
	BedrockThrottling      BedrockError = "ThrottlingException"
	BedrockQuota           BedrockError = "ServiceQuotaExceededException"
	BedrockModelNotReady   BedrockError = "ModelNotReadyException"
	BedrockModelTimeout    BedrockError = "ModelTimeoutException"
	BedrockValidation      BedrockError = "ValidationException"
	BedrockContextTooLong  BedrockError = "ValidationException:context"
	BedrockAccessDenied    BedrockError = "AccessDeniedException"
	BedrockUnavailable     BedrockError = "ServiceUnavailableException"
	BedrockStreamThrottled BedrockError = "stream:throttlingException"
	BedrockStreamModel     BedrockError = "stream:modelStreamErrorException"
	// BedrockStreamEarly is a throttlingException right after
	// messageStart, before any content.
	BedrockStreamEarly BedrockError = "stream-early:throttlingException"
)

// bedrockErrors are the status and body of each error answer.
var bedrockErrors = map[BedrockError]struct {
	status int
	body   string
}{
	BedrockThrottling:     {429, `{"message":"Too many requests, please wait before trying again."}`},
	BedrockQuota:          {400, `{"message":"Your request exceeds the service quota for your account. You can view your quotas at Viewing service quotas. You can resubmit your request later."}`},
	BedrockModelNotReady:  {429, `{"message":"Model is not ready to serve inference requests. The AWS SDK will automatically retry the operation up to 5 times. For information about configuring automatic retries, see Retry behavior in the AWS SDKs and Tools reference guide."}`},
	BedrockModelTimeout:   {408, `{"message":"Model has timed out in processing the request. Try your request again."}`},
	BedrockValidation:     {400, `{"message":"The provided model identifier is invalid."}`},
	BedrockContextTooLong: {400, `{"message":"Input is too long for requested model."}`},
	BedrockAccessDenied:   {403, `{"message":"You don't have access to the model with the specified model ID."}`},
	BedrockUnavailable:    {503, `{"message":"Bedrock is unable to process your request."}`},
}

// bedrockStreamErrors are the payloads of the in-stream exceptions.
var bedrockStreamErrors = map[BedrockError]string{
	BedrockStreamThrottled: `{"message":"Too many tokens, please wait before trying again."}`,
	BedrockStreamModel:     `{"message":"Received error from model","originalMessage":"The model stream failed","originalStatusCode":500}`,
	BedrockStreamEarly:     `{"message":"Too many tokens, please wait before trying again."}`,
}

// NewBedrock returns a fake Bedrock accepting the given credentials for
// region, answering with opts (Name, Text, Chunks as for Vendor).
func NewBedrock(accessKeyID, secret, region string, opts Options) *Bedrock {
	if opts.Name == "" {
		opts.Name = "bedrock"
	}
	return &Bedrock{AccessKeyID: accessKeyID, SecretAccessKey: secret, Region: region, v: New(rewrite.Anthropic, opts)}
}

// Fail queues errors for the next signed requests.
func (b *Bedrock) Fail(errs ...BedrockError) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.script = append(b.script, errs...)
}

// Seen returns the requests received, in order.
func (b *Bedrock) Seen() []BedrockRequest {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]BedrockRequest, len(b.seen))
	for i, r := range b.seen {
		r.Header = r.Header.Clone()
		out[i] = r
	}
	return out
}

func (b *Bedrock) now() time.Time {
	if b.Now != nil {
		return b.Now()
	}
	return time.Now()
}

// bedrockAmzDate is X-Amz-Date's layout.
const bedrockAmzDate = "20060102T150405Z"

func (b *Bedrock) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, maxRequestBody))
	rest, ok := strings.CutPrefix(r.URL.EscapedPath(), "/model/")
	escModel, op, _ := strings.Cut(rest, "/")
	model, err := url.PathUnescape(escModel)
	if !ok || err != nil || model == "" || (op != "converse" && op != "converse-stream") || r.Method != http.MethodPost {
		bedrockError(w, http.StatusNotFound, "UnknownOperationException", `{"message":"Unknown operation"}`)
		return
	}
	seen := BedrockRequest{Model: model, Stream: op == "converse-stream", Body: body, Header: r.Header.Clone()}
	errType, errBody := b.verify(r, body)
	seen.Signed = errType == ""
	b.mu.Lock()
	b.seen = append(b.seen, seen)
	n := len(b.seen)
	var fail BedrockError
	if seen.Signed && len(b.script) > 0 {
		fail, b.script = b.script[0], b.script[1:]
	}
	b.mu.Unlock()
	if errType != "" {
		bedrockError(w, http.StatusForbidden, errType, errBody)
		return
	}
	if e, ok := bedrockErrors[fail]; ok {
		typ, _, _ := strings.Cut(string(fail), ":")
		bedrockError(w, e.status, typ, e.body)
		return
	}
	var req converseRequest
	if err := json.Unmarshal(body, &req); err != nil || len(req.Messages) == 0 {
		bedrockError(w, http.StatusBadRequest, "ValidationException", `{"message":"Malformed input request, please reformat your input and try again."}`)
		return
	}
	p := b.v.plan(req.toolRequest(), n)
	for i := range p.calls {
		p.calls[i].ID = "tooluse_fake" + pad(n) + "_" + strconv.Itoa(i)
	}
	usage := map[string]int{"inputTokens": min(max(len(body)/4, 1), maxPromptTokens), "outputTokens": p.outputTokens()}
	usage["totalTokens"] = usage["inputTokens"] + usage["outputTokens"]
	stop := "end_turn"
	if len(p.calls) > 0 {
		stop = "tool_use"
	}
	w.Header().Set("X-Amzn-Requestid", bedrockRequestID(n))
	if !seen.Stream {
		var content []any
		if len(p.calls) == 0 {
			content = append(content, map[string]any{"text": p.text})
		}
		for _, c := range p.calls {
			content = append(content, map[string]any{"toolUse": map[string]any{"toolUseId": c.ID, "name": c.Name, "input": json.RawMessage(c.Arguments)}})
		}
		out, _ := json.Marshal(map[string]any{
			"output":     map[string]any{"message": map[string]any{"role": "assistant", "content": content}},
			"stopReason": stop, "usage": usage, "metrics": map[string]any{"latencyMs": 42},
		})
		w.Header().Set("Content-Type", "application/json")
		w.Write(out)
		return
	}
	w.Header().Set("Content-Type", "application/vnd.amazon.eventstream")
	w.WriteHeader(http.StatusOK)
	es := bedrockStream{w: w}
	es.event("messageStart", map[string]any{"role": "assistant"})
	if fail == BedrockStreamEarly {
		es.exception(strings.TrimPrefix(string(fail), "stream-early:"), bedrockStreamErrors[fail])
		return
	}
	if len(p.calls) == 0 {
		for i, piece := range p.pieces {
			es.event("contentBlockDelta", map[string]any{"contentBlockIndex": 0, "delta": map[string]any{"text": piece}})
			if i == 0 {
				if payload, ok := bedrockStreamErrors[fail]; ok && fail != BedrockStreamEarly {
					es.exception(strings.TrimPrefix(string(fail), "stream:"), payload)
					return
				}
			}
		}
		es.event("contentBlockStop", map[string]any{"contentBlockIndex": 0})
	}
	for i, c := range p.calls {
		es.event("contentBlockStart", map[string]any{"contentBlockIndex": i, "start": map[string]any{"toolUse": map[string]any{"toolUseId": c.ID, "name": c.Name}}})
		es.event("contentBlockDelta", map[string]any{"contentBlockIndex": i, "delta": map[string]any{"toolUse": map[string]any{"input": c.Arguments}}})
		es.event("contentBlockStop", map[string]any{"contentBlockIndex": i})
	}
	es.event("messageStop", map[string]any{"stopReason": stop})
	es.event("metadata", map[string]any{"usage": usage, "metrics": map[string]any{"latencyMs": 42}})
}

func bedrockRequestID(n int) string {
	return "00000000-0000-4000-8000-" + pad(n) + "000000"
}

// verify checks the request's SigV4 signature by signing the same request
// again: the headers the signature names, the body's
// hash, the signing date the request carries. It returns Bedrock's error
// type and body when the signature does not hold.
func (b *Bedrock) verify(r *http.Request, body []byte) (errType, errBody string) {
	const mismatch = `{"message":"The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method. Consult the service documentation for details."}`
	auth := r.Header.Get("Authorization")
	cred, signed, ok := parseSigV4(auth)
	if !ok {
		return "MissingAuthenticationTokenException", `{"message":"Missing Authentication Token"}`
	}
	if !strings.HasPrefix(cred, b.AccessKeyID+"/") || b.AccessKeyID == "" {
		return "UnrecognizedClientException", `{"message":"The security token included in the request is invalid."}`
	}
	if b.SessionToken != "" && r.Header.Get("X-Amz-Security-Token") != b.SessionToken {
		return "UnrecognizedClientException", `{"message":"The security token included in the request is invalid."}`
	}
	t, err := time.Parse(bedrockAmzDate, r.Header.Get("X-Amz-Date"))
	if err != nil {
		return "IncompleteSignatureException", `{"message":"Date must be in ISO-8601 'basic format'."}`
	}
	if d := b.now().Sub(t); d > 5*time.Minute || d < -5*time.Minute {
		return "InvalidSignatureException", `{"message":"Signature expired: ` + r.Header.Get("X-Amz-Date") + ` is now earlier than ` + b.now().UTC().Add(-5*time.Minute).Format(bedrockAmzDate) + `."}`
	}
	again, _ := http.NewRequestWithContext(context.Background(), r.Method, "https://"+r.Host+r.URL.RequestURI(), nil)
	again.Host = r.Host
	for _, h := range strings.Split(signed, ";") {
		if h == "host" || h == "content-length" {
			continue
		}
		for _, v := range r.Header.Values(h) {
			again.Header.Add(h, v)
		}
	}
	again.Header.Del("Authorization")
	again.ContentLength = int64(len(body))
	sum := sha256.Sum256(body)
	creds := sigv4.Credentials{AccessKeyID: b.AccessKeyID, SecretAccessKey: b.SecretAccessKey, SessionToken: b.SessionToken}
	var signer sigv4.Signer
	signer.Sign(again, hex.EncodeToString(sum[:]), creds, "bedrock", b.Region, t)
	if again.Header.Get("Authorization") != auth {
		return "InvalidSignatureException", mismatch
	}
	return "", ""
}

// parseSigV4 reads "AWS4-HMAC-SHA256 Credential=…, SignedHeaders=…,
// Signature=…".
func parseSigV4(auth string) (credential, signedHeaders string, ok bool) {
	rest, ok := strings.CutPrefix(auth, "AWS4-HMAC-SHA256 ")
	if !ok {
		return "", "", false
	}
	for _, part := range strings.Split(rest, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "Credential":
			credential = v
		case "SignedHeaders":
			signedHeaders = v
		}
	}
	return credential, signedHeaders, credential != "" && signedHeaders != ""
}

func bedrockError(w http.ResponseWriter, status int, typ, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Amzn-Errortype", typ+":http://internal.amazon.com/coral/com.amazon.bedrock/")
	w.Header().Set("X-Amzn-Requestid", "00000000-0000-4000-8000-000000000000")
	w.WriteHeader(status)
	io.WriteString(w, body)
}

// bedrockPadding is the "p" member Bedrock adds to each event's payload
// (random letters whose length hides the content's).
const bedrockPadding = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJ"

type bedrockStream struct {
	w   http.ResponseWriter
	buf []byte
}

func (s *bedrockStream) event(typ string, payload map[string]any) {
	payload["p"] = bedrockPadding[:len(typ)%len(bedrockPadding)+1]
	b, _ := json.Marshal(payload)
	s.send([]eventstream.Header{
		{Name: ":event-type", Value: eventstream.StringValue(typ)},
		{Name: ":content-type", Value: eventstream.StringValue("application/json")},
		{Name: ":message-type", Value: eventstream.StringValue("event")},
	}, b)
}

func (s *bedrockStream) exception(typ, payload string) {
	s.send([]eventstream.Header{
		{Name: ":exception-type", Value: eventstream.StringValue(typ)},
		{Name: ":content-type", Value: eventstream.StringValue("application/json")},
		{Name: ":message-type", Value: eventstream.StringValue("exception")},
	}, []byte(payload))
}

func (s *bedrockStream) send(headers []eventstream.Header, payload []byte) {
	var err error
	if s.buf, err = eventstream.Append(s.buf[:0], headers, payload); err == nil {
		s.w.Write(s.buf)
		if f, ok := s.w.(http.Flusher); ok {
			f.Flush()
		}
	}
}

// converseRequest is what the fake reads of a Converse request.
type converseRequest struct {
	Messages []struct {
		Role    string `json:"role"`
		Content []struct {
			Text    *string `json:"text"`
			ToolUse *struct {
				ToolUseID string `json:"toolUseId"`
				Name      string `json:"name"`
			} `json:"toolUse"`
			ToolResult *struct {
				ToolUseID string `json:"toolUseId"`
				Content   []struct {
					Text *string         `json:"text"`
					JSON json.RawMessage `json:"json"`
				} `json:"content"`
				Status string `json:"status"`
			} `json:"toolResult"`
		} `json:"content"`
	} `json:"messages"`
	ToolConfig *struct {
		Tools []struct {
			ToolSpec struct {
				Name        string `json:"name"`
				InputSchema struct {
					JSON json.RawMessage `json:"json"`
				} `json:"inputSchema"`
			} `json:"toolSpec"`
		} `json:"tools"`
		ToolChoice map[string]struct {
			Name string `json:"name"`
		} `json:"toolChoice"`
	} `json:"toolConfig"`
}

// toolRequest reads the declared tools, the tool choice and the last user
// turn's tool results.
func (c *converseRequest) toolRequest() toolRequest {
	var tr toolRequest
	if tc := c.ToolConfig; tc != nil {
		for _, t := range tc.Tools {
			tr.tools = append(tr.tools, toolDecl{name: t.ToolSpec.Name, schema: t.ToolSpec.InputSchema.JSON})
		}
		for k, v := range tc.ToolChoice {
			switch k {
			case "any":
				tr.choice = "required"
			case "tool":
				tr.choice, tr.allowed = v.Name, []string{v.Name}
			default:
				tr.choice = k
			}
		}
	}
	names := map[string]string{}
	for i, m := range c.Messages {
		for _, b := range m.Content {
			if b.ToolUse != nil {
				names[b.ToolUse.ToolUseID] = b.ToolUse.Name
			}
			if r := b.ToolResult; r != nil && i == len(c.Messages)-1 && m.Role == "user" {
				var text strings.Builder
				for _, p := range r.Content {
					if p.Text != nil {
						text.WriteString(*p.Text)
					} else if len(p.JSON) > 0 {
						text.WriteString(compactJSON(p.JSON))
					}
				}
				tr.results = append(tr.results, ToolResult{ID: r.ToolUseID, Name: names[r.ToolUseID], Content: text.String(), IsError: r.Status == "error"})
			}
		}
	}
	return tr
}
