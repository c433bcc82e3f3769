package gemini

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/detour-proxy/detour/rewrite/ir"
	"github.com/detour-proxy/detour/rewrite/sse"
)

// FuzzDecodeRequest: DecodeRequest never panics, and whatever it accepts
// EncodeRequest either encodes into a body that decodes again or refuses
// with an *ir.UnsupportedError.
func FuzzDecodeRequest(f *testing.F) {
	for _, name := range []string{"request_genai.json", "request_snake.json"} {
		f.Add(readTestdata(f, name))
	}
	f.Add([]byte(`{"contents":[{"parts":[{"functionResponse":{"name":"x","response":{"output":"y"}}}]}]}`))
	f.Add([]byte(`{"tools":[{"functionDeclarations":[{"name":"f","parameters":{"type":"ARRAY"}}]}],"systemInstruction":"s"}`))
	f.Add([]byte(`{"contents":[{"role":"model","parts":[{"fileData":{"fileUri":"https://x/y.png"}}]}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := DecodeRequest(body, "m", false)
		if err != nil {
			return
		}
		out, err := EncodeRequest(r, ir.EncodeOptions{Notes: func(string) {}})
		if err != nil {
			var ue *ir.UnsupportedError
			if !errors.As(err, &ue) {
				t.Fatalf("EncodeRequest: %v (not an UnsupportedError)", err)
			}
			return
		}
		if !json.Valid(out) || bytes.ContainsAny(out, "\n") {
			t.Fatalf("EncodeRequest wrote invalid JSON: %s", out)
		}
		if _, err := DecodeRequest(out, "m", false); err != nil {
			t.Fatalf("encoded body does not decode: %v\n%s", err, out)
		}
	})
}

// FuzzDecodeResponse: DecodeResponse never panics, and what it accepts
// encodes into a body that decodes again.
func FuzzDecodeResponse(f *testing.F) {
	f.Add([]byte(`{"candidates":[{"content":{"role":"model","parts":[{"text":"Hi"},{"functionCall":{"name":"f","args":{"a":1}},"thoughtSignature":"c2ln"}]},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":9,"candidatesTokenCount":2,"totalTokenCount":11},"modelVersion":"gemini-2.5-flash","responseId":"r1"}`))
	f.Add([]byte(`{"promptFeedback":{"blockReason":"SAFETY"}}`))
	f.Add([]byte(`{"error":{"code":400}}`))
	f.Add([]byte(`{"candidates":[{"content":{"parts":[{"inlineData":{"mimeType":"image/png","data":"AAAA"}},{"text":"t","thought":true}]},"finishReason":"MAX_TOKENS"}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := DecodeResponse(body)
		if err != nil {
			return
		}
		out, err := EncodeResponse(r, "m")
		if err != nil {
			t.Fatalf("EncodeResponse: %v", err)
		}
		if _, err := DecodeResponse(out); err != nil {
			t.Fatalf("encoded response does not decode: %v\n%s", err, out)
		}
	})
}

// FuzzStreamDecoder: the decoder never panics on any stream, and whatever
// events it produces the encoder turns into chunks go-genai can read.
func FuzzStreamDecoder(f *testing.F) {
	f.Add([]byte("data: {\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[{\"text\":\"Hi\"}]},\"index\":0}],\"usageMetadata\":{\"promptTokenCount\":9,\"totalTokenCount\":9},\"modelVersion\":\"gemini-2.5-flash\",\"responseId\":\"r1\"}\n\ndata: {\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[{\"functionCall\":{\"name\":\"f\",\"args\":{\"x\":1}}}]},\"finishReason\":\"STOP\",\"index\":0}]}\n\n"))
	f.Add([]byte("[{\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"a\"}]}}]},\n{\"candidates\":[{\"finishReason\":\"SAFETY\"}]}]\n"))
	f.Add([]byte("data: {\"error\":{\"code\":503,\"message\":\"x\",\"status\":\"UNAVAILABLE\"}}\n\n"))
	f.Add([]byte(": ping\n\ndata: [DONE]\n\n{\"error\":\"plain\"}\n"))
	f.Fuzz(func(t *testing.T, stream []byte) {
		d := NewStreamDecoder()
		e := NewStreamEncoder(ir.StreamOptions{Model: "m"})
		rd := sse.NewReader(bytes.NewReader(stream))
		var out []byte
		for {
			ev, err := rd.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				return
			}
			evs, err := d.Decode(ev)
			if err != nil {
				continue
			}
			for _, se := range evs {
				out = e.Encode(out, se)
			}
		}
		out = e.Close(out)
		for _, chunk := range strings.Split(strings.TrimSuffix(string(out), "\n\n"), "\n\n") {
			data, ok := strings.CutPrefix(chunk, "data: ")
			if !ok || strings.ContainsAny(data, "\r\n") || !json.Valid([]byte(data)) {
				t.Fatalf("chunk go-genai cannot read: %q", chunk)
			}
		}
	})
}
