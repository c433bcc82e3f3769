package fakevendor

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/detour-proxy/detour/rewrite"
)

// Defaults of Options.
const (
	// DefaultChunks is the number of content deltas of a stream when
	// Options.Chunks is zero.
	DefaultChunks = 3
	// maxRequestBody caps how much of a request body the fake reads and
	// records.
	maxRequestBody = 32 << 20
	// maxPromptTokens bounds the deterministic prompt token count.
	maxPromptTokens = 1_000_000
)

// Options configure a Vendor's successful answers.
type Options struct {
	// Name appears in the default answer, "Hello from <Name>."; empty means
	// the shape's name ("openai", "anthropic", "gemini").
	Name string
	// Text is the answer; empty means "Hello from <Name>.".
	Text string
	// EventDelay is the pause between stream events; zero means none. The
	// pause ends early when the client goes away.
	EventDelay time.Duration
	// JoinFirst writes a stream's opening events (those before its first
	// content) and its first content event together, with one flush and no
	// pause between them, as a vendor whose first token is ready by the
	// time it answers; EventDelay's pauses come after. A proxy that holds
	// the opening events until the first content arrives then holds
	// nothing back for longer than one that forwards them at once.
	JoinFirst bool
	// Chunks is the number of content deltas of a stream, the text being
	// split across them at word boundaries (at rune boundaries when it has
	// fewer words; fewer deltas when it has fewer runes). Zero means
	// DefaultChunks.
	Chunks int
	// Now is the clock for OpenAI's created timestamp and Anthropic's
	// spend-limit reset date; nil means time.Now. Set it for golden bytes.
	Now func() time.Time
	// ParallelTools makes a tool-call answer call the first two candidate
	// tools instead of one, when at least two are declared (and allowed by
	// the tool choice) and the request does not forbid parallel calls
	// (OpenAI parallel_tool_calls false, Anthropic
	// tool_choice.disable_parallel_tool_use true; Gemini cannot forbid
	// them).
	ParallelTools bool
	// GeminiIDs makes a Gemini tool-call answer carry functionCall.id and a
	// thoughtSignature on the first functionCall part, as Gemini 3 does.
	// Without it the calls have neither, as Gemini 2.5 without thinking.
	GeminiIDs bool
	// Strict makes the fake refuse a request that lacks the conversation,
	// as the real APIs do: OpenAI and Anthropic without "messages", Gemini
	// without "contents" get 400 with the shape's invalid_request body
	// (ErrorBody with ClassInvalidRequest, whose messages say exactly
	// that). Such a request takes no fault: a simulation can mark requests
	// invalid without disturbing the sequence of drawn faults. Without
	// Strict the fake answers them like any other request.
	Strict bool
}

// Recorded is one request as the fake received it.
type Recorded struct {
	// Method, Path and RawQuery are the request line's.
	Method   string
	Path     string
	RawQuery string
	// Header is a clone of the request's headers, credentials included.
	Header http.Header
	// Body is the request body (up to 32 MiB).
	Body []byte
	// Model is the requested model: the body's "model" (OpenAI,
	// Anthropic) or the model of the URL (Gemini); empty when unknown.
	Model string
	// Stream reports whether a stream was asked for: "stream": true
	// (OpenAI, Anthropic) or the streamGenerateContent endpoint (Gemini).
	Stream bool
	// RequestID is the request id the fake answered with (OpenAI
	// x-request-id, Anthropic request-id and body request_id).
	RequestID string
	// Fault is what the fake did with the request; the zero Fault for a
	// normal answer and for requests it could not serve (unknown path,
	// malformed body, a request Options.Strict refuses).
	Fault Fault
	// Tools are the names of the declared function tools, in order:
	// OpenAI tools[].function (type function), Anthropic tools[] (custom
	// tools, not server tools), Gemini tools[].functionDeclarations[].
	Tools []string
	// ToolChoice is the request's tool choice in one vocabulary: "" when
	// the request sets none, "auto", "none", "required" (OpenAI required,
	// Anthropic any, Gemini ANY with zero or several allowed names), or the
	// name of the one tool forced (OpenAI function, Anthropic tool, Gemini
	// ANY with one allowed name). Other Gemini modes are lower-cased
	// ("validated").
	ToolChoice string
	// ToolResults are the tool results of the request's last turn (OpenAI
	// trailing role "tool" messages, Anthropic tool_result blocks of a last
	// user message, Gemini functionResponse parts of a last user turn), in
	// order; nil when the last turn carries none.
	ToolResults []ToolResult
	// ToolCalls are the tool calls of the fake's answer (whether or not the
	// fault let it through); nil for a text answer.
	ToolCalls []ToolCall
}

