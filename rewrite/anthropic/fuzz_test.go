package anthropic

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"

	"github.com/detour-proxy/detour/rewrite/ir"
	"github.com/detour-proxy/detour/rewrite/sse"
)

// FuzzDecodeRequest: DecodeRequest never panics; what it accepts,
// EncodeRequest either refuses with an error or turns into a request that
// keeps the API's rules (docs/vendors.md#translation-pitfalls).
func FuzzDecodeRequest(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","max_tokens":64,"system":"s","messages":[{"role":"user","content":"Hi"}]}`,
		`{"model":"m","max_tokens":64,"system":[{"type":"text","text":"a"},{"type":"text","text":" "}],"temperature":3,"stop_sequences":[" ","x"],"messages":[{"role":"user","content":[{"type":"text","text":""},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"x"}}]},{"role":"user","content":"again"}]}`,
		`{"model":"m","max_tokens":10,"thinking":{"type":"enabled","budget_tokens":50000},"tool_choice":{"type":"any"},"tools":[{"name":"f","input_schema":{"type":"object"}}],"messages":[{"role":"user","content":"x"},{"role":"assistant","content":[{"type":"tool_use","id":"a b","name":"f","input":{"k":1}}]},{"role":"user","content":[{"type":"text","text":"t"},{"type":"tool_result","tool_use_id":"a b","content":[{"type":"text","text":"r"}]}]},{"role":"assistant","content":"  "}]}`,
		`{"model":"m","max_tokens":1,"thinking":{"type":"adaptive"},"output_config":{"effort":"low","format":{"type":"json_schema","schema":{"type":"object"}}},"messages":[{"role":"assistant","content":[{"type":"redacted_thinking","data":"d"},{"type":"thinking","thinking":"t","signature":""}]}]}`,
		`{"messages":[{"role":"user","content":[{"type":"document","source":{"type":"text","data":"hi"}}]}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := DecodeRequest(body)
		flex, flexErr := decodeRequest(body, false)
		if (err == nil) != (flexErr == nil) || !reflect.DeepEqual(r, flex) {
			t.Fatalf("one-pass and flexible decoding disagree:\n%s (%v)\n%s (%v)", jsonOf(r), err, jsonOf(flex), flexErr)
		}
		if err != nil {
			return
		}
		out, err := EncodeRequest(r, ir.EncodeOptions{Model: "claude-x", Notes: func(string) {}})
		if err != nil {
			return
		}
		if !json.Valid(out) {
			t.Fatalf("invalid JSON: %s", out)
		}
		checkRequestRulesPairing(t, out, false)
		if _, err := DecodeRequest(out); err != nil {
			t.Fatalf("own output not decodable: %v\n%s", err, out)
		}
	})
}

// FuzzDecodeResponse: DecodeResponse never panics; what it accepts,
// EncodeResponse writes as a message anthropic-sdk-go decodes, with every
// tool input an object.
func FuzzDecodeResponse(f *testing.F) {
	for _, s := range []string{
		`{"id":"msg_01","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"Hi!"}],"stop_reason":"end_turn","usage":{"input_tokens":9,"output_tokens":2}}`,
		`{"id":"x","content":[{"type":"thinking","thinking":"t","signature":"s"},{"type":"redacted_thinking","data":"d"},{"type":"tool_use","id":"dtr_YQ","name":"f","input":[1]}],"stop_reason":"refusal","usage":{"input_tokens":1,"cache_read_input_tokens":5}}`,
		`{"type":"error","error":{"type":"api_error","message":"boom"}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := DecodeResponse(body)
		if err != nil {
			return
		}
		out, err := EncodeResponse(r, "claude-x")
		if err != nil {
			t.Fatalf("EncodeResponse: %v", err)
		}
		var msg anthropic.Message
		if err := json.Unmarshal(out, &msg); err != nil {
			t.Fatalf("SDK cannot decode %s: %v", out, err)
		}
		for _, b := range msg.Content {
			if b.Type == "tool_use" && !isObject(b.Input) {
				t.Fatalf("tool input %s", b.Input)
			}
		}
		if _, err := DecodeResponse(out); err != nil {
			t.Fatalf("own output not decodable: %v", err)
		}
	})
}

// FuzzStreamDecoder: the decoder never panics on any byte stream, and
// whatever events it produces, re-encoded, are a stream anthropic-sdk-go
// accumulates without error.
func FuzzStreamDecoder(f *testing.F) {
	f.Add([]byte(textStream))
	f.Add([]byte(toolStream))
	f.Add([]byte("event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n"))
	f.Add([]byte("data: {\"type\":\"content_block_start\",\"index\":3,\"content_block\":{\"type\":\"tool_use\",\"id\":\"a\",\"name\":\"f\"}}\n\ndata: {\"type\":\"content_block_delta\",\"index\":3,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\" \"}}\n\n"))
	f.Fuzz(func(t *testing.T, stream []byte) {
		r := sse.NewReader(bytes.NewReader(stream))
		d := NewStreamDecoder()
		e := NewStreamEncoder(ir.StreamOptions{Model: "m"})
		var out []byte
		failed := false
		for {
			ev, err := r.Next()
			if err != nil {
				if !errors.Is(err, io.EOF) && !errors.Is(err, sse.ErrEventTooLarge) {
					t.Fatalf("sse: %v", err)
				}
				break
			}
			evs, err := d.Decode(ev)
			if err != nil {
				continue // the translator ends the stream; here, go on
			}
			for _, x := range evs {
				failed = failed || x.Kind == ir.StreamError
				out = e.Encode(out, x)
			}
		}
		out = e.Close(out)
		if _, _, err := sdkAccumulate(out); err != nil && !failed {
			t.Fatalf("SDK rejects the re-encoded stream: %v\n%s", err, out)
		}
	})
}
