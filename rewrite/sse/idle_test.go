package sse

import (
	"bytes"
	"errors"
	"io"
	"os"
	"strings"
	"testing"
)

// events reads every event of r, cloned, and the error that ended it; with
// mark, every few events it checks that Marked is the Raw of the events
// since Mark.
func events(t *testing.T, r *Reader, mark bool) ([]Event, error) {
	t.Helper()
	var evs []Event
	var run []byte
	for n := 0; ; n++ {
		if mark && n%3 == 0 {
			if got := r.Marked(); !bytes.Equal(got, run) {
				t.Fatalf("Marked = %q, want %q", got, run)
			}
			r.Unmark()
			r.Mark()
			run = run[:0]
		}
		ev, err := r.Next()
		if err != nil {
			return evs, err
		}
		run = append(run, ev.Raw...)
		evs = append(evs, ev.Clone())
	}
}

// TestIdleReleaseReadsTheSameEvents: with SetIdleRelease the Reader returns
// the same events, runs and errors as without, however the input arrives.
func TestIdleReleaseReadsTheSameEvents(t *testing.T) {
	t.Parallel()
	anth, err := os.ReadFile("testdata/anthropic_text.sse")
	if err != nil {
		t.Fatal(err)
	}
	big := "data: " + strings.Repeat("x", 3*initialBufferSize) + "\n\n"
	for name, in := range map[string]string{
		"openai":    string(openAIStream(50)),
		"anthropic": string(anth),
		"multiline": strings.Repeat("event: e\ndata: a\ndata: b\n\n", 40),
		"big":       big + string(openAIStream(5)) + big,
		"unended":   "data: a\n\ndata: {\"b\":1}",
		"cr":        "data: a\r\rdata: b\r\n\r\n",
	} {
		for how := range chunkReaders(in) {
			for _, mark := range []bool{false, true} {
				plain := NewReader(chunkReaders(in)[how])
				want, wantErr := events(t, plain, mark)
				lean := NewReader(chunkReaders(in)[how])
				lean.SetIdleRelease(true)
				got, gotErr := events(t, lean, mark)
				if !errors.Is(gotErr, wantErr) || len(got) != len(want) {
					t.Fatalf("%s %s mark=%v: %d events and %v, want %d and %v", name, how, mark, len(got), gotErr, len(want), wantErr)
				}
				for i := range got {
					g, w := got[i], want[i]
					if g.Name != w.Name || !bytes.Equal(g.Data, w.Data) || !bytes.Equal(g.Raw, w.Raw) || g.Comment != w.Comment || g.Bare != w.Bare {
						t.Fatalf("%s %s mark=%v: event %d = %+v, want %+v", name, how, mark, i, g, w)
					}
				}
			}
		}
	}
}

// waitWatcher is an upstream whose reads note whether the Reader held a
// buffer while it read.
type waitWatcher struct {
	r      *Reader
	src    io.Reader
	held   int // reads made while the Reader held a buffer
	probes int // reads made with none
}

func (w *waitWatcher) Read(p []byte) (int, error) {
	if w.r.buf == nil {
		w.probes++
	} else {
		w.held++
	}
	return w.src.Read(p)
}

// TestIdleReleaseHoldsNoBufferWhileWaiting: a Reader with nothing buffered
// waits for input (its first read after each event) without a buffer.
func TestIdleReleaseHoldsNoBufferWhileWaiting(t *testing.T) {
	t.Parallel()
	const n = 20
	var in strings.Builder
	for range n {
		in.WriteString("data: {\"choices\":[{\"delta\":{\"content\":\"word\"}}]}\n\n")
	}
	w := &waitWatcher{src: &chunkReader{s: in.String(), n: 1 << 20}}
	w.r = NewReader(w)
	w.r.SetIdleRelease(true)
	// One event per read, as a trickling stream arrives.
	w.src = eventReader{w.src.(*chunkReader)}
	evs, err := events(t, w.r, false)
	if err != io.EOF || len(evs) != n {
		t.Fatalf("%d events, %v", len(evs), err)
	}
	// The first read of all takes the buffer; every wait after an event
	// holds none.
	if w.probes < n {
		t.Errorf("%d of the reads after an event were made without a buffer, want %d (%d with one)", w.probes, n, w.held)
	}
}

// eventReader returns one event per Read.
type eventReader struct{ c *chunkReader }

func (e eventReader) Read(p []byte) (int, error) {
	if e.c.s == "" {
		return 0, io.EOF
	}
	end := strings.Index(e.c.s, "\n\n") + 2
	k := copy(p, e.c.s[:min(end, len(p))])
	e.c.s = e.c.s[k:]
	return k, nil
}