// Vendor is a fake LLM vendor of one shape. It implements http.Handler and
// is safe for concurrent use. Each request to a model endpoint takes the
// next scripted fault; when none is queued, a random fault (SetRandomFaults);
// else the default fault (SetDefault, initially OK). Requests to other paths
// get the vendor's 404 body and malformed bodies its 400 (so do requests
// without a conversation when Options.Strict is set); none takes a fault,
// but all are counted and recorded.
type Vendor struct {
	shape  rewrite.Shape
	name   string
	text   string
	pieces []string
	chunks int
	delay  time.Duration
	join   bool
	now    func() time.Time

	parallelTools bool
	geminiIDs     bool
	strict        bool

	inFlight atomic.Int64

	mu      sync.Mutex
	script  []Fault
	def     Fault
	random  []WeightedFault
	seed    int64
	rng     *rand.Rand
	calls   int
	records []Recorded

	memo atomic.Pointer[parsedBody] // parse_memo.go
}

// New returns a fake vendor speaking shape. It panics when shape is not
// valid, which is a bug in the caller.
func New(shape rewrite.Shape, opts Options) *Vendor {
	if !shape.Valid() {
		panic(fmt.Sprintf("fakevendor: unknown shape %q", shape))
	}
	v := &Vendor{
		shape: shape, name: opts.Name, text: opts.Text, delay: opts.EventDelay, join: opts.JoinFirst, now: opts.Now,
		parallelTools: opts.ParallelTools, geminiIDs: opts.GeminiIDs, strict: opts.Strict,
	}
	if v.name == "" {
		v.name = string(shape)
	}
	if v.text == "" {
		v.text = "Hello from " + v.name + "."
	}
	chunks := opts.Chunks
	if chunks <= 0 {
		chunks = DefaultChunks
	}
	v.chunks = chunks
	v.pieces = splitText(v.text, chunks)
	if v.now == nil {
		v.now = time.Now
	}
	return v
}

// Shape is the wire format the vendor speaks.
func (v *Vendor) Shape() rewrite.Shape { return v.shape }

// Name is the vendor's name (Options.Name or the shape's name).
func (v *Vendor) Name() string { return v.name }

// Text is the vendor's text answer (Options.Text or "Hello from <Name>."),
// given to every request that neither gets a tool call nor carries tool
// results.
func (v *Vendor) Text() string { return v.text }

// Script queues faults: the next request to a model endpoint (or to the
// model list, models.go) gets faults[0], the one after faults[1], and so
// on, after any faults queued before.
func (v *Vendor) Script(faults ...Fault) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.script = append(v.script, faults...)
}

// SetDefault sets the fault of requests that find no scripted or random
// fault.
func (v *Vendor) SetDefault(f Fault) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.def = f
}

// SetRandomFaults draws a fault for each request that finds no scripted
// fault: fs[i] with probability fs[i].P, else the default. The draws come
// from a generator seeded with seed, so the sequence of faults (in the order
// requests arrive) is the same on every run. Nil fs turns random faults off.
func (v *Vendor) SetRandomFaults(fs []WeightedFault, seed int64) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.random = append([]WeightedFault(nil), fs...)
	v.seed = seed
	v.rng = newRand(seed)
}

// newRand is the deterministic generator of SetRandomFaults.
func newRand(seed int64) *rand.Rand {
	return rand.New(rand.NewPCG(uint64(seed), 0x64657430757220)) // "detour "
}

// Calls is the number of requests received, on every path.
func (v *Vendor) Calls() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.calls
}

