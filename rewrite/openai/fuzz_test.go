package openai

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/detour-proxy/detour/rewrite/ir"
)

// The fuzz target holds the request decoder to: no panic, and either an
// error or an IR that encodes to valid JSON which decodes again. Run it
// with go test -run '^$' -fuzz FuzzDecodeRequest -fuzztime 30s ./rewrite/openai/
// The answer and stream decoders' targets, which also read their output with
// openai-go, are internal/sdkcheck's FuzzOpenAICodecDecodeResponse and
// FuzzOpenAICodecStreamDecoder.

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
