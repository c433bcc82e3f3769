package responses

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
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

// fastDelta must read what encoding/json reads, or decline.
func FuzzFastDelta(f *testing.F) {
	f.Add([]byte(`{"type":"response.output_text.delta","sequence_number":4,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"Hi \u00e9\n"}`))
	f.Add([]byte(`{"type":"response.function_call_arguments.delta","sequence_number":2,"item_id":"fc_1","output_index":0,"delta":"{\"a\":"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		e, ok := fastDelta(data)
		if !ok {
			return
		}
		var want struct {
			Type        string `json:"type"`
			ItemID      string `json:"item_id"`
			OutputIndex int    `json:"output_index"`
			Delta       string `json:"delta"`
		}
		if err := json.Unmarshal(data, &want); err != nil {
			t.Fatalf("fastDelta read %q, which encoding/json refuses: %v", data, err)
		}
		// encoding/json also matches keys that differ in case only, which
		// no vendor sends; jsonscan's KeyIs, like the other fast paths,
		// does not (rewrite/internal/jsonscan).
		var keys map[string]json.RawMessage
		_ = json.Unmarshal(data, &keys)
		for k := range keys {
			for _, f := range []string{"type", "item_id", "output_index", "delta"} {
				if k != f && strings.EqualFold(k, f) {
					return
				}
			}
		}
		if string(e.typ) != want.Type || string(e.itemID) != want.ItemID || e.outputIndex != want.OutputIndex || e.delta != want.Delta {
			t.Fatalf("fastDelta %+v; encoding/json %+v", e, want)
		}
	})
}