// InFlight is the number of requests being handled right now; a test can
// wait for it to drop to zero to see that a hang ended.
func (v *Vendor) InFlight() int { return int(v.inFlight.Load()) }

// Requests returns copies of the requests received, in arrival order.
func (v *Vendor) Requests() []Recorded {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := make([]Recorded, len(v.records))
	for i, r := range v.records {
		r.Header = r.Header.Clone()
		r.Body = bytes.Clone(r.Body)
		r.Tools = slices.Clone(r.Tools)
		r.ToolResults = slices.Clone(r.ToolResults)
		r.ToolCalls = slices.Clone(r.ToolCalls)
		out[i] = r
	}
	return out
}

// Reset makes the vendor as new: no calls, no recorded requests, no scripted
// or random faults, default OK. Requests in flight finish as they began.
func (v *Vendor) Reset() {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.script, v.random, v.rng = nil, nil, nil
	v.def = Fault{}
	v.calls = 0
	v.records = nil
}

// nextFault picks the fault of a request to a model endpoint; v.mu is held.
func (v *Vendor) nextFault() Fault {
	if len(v.script) > 0 {
		f := v.script[0]
		v.script = v.script[1:]
		return f
	}
	if len(v.random) > 0 {
		x := v.rng.Float64()
		for _, wf := range v.random {
			if x < wf.P {
				return wf.Fault
			}
			x -= wf.P
		}
	}
	return v.def
}

// call is what the fake knows about one request it answers.
type call struct {
	n         int
	requestID string
	method    string
	path      string
	model     string
	stream    bool
	// includeUsage is OpenAI's stream_options.include_usage.
	includeUsage bool
	// sse is Gemini's ?alt=sse; without it Gemini streams a JSON array.
	sse bool
	// incomplete: the body has no messages (Gemini: contents); refused
	// when the vendor is Strict.
	incomplete   bool
	promptTokens int
	// tools is what the request says about tools.
	tools toolRequest
	// plan is the successful answer.
	plan plan
	// embed is set for an embeddings request (embed.go).
	embed *embedCall
	// list: a GET of the model list (models.go).
	list bool
}

// ServeHTTP answers one request as the vendor would, or fails it as the
// request's fault says.
func (v *Vendor) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	v.inFlight.Add(1)
	defer v.inFlight.Add(-1)

	body, readErr := io.ReadAll(io.LimitReader(r.Body, maxRequestBody))
	c := call{method: r.Method, path: r.URL.Path}
	found := v.route(r, &c)
	wellFormed := found && readErr == nil && (c.list || v.parseBodyMemo(body, &c))
	c.promptTokens = min(max(len(body)/4, 1), maxPromptTokens)

	v.mu.Lock()
	v.calls++
	c.n = v.calls
	c.requestID = "req_fake" + zeroPad(c.n, 16)
	c.plan = v.plan(c.tools, c.n)
	refused := wellFormed && v.strict && c.incomplete
	var f Fault
	if wellFormed && !refused {
		f = v.nextFault()
	}
	v.records = append(v.records, Recorded{
		Method: r.Method, Path: r.URL.Path, RawQuery: r.URL.RawQuery,
		Header: r.Header.Clone(), Body: body,
		Model: c.model, Stream: c.stream, RequestID: c.requestID, Fault: f,
		Tools: c.tools.names(), ToolChoice: c.tools.choice,
		ToolResults: c.tools.results, ToolCalls: c.plan.calls,
	})
	v.mu.Unlock()

	v.setIDHeader(w, c)
	switch {
	case !found:
		status, b := notFoundBody(v.shape, r.Method, r.URL.Path, c.requestID)
		v.writeBody(w, status, v.jsonType(), b)
	case !wellFormed:
		status, b := malformedBody(v.shape, c.requestID)
		v.writeBody(w, status, v.jsonType(), b)
	case refused:
		status, b := errorBody(v.shape, Fault{Class: ClassInvalidRequest}, c.model, c.requestID, v.now())
		v.writeBody(w, status, v.jsonType(), b)
	default:
		v.answer(w, r, c, f)
	}
}

