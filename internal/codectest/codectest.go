// Package codectest holds the fixtures and checks that a codec's own tests
// (rewrite/anthropic, rewrite/openai, …) share with internal/sdkcheck, which
// holds the same codecs to the official SDKs. It exists for tests only: no
// production package imports it. It imports no SDK and no codec, so that a
// codec's in-package tests can import it without a cycle and without linking
// an SDK into their test binary.
package codectest

import (
	"bytes"
	"encoding/json"
	"io"
	"testing"

	"github.com/detour-proxy/detour/rewrite/ir"
	"github.com/detour-proxy/detour/rewrite/sse"
)

// ReadEvents splits an SSE stream into cloned events.
func ReadEvents(t testing.TB, stream string) []sse.Event {
	t.Helper()
	r := sse.NewReader(bytes.NewReader([]byte(stream)))
	var evs []sse.Event
	for {
		ev, err := r.Next()
		if err == io.EOF {
			return evs
		}
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev.Clone())
	}
}

// StreamDecoder is what every codec's StreamDecoder does: one SSE event in,
// the events it means out.
type StreamDecoder interface {
	Decode(sse.Event) ([]ir.StreamEvent, error)
}

// DecodeStream runs every event of stream through d.
func DecodeStream(t testing.TB, d StreamDecoder, stream string) []ir.StreamEvent {
	t.Helper()
	var out []ir.StreamEvent
	for _, ev := range ReadEvents(t, stream) {
		got, err := d.Decode(ev)
		if err != nil {
			t.Fatalf("Decode(%s): %v", ev.Raw, err)
		}
		out = append(out, got...)
	}
	return out
}

// MarshalIndent renders an IR value as indented JSON for diffs, without
// HTML escaping so that text reads as sent.
func MarshalIndent(t testing.TB, v any) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// NormalizeRequest round-trips r through JSON so that equal requests
// compare equal whatever the spacing of their raw JSON fields.
func NormalizeRequest(t testing.TB, r *ir.Request) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(MarshalIndent(t, r), &v); err != nil {
		t.Fatal(err)
	}
	return v
}
