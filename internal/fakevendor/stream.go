package fakevendor

import (
	"context"
	"errors"
	"net/http"
	"time"
	"unicode"
	"unicode/utf8"
)

// event is one stream event: its SSE event name (Anthropic only; empty means
// no `event:` line) and its data, a single line of JSON or [DONE].
type event struct {
	name string
	data []byte
}

// script is one answer as a stream, in parts, so that a fault can stop it
// after the opening events, in the middle of the content, or not at all.
type script struct {
	open   []event // before any content: OpenAI role chunk, Anthropic message_start
	lead   []event // after open, before the first delta: Anthropic content_block_start, ping
	deltas []event // one per piece of text; at least one
	// last, when set, replaces the last delta in a complete stream: Gemini
	// puts finishReason and the final usage on its last content chunk, so a
	// partial stream must not end with that chunk.
	last *event
	// tail, when set, ends a resumed stream whose last delta already went
	// out in its partial form (Gemini: a chunk with empty text and
	// finishReason).
	tail  *event
	close []event // after the content: finish chunk, usage, [DONE]; message_delta, message_stop
	fail  event   // the in-stream error event
}

// cut is the number of deltas a partial stream carries: the first half,
// rounded up, so at least one.
func (s script) cut() int { return (len(s.deltas) + 1) / 2 }

// complete is the whole successful stream.
func (s script) complete() []event {
	out := make([]event, 0, len(s.open)+len(s.lead)+len(s.deltas)+len(s.close))
	out = append(out, s.open...)
	out = append(out, s.lead...)
	out = append(out, s.deltas...)
	if s.last != nil {
		out[len(out)-1] = *s.last
	}
	return append(out, s.close...)
}

// opening is the stream up to the first content, with no content.
func (s script) opening() []event { return s.open }

// partial is the opening events and the first cut() deltas.
func (s script) partial() []event {
	out := make([]event, 0, len(s.open)+len(s.lead)+s.cut())
	out = append(out, s.open...)
	out = append(out, s.lead...)
	return append(out, s.deltas[:s.cut()]...)
}

// rest is what completes a stream after partial().
func (s script) rest() []event {
	out := append([]event(nil), s.deltas[s.cut():]...)
	switch {
	case s.last != nil && len(out) > 0:
		out[len(out)-1] = *s.last
	case s.tail != nil:
		out = append(out, *s.tail)
	}
	return append(out, s.close...)
}

// streamWriter writes events to the client, flushing after each one and
// pausing between them.
type streamWriter struct {
	ctx   context.Context
	w     http.ResponseWriter
	rc    *http.ResponseController
	delay time.Duration
	// array frames events as elements of one JSON array (Gemini's
	// streamGenerateContent without alt=sse) instead of SSE.
	array bool
	sent  int
	// join is how many events are written before the first flush and
	// pause (Options.JoinFirst); 0 and 1 flush after every event.
	join int
	// unflushed: an event is written but not flushed (join).
	unflushed bool
}

// send writes evs one by one. It reports false when the client went away or
// a write failed; the caller then stops. The events joined to the first
// content are flushed together, or at the end of this call when it sends
// fewer (a stream that stops after its opening events).
func (s *streamWriter) send(evs ...event) bool {
	for _, e := range evs {
		if s.sent >= max(s.join, 1) && !sleep(s.ctx, s.delay) {
			return false
		}
		var b []byte
		if s.array {
			if s.sent == 0 {
				b = append(b, '[')
			} else {
				// Google's JSON-array streams separate elements like this.
				b = append(b, ",\r\n"...)
			}
			b = append(b, e.data...)
		} else {
			if e.name != "" {
				b = append(b, "event: "...)
				b = append(b, e.name...)
				b = append(b, '\n')
			}
			b = append(b, "data: "...)
			b = append(b, e.data...)
			b = append(b, "\n\n"...)
		}
		if _, err := s.w.Write(b); err != nil {
			return false
		}
		s.sent++
		if s.sent < s.join {
			s.unflushed = true
			continue
		}
		if !s.flush() {
			return false
		}
	}
	if s.unflushed && !s.flush() {
		return false
	}
	return s.ctx.Err() == nil
}

// flush flushes what is written. A writer that cannot flush still gets the
// whole stream, in one piece; any other flush error means the client is
// gone.
func (s *streamWriter) flush() bool {
	s.unflushed = false
	err := s.rc.Flush()
	return err == nil || errors.Is(err, http.ErrNotSupported)
}

// end finishes the framing: the closing bracket of a JSON array. SSE streams
// of these vendors have no terminator beyond their own events.
func (s *streamWriter) end() {
	if !s.array {
		return
	}
	b := "]"
	if s.sent == 0 {
		b = "[]"
	}
	if _, err := s.w.Write([]byte(b)); err == nil {
		_ = s.rc.Flush()
	}
}

// sleep waits d, or less when ctx ends first; it reports whether ctx is
// still live.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// splitText splits text into n pieces whose concatenation is text: at word
// boundaries (each piece after the first starts with its whitespace) when
// text has at least n words, else by runes. It returns at least one piece,
// and fewer than n when text is shorter than n runes.
func splitText(text string, n int) []string {
	if n < 1 {
		n = 1
	}
	// Piece boundaries: where the whitespace before each word after the
	// first begins, so that later pieces start with their space, as
	// vendors' tokens do (" from").
	var starts []int
	inWord, seenWord, gap := false, false, 0
	for i, r := range text {
		if unicode.IsSpace(r) {
			if inWord {
				gap, inWord = i, false
			}
			continue
		}
		if !inWord {
			if seenWord {
				starts = append(starts, gap)
			}
			inWord, seenWord = true, true
		}
	}
	words := len(starts) + 1
	if words >= n {
		// Piece j gets words [j*words/n, (j+1)*words/n).
		out := make([]string, 0, n)
		from := 0
		for j := 1; j < n; j++ {
			to := starts[j*words/n-1]
			out = append(out, text[from:to])
			from = to
		}
		return append(out, text[from:])
	}
	runes := utf8.RuneCountInString(text)
	if runes < n {
		n = max(runes, 1)
	}
	out := make([]string, 0, n)
	from, count := 0, 0
	j := 1
	for i := range text {
		if j < n && count == j*runes/n {
			out = append(out, text[from:i])
			from = i
			j++
		}
		count++
	}
	return append(out, text[from:])
}