// route recognises the shape's model endpoints and fills in what the URL
// says (Gemini's model and streaming).
func (v *Vendor) route(r *http.Request, c *call) bool {
	if modelListPath(v.shape, r.Method, r.URL.Path) {
		c.list = true
		return true
	}
	if r.Method != http.MethodPost {
		return false
	}
	p := r.URL.Path
	switch v.shape {
	case rewrite.OpenAI:
		// Any prefix: /v1/chat/completions, /openai/v1/chat/completions…
		return strings.HasSuffix(p, "/chat/completions") || routeEmbed(v.shape, p, "", c)
	case rewrite.OpenAIResponses:
		return strings.HasSuffix(p, rewrite.ResponsesPath)
	case rewrite.Anthropic:
		return p == "/v1/messages"
	case rewrite.Gemini:
		var rest string
		var ok bool
		for _, prefix := range []string{"/v1beta/models/", "/v1/models/"} {
			if rest, ok = strings.CutPrefix(p, prefix); ok {
				break
			}
		}
		if !ok {
			return false
		}
		model, method, ok := strings.Cut(rest, ":")
		if !ok || model == "" || strings.Contains(model, "/") {
			return false
		}
		switch method {
		case "generateContent":
		case "streamGenerateContent":
			c.stream = true
			c.sse = r.URL.Query().Get("alt") == "sse"
		default:
			if !routeEmbed(v.shape, p, method, c) {
				return false
			}
		}
		c.model = model
		return true
	}
	return false
}

// parseBody checks that body is a JSON object and reads the fields the fake
// answers from: model, stream and stream_options.include_usage (Gemini's
// are in the URL), and what it says about tools.
func (v *Vendor) parseBody(body []byte, c *call) bool {
	if t := bytes.TrimSpace(body); len(t) == 0 || t[0] != '{' {
		return false
	}
	if c.embed != nil {
		return v.parseEmbed(body, c)
	}
	if v.shape == rewrite.Gemini {
		if !json.Valid(body) {
			return false
		}
		if v.strict {
			var req struct {
				Contents json.RawMessage `json:"contents"`
			}
			_ = json.Unmarshal(body, &req)
			c.incomplete = isAbsent(req.Contents)
		}
		c.tools = parseTools(v.shape, body)
		return true
	}
	var req struct {
		Model         string `json:"model"`
		Stream        bool   `json:"stream"`
		StreamOptions *struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
		Messages json.RawMessage `json:"messages"`
		Input    json.RawMessage `json:"input"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return false
	}
	c.model, c.stream = req.Model, req.Stream
	c.incomplete = isAbsent(req.Messages)
	if v.shape == rewrite.OpenAIResponses {
		c.incomplete = isAbsent(req.Input)
	}
	c.includeUsage = req.StreamOptions != nil && req.StreamOptions.IncludeUsage
	c.tools = parseTools(v.shape, body)
	return true
}

// isAbsent reports whether a JSON field was missing or null.
func isAbsent(raw json.RawMessage) bool {
	return len(raw) == 0 || string(raw) == "null"
}

// setIDHeader sets the vendor's request id header.
func (v *Vendor) setIDHeader(w http.ResponseWriter, c call) {
	switch v.shape {
	case rewrite.OpenAI, rewrite.OpenAIResponses:
		w.Header().Set("x-request-id", c.requestID)
	case rewrite.Anthropic:
		w.Header().Set("request-id", c.requestID)
	}
}

// jsonType is the content type of the vendor's JSON answers.
func (v *Vendor) jsonType() string {
	if v.shape == rewrite.Gemini {
		return "application/json; charset=UTF-8"
	}
	return "application/json"
}

// writeBody sends a whole answer with its length.
func (v *Vendor) writeBody(w http.ResponseWriter, status int, contentType string, body []byte) {
	h := w.Header()
	h.Set("Content-Type", contentType)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// marshal encodes v as compact JSON without HTML escaping, as the vendors
// do ("<" stays "<").
func marshal(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		// Only the fake's own types are encoded; they always encode.
		panic("fakevendor: " + err.Error())
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}
