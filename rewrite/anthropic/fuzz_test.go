package anthropic

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/detour-proxy/detour/rewrite/ir"
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
