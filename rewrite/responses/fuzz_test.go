package responses

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/detour-proxy/detour/rewrite/ir"
)

// The codec's own fuzz targets (the pairs' are in rewrite/translate): no
// panic, and whatever decodes encodes into JSON that decodes again.

func FuzzDecodeRequest(f *testing.F) {
	f.Add([]byte(`{"model":"m","input":"hi"}`))
	f.Add([]byte(`{"model":"m","instructions":"s","input":[{"role":"user","content":[{"type":"input_image","image_url":"data:,x"}]},{"type":"function_call","call_id":"c","name":"f","arguments":"{\"a\":\"\\u2028\"}"},{"type":"function_call_output","call_id":"c","output":"r"}],"tools":[{"type":"function","name":"f"}],"text":{"format":{"type":"json_schema","schema":{}}}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := DecodeRequest(body)
		if err != nil {
			var ue *ir.UnsupportedError
			if errors.As(err, &ue) && ue.What == "" {
				t.Fatalf("an UnsupportedError that does not say what")
			}
			return
		}
		out, err := EncodeRequest(r, ir.EncodeOptions{Model: "m"})
		if err != nil {
			var ue *ir.UnsupportedError
			if !errors.As(err, &ue) {
				t.Fatalf("EncodeRequest of a decoded request: %v", err)
			}
			return
		}
		if _, err := DecodeRequest(out); err != nil {
			t.Fatalf("the request detour wrote does not decode: %v\n%s", err, out)
		}
	})
}

func FuzzDecodeResponse(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("..", "translate", "testdata", "upstream", "openai-responses_*.json"))
	for _, file := range files {
		if b, err := os.ReadFile(file); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(`{"status":"incomplete","incomplete_details":{"reason":"content_filter"},"output":[{"type":"reasoning","summary":[{"type":"summary_text","text":"t"}]}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := DecodeResponse(body)
		if err != nil {
			return
		}
		out, err := EncodeResponse(r, "m")
		if err != nil || !json.Valid(out) {
			t.Fatalf("EncodeResponse: %v\n%s", err, out)
		}
		if _, err := DecodeResponse(out); err != nil {
			t.Fatalf("the answer detour wrote does not decode: %v\n%s", err, out)
		}
	})
}
