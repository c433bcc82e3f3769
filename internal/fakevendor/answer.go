package fakevendor

import (
	"net/http"
	"strconv"

	"github.com/detour-proxy/detour/rewrite"
)

// htmlPage is the body of HTML200: what a captive portal or a CDN error page
// puts where the vendor's JSON should be.
const htmlPage = `<!DOCTYPE html>
<html>
<head><title>Network Login Required</title></head>
<body>
<h1>Sign in to continue</h1>
<p>This network requires you to sign in before you can access the Internet.</p>
</body>
</html>
`

// answer carries out fault f for call c.
func (v *Vendor) answer(w http.ResponseWriter, r *http.Request, c call, f Fault) {
	ctx := r.Context()
	if f.RetryAfter != "" {
		w.Header().Set("retry-after", f.RetryAfter)
	}
	switch f.Kind {
	case OK:
		v.succeed(w, r, c, f)
	case Status:
		v.fail(w, c, f)
	case Hang:
		if sleep(ctx, f.delay(DefaultHangDelay)) {
			// The client outwaited the hang: drop the connection, still
			// without an answer. ErrAbortHandler makes net/http close it
			// quietly.
			panic(http.ErrAbortHandler)
		}
	case SlowFirstByte:
		if sleep(ctx, f.delay(DefaultSlowFirstByteDelay)) {
			v.succeed(w, r, c, f)
		}
	case StreamErrorEarly, StreamErrorMid, StreamCut, StreamEOF, StreamStall:
		if c.stream {
			v.streamFault(w, r, c, f)
		} else {
			v.bodyFault(w, r, c, f)
		}
	case HTML200:
		v.writeBody(w, statusOr(f.Status, http.StatusOK), "text/html; charset=utf-8", []byte(htmlPage))
	case Empty200:
		v.writeBody(w, statusOr(f.Status, http.StatusOK), v.jsonType(), nil)
	case Truncated200:
		b := v.body(c)
		v.writeBody(w, statusOr(f.Status, http.StatusOK), v.jsonType(), b[:len(b)/2])
	default:
		http.Error(w, "fakevendor: unknown fault kind "+strconv.Quote(string(f.Kind)), http.StatusInternalServerError)
	}
}

// statusOr is status, or def when status is zero.
func statusOr(status, def int) int {
	if status != 0 {
		return status
	}
	return def
}

// succeed sends the normal answer: the JSON body, or the complete stream.
func (v *Vendor) succeed(w http.ResponseWriter, r *http.Request, c call, f Fault) {
	if !c.stream {
		v.writeBody(w, statusOr(f.Status, http.StatusOK), v.jsonType(), v.body(c))
		return
	}
	s := v.streamScript(c, "")
	sw := v.startStream(w, r, c, s)
	if sw.send(s.complete()...) {
		sw.end()
	}
}

// fail sends the HTTP error of f.
func (v *Vendor) fail(w http.ResponseWriter, c call, f Fault) {
	status, body := errorBody(v.shape, f, c.model, c.requestID, v.now())
	if f.RetryAfter == "" && v.shape == rewrite.Anthropic {
		// Anthropic sends retry-after with rate limits, never with the
		// monthly spend cap.
		if class, _ := resolve(v.shape, f.Class, f.Status); class == ClassRateLimit || class == ClassQuotaPerDay {
			w.Header().Set("retry-after", DefaultAnthropicRetryAfter)
		}
	}
	v.writeBody(w, status, v.jsonType(), body)
}

