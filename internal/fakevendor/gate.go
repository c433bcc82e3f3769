package fakevendor

import (
	"bytes"
	"encoding/json"
	"net/http"
	"sync"

	"github.com/detour-proxy/detour/rewrite"
)

// gateTokens bounds the releases a Gate can hold before they are used: far
// more than any test stream has events.
const gateTokens = 1024

// Gate holds a vendor's streams back after their first content event: each
// later event is written only once the test has called Release for it (or
// Open for all). A test that releases event N+1 only after the app has shown
// event N proves that the stream reached the app incrementally, through
// everything between the two, with no sleep and no timing assertion: a
// proxy that buffered the stream would hold event N, and the test would
// never release the rest.
//
// The events before the first content (OpenAI's role chunk, Anthropic's
// message_start, content_block_start and ping) pass freely: detour holds a
// stream back until its first content anyway (its commit point), and the
// app has nothing to show for them. A Gate is an http.Handler around a
// Vendor; whole (non-stream) answers pass through it untouched, and so does
// Gemini's JSON-array stream (only SSE streams are held: Gemini's with
// alt=sse, which its SDKs ask for).
type Gate struct {
	v       *Vendor
	release chan struct{}
	open    chan struct{}
	once    sync.Once
}

// NewGate returns a Gate around v.
func NewGate(v *Vendor) *Gate {
	return &Gate{v: v, release: make(chan struct{}, gateTokens), open: make(chan struct{})}
}

// Release lets one more held event of a stream go. Releases given before a
// stream needs them are kept for it.
func (g *Gate) Release() {
	select {
	case g.release <- struct{}{}:
	case <-g.open:
	}
}

// Open lets every event go, held now or later. It is safe to call more than
// once; a test calls it when it has seen what it waited for, and in its
// cleanup so that no handler stays blocked.
func (g *Gate) Open() { g.once.Do(func() { close(g.open) }) }

// ServeHTTP serves the vendor's answer, holding stream events as the Gate
// says.
func (g *Gate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.v.ServeHTTP(&gatedWriter{ResponseWriter: w, g: g, r: r}, r)
}

// gatedWriter is the ResponseWriter the vendor writes through. The vendor
// writes each stream event with one Write (stream.go, streamWriter.send),
// which is what lets the Gate count events.
type gatedWriter struct {
	http.ResponseWriter
	g       *Gate
	r       *http.Request
	content bool // a content event has been written
}

func (w *gatedWriter) Write(b []byte) (int, error) {
	if w.content {
		select {
		case <-w.g.release:
		case <-w.g.open:
		case <-w.r.Context().Done():
			return 0, w.r.Context().Err()
		}
	} else if isContentEvent(w.g.v.shape, b) {
		w.content = true
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the real writer's Flush.
func (w *gatedWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// isContentEvent reports whether b, one Write of the vendor, is an SSE event
// that carries answer text: OpenAI a chunk with delta.content, Anthropic a
// content_block_delta, Gemini a chunk with a text part.
func isContentEvent(shape rewrite.Shape, b []byte) bool {
	var data []byte
	for _, line := range bytes.Split(b, []byte("\n")) {
		if name, ok := bytes.CutPrefix(line, []byte("event: ")); ok && shape == rewrite.Anthropic {
			return string(name) == "content_block_delta"
		}
		if name, ok := bytes.CutPrefix(line, []byte("event: ")); ok && shape == rewrite.OpenAIResponses {
			return string(name) == "response.output_text.delta"
		}
		if d, ok := bytes.CutPrefix(line, []byte("data: ")); ok {
			data = d
		}
	}
	if data == nil {
		return false
	}
	switch shape {
	case rewrite.OpenAI:
		var chunk struct {
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		return json.Unmarshal(data, &chunk) == nil && len(chunk.Choices) > 0 && chunk.Choices[0].Delta.Content != ""
	case rewrite.Gemini:
		var chunk struct {
			Candidates []struct {
				Content struct {
					Parts []struct {
						Text string `json:"text"`
					} `json:"parts"`
				} `json:"content"`
			} `json:"candidates"`
		}
		if json.Unmarshal(data, &chunk) != nil {
			return false
		}
		for _, c := range chunk.Candidates {
			for _, p := range c.Content.Parts {
				if p.Text != "" {
					return true
				}
			}
		}
	}
	return false
}
