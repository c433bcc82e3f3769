package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	oai "github.com/openai/openai-go/v3"

	"github.com/detour-proxy/detour/rewrite/ir"
	"github.com/detour-proxy/detour/rewrite/sse"
)

// The fuzz targets hold every decoder to: no panic, and either an error or
// an IR that encodes to valid JSON which decodes again (for streams: which
// openai-go accumulates without refusing a chunk). Run one with, e.g.,
// go test -run '^$' -fuzz FuzzStreamDecoder -fuzztime 30s ./rewrite/openai/

func addSeeds(f *testing.F, pattern string) {
	files, _ := filepath.Glob(filepath.Join("testdata", pattern))
	for _, file := range files {
		if b, err := os.ReadFile(file); err == nil {
			f.Add(b)
		}
	}
}

func FuzzDecodeRequest(f *testing.F) {
	addSeeds(f, "requests/*.json")
	f.Add([]byte(`{"messages":[{"role":"user","content":[{"type":"image_url","image_url":"data:,x"}]}]}`))
	f.Add([]byte(`{"messages":[{"role":"assistant","tool_calls":[{"id":"1","function":{"name":"f","arguments":"{\"a\":\"\\u2028\"}"}}]}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := DecodeRequest(body)
		if err != nil {
			return
		}
		if b, err := json.Marshal(r); err != nil || !json.Valid(b) {
			t.Fatalf("decoded IR does not encode: %v", err)
		}
		out, err := EncodeRequest(r, ir.EncodeOptions{Model: "m"})
		if err != nil {
			var ue *ir.UnsupportedError
			if !errors.As(err, &ue) {
				t.Fatalf("EncodeRequest of a decoded request: %v", err)
			}
			return
		}
		if !json.Valid(out) {
			t.Fatalf("EncodeRequest wrote invalid JSON: %s", out)
		}
		if _, err := DecodeRequest(out); err != nil {
			t.Fatalf("own output %s does not decode: %v", out, err)
		}
	})
}

func FuzzDecodeResponse(f *testing.F) {
	addSeeds(f, "responses/*.json")
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := DecodeResponse(body)
		if err != nil {
			return
		}
		out, err := EncodeResponse(r, "gpt-4o")
		if err != nil {
			t.Fatalf("EncodeResponse of a decoded response: %v", err)
		}
		if !json.Valid(out) {
			t.Fatalf("EncodeResponse wrote invalid JSON: %s", out)
		}
		var c oai.ChatCompletion
		if err := json.Unmarshal(out, &c); err != nil {
			t.Fatalf("openai-go cannot decode %s: %v", out, err)
		}
		if _, err := DecodeResponse(out); err != nil {
			t.Fatalf("own output %s does not decode: %v", out, err)
		}
	})
}

func FuzzStreamDecoder(f *testing.F) {
	addSeeds(f, "streams/*.sse")
	f.Add([]byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":7,\"function\":{\"arguments\":\"x\"}}]}}]}\n\n"))
	f.Fuzz(func(t *testing.T, stream []byte) {
		rd := sse.NewReader(bytes.NewReader(stream))
		d := NewStreamDecoder()
		e := NewStreamEncoder(ir.StreamOptions{Model: "gpt-4o", IncludeUsage: true, Created: testCreated})
		var out []byte
		for {
			ev, err := rd.Next()
			if err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				return
			}
			evs, err := d.Decode(ev)
			if err != nil {
				continue
			}
			for _, x := range evs {
				out = e.Encode(out, x)
			}
		}
		out = e.Close(out)
		checkAppStream(t, out)
	})
}

// checkAppStream checks an encoded stream the way openai-go reads it: every
// event one data line of JSON (or [DONE]), every chunk accepted by the
// accumulator, and detour's own decoder reading it without error.
func checkAppStream(t *testing.T, out []byte) {
	t.Helper()
	var acc oai.ChatCompletionAccumulator
	d := NewStreamDecoder()
	rd := sse.NewReader(bytes.NewReader(out))
	for {
		ev, err := rd.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(ev.Raw, []byte("data: ")) || bytes.Count(ev.Raw, []byte("\n")) != 2 {
			t.Fatalf("event is not one data line: %q", ev.Raw)
		}
		if string(ev.Data) == "[DONE]" {
			continue
		}
		if !json.Valid(ev.Data) {
			t.Fatalf("invalid JSON %s", ev.Data)
		}
		if _, err := d.Decode(ev); err != nil {
			t.Fatalf("own output %s does not decode: %v", ev.Data, err)
		}
		var c oai.ChatCompletionChunk
		if err := json.Unmarshal(ev.Data, &c); err != nil {
			t.Fatalf("openai-go cannot decode %s: %v", ev.Data, err)
		}
		if bytes.Contains(ev.Data, []byte(`"error"`)) && c.ID == "" {
			continue // the in-stream error event, which ends the SDK's stream
		}
		if !acc.AddChunk(c) {
			t.Fatalf("accumulator refused %s", ev.Data)
		}
	}
}