// streamFault carries out a stream fault on a streaming request.
func (v *Vendor) streamFault(w http.ResponseWriter, r *http.Request, c call, f Fault) {
	s := v.streamScript(c, f.Class)
	sw := v.startStream(w, r, c, s)
	switch f.Kind {
	case StreamErrorEarly:
		if sw.send(s.opening()...) && sw.send(s.fail) {
			sw.end()
		}
	case StreamErrorMid:
		if sw.send(s.partial()...) && sw.send(s.fail) {
			sw.end()
		}
	case StreamCut:
		if sw.send(s.partial()...) {
			// Close the connection without the chunked terminator: the
			// client reads an unexpected EOF, as when a vendor dies.
			panic(http.ErrAbortHandler)
		}
	case StreamEOF:
		sw.send(s.partial()...)
	case StreamStall:
		if sw.send(s.partial()...) && sleep(r.Context(), f.delay(DefaultHangDelay)) && sw.send(s.rest()...) {
			sw.end()
		}
	}
}

// bodyFault carries out a stream fault on a non-streaming request, as the
// fault kinds document.
func (v *Vendor) bodyFault(w http.ResponseWriter, r *http.Request, c call, f Fault) {
	switch f.Kind {
	case StreamErrorEarly, StreamErrorMid:
		class := f.Class
		if class == "" {
			class = streamErrorClass(v.shape)
		}
		v.fail(w, c, Fault{Kind: Status, Class: class, Status: f.Status, RetryAfter: f.RetryAfter})
		return
	case StreamEOF:
		b := v.body(c)
		v.writeBody(w, http.StatusOK, v.jsonType(), b[:len(b)/2])
		return
	}
	b := v.body(c)
	h := w.Header()
	h.Set("Content-Type", v.jsonType())
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	if _, err := w.Write(b[:len(b)/2]); err != nil || rc.Flush() != nil {
		return
	}
	if f.Kind == StreamCut {
		panic(http.ErrAbortHandler)
	}
	// StreamStall.
	if sleep(r.Context(), f.delay(DefaultHangDelay)) {
		_, _ = w.Write(b[len(b)/2:])
	}
}

// streamErrorClass is the shape's usual in-stream error when a fault names
// no class: OpenAI's server_error chunk, Anthropic's overloaded_error event,
// Gemini's 503 UNAVAILABLE chunk.
func streamErrorClass(shape rewrite.Shape) string {
	if shape == rewrite.OpenAI || shape == rewrite.OpenAIResponses {
		return ClassServerError
	}
	return ClassOverloaded
}

// body is the successful non-streaming answer to c.
func (v *Vendor) body(c call) []byte {
	if c.embed != nil {
		return v.embedBody(c)
	}
	if c.list {
		return v.modelListBody()
	}
	switch v.shape {
	case rewrite.Anthropic:
		return v.anthropicBody(c)
	case rewrite.Gemini:
		return v.geminiBody(c)
	case rewrite.OpenAIResponses:
		return v.responsesBody(c)
	}
	return v.openaiBody(c)
}

// streamScript is the stream answering c, with errClass as its in-stream error.
func (v *Vendor) streamScript(c call, errClass string) script {
	if errClass == "" {
		errClass = streamErrorClass(v.shape)
	}
	switch v.shape {
	case rewrite.Anthropic:
		return v.anthropicScript(c, errClass)
	case rewrite.Gemini:
		return v.geminiScript(c, errClass)
	case rewrite.OpenAIResponses:
		return v.responsesScript(c, errClass)
	}
	return v.openaiScript(c, errClass)
}

// startStream sends the headers of a 200 stream: SSE, or for Gemini without
// alt=sse a JSON array. s is the stream's script, whose opening events
// Options.JoinFirst joins to the first content.
func (v *Vendor) startStream(w http.ResponseWriter, r *http.Request, c call, s script) *streamWriter {
	sw := &streamWriter{ctx: r.Context(), w: w, rc: http.NewResponseController(w), delay: v.delay}
	if v.join {
		sw.join = len(s.open) + len(s.lead) + 1
	}
	h := w.Header()
	if v.shape == rewrite.Gemini && !c.sse {
		sw.array = true
		h.Set("Content-Type", v.jsonType())
	} else {
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
	}
	w.WriteHeader(http.StatusOK)
	return sw
}
