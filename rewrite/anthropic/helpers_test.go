package anthropic

import (
	"bytes"
	"encoding/json"
	"io"
	"path/filepath"
	"testing"

	"github.com/detour-proxy/detour/internal/testsupport"
	"github.com/detour-proxy/detour/rewrite/ir"
	"github.com/detour-proxy/detour/rewrite/sse"
)

// golden compares got with testdata/name, rewriting the file under -update.
// JSON is compared indented, so the files can be read and reviewed.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	if json.Valid(got) {
		var buf bytes.Buffer
		if err := json.Indent(&buf, got, "", "  "); err != nil {
			t.Fatal(err)
		}
		buf.WriteByte('\n')
		got = buf.Bytes()
	}
	testsupport.Golden(t, filepath.Join("testdata", name), got)
}

// noteList collects EncodeOptions.Notes.
type noteList []string

func (n *noteList) add(s string) { *n = append(*n, s) }

// encodeStream runs events through a StreamEncoder and closes it.
func encodeStream(o ir.StreamOptions, events ...ir.StreamEvent) []byte {
	e := NewStreamEncoder(o)
	var out []byte
	for _, ev := range events {
		out = e.Encode(out, ev)
	}
	return e.Close(out)
}

// checkStreamFraming asserts what the SDK relies on but does not check
// itself: every event has an `event:` line equal to its JSON type, and the
// stream ends with exactly one message_delta and one message_stop (or an
// error).
func checkStreamFraming(t *testing.T, stream []byte) {
	t.Helper()
	r := sse.NewReader(bytes.NewReader(stream))
	var types []string
	for {
		ev, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		var v struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(ev.Data, &v); err != nil {
			t.Fatalf("event %q: data is not JSON: %v: %s", ev.Name, err, ev.Data)
		}
		if ev.Name != v.Type {
			t.Errorf("event: line %q but JSON type %q", ev.Name, v.Type)
		}
		types = append(types, v.Type)
	}
	count := map[string]int{}
	for _, typ := range types {
		count[typ]++
	}
	if count["error"] > 0 {
		if types[len(types)-1] != "error" || count["error"] != 1 {
			t.Errorf("error event not last and alone: %v", types)
		}
		return
	}
	if len(types) < 3 || types[0] != "message_start" || types[len(types)-2] != "message_delta" || types[len(types)-1] != "message_stop" ||
		count["message_start"] != 1 || count["message_delta"] != 1 || count["message_stop"] != 1 {
		t.Errorf("stream is not message_start … message_delta message_stop, once each: %v", types)
	}
}

// readEvents splits an SSE stream into cloned events.
func readEvents(t testing.TB, stream string) []sse.Event {
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

// decodeStream runs every event of stream through one StreamDecoder.
func decodeStream(t testing.TB, stream string) []ir.StreamEvent {
	t.Helper()
	d := NewStreamDecoder()
	var out []ir.StreamEvent
	for _, ev := range readEvents(t, stream) {
		got, err := d.Decode(ev)
		if err != nil {
			t.Fatalf("Decode(%s): %v", ev.Raw, err)
		}
		out = append(out, got...)
	}
	return out
}

func ptr[T any](v T) *T { return &v }
