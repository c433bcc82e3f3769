package gemini

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/detour-proxy/detour/rewrite/internal/jsonscan"
	"github.com/detour-proxy/detour/rewrite/ir"
)

// chunkOracle is chunk written with encoding/json, as it was before chunk
// walked the JSON with jsonscan: the reference FuzzStreamChunkOracle holds
// chunk to.
func (d *StreamDecoder) chunkOracle(data []byte) error {
	data = bytes.TrimSpace(data)
	var w respBody
	if err := json.Unmarshal(data, &w); err != nil {
		return fmt.Errorf("gemini: stream chunk: %w", err)
	}
	if !isNull(w.Error) {
		d.events = append(d.events, ir.StreamEvent{Kind: ir.StreamError, Err: streamAppError(w.Error)})
		return nil
	}
	if w.UsageMetadata != nil {
		d.usage, d.hasUsage = decodeUsage(w.UsageMetadata), true
	}
	if !d.started {
		d.started = true
		d.scope = idScope(w.ResponseID, data)
		start := ir.StreamEvent{Kind: ir.StreamStart, ID: w.ResponseID, Model: w.ModelVersion}
		if d.hasUsage {
			start.Usage = ir.TokenUsage{Input: d.usage.Input, CachedInput: d.usage.CachedInput}
		}
		d.events = append(d.events, start)
	}
	var reason string
	if c := firstCandidate(w.Candidates, true); c != nil {
		reason = c.FinishReason
		if c.Content != nil {
			for _, p := range c.Content.Parts {
				d.partOracle(p)
			}
		}
	} else if len(w.Candidates) == 0 && w.PromptFeedback != nil && w.PromptFeedback.BlockReason != "" {
		reason = "SAFETY"
	}
	if reason != "" && !d.finished {
		d.finished = true
		d.events = append(d.events, ir.StreamEvent{Kind: ir.StreamFinish, Finish: decodeFinish(reason, d.calls > 0)})
	}
	if d.finished && d.hasUsage && (!d.sentUse || d.sent != d.usage) {
		d.sentUse, d.sent = true, d.usage
		d.events = append(d.events, ir.StreamEvent{Kind: ir.StreamUsage, Usage: d.usage})
	}
	return nil
}

// partOracle is scanPart for chunkOracle.
func (d *StreamDecoder) partOracle(p respPart) {
	switch {
	case p.FunctionCall != nil:
		id := p.FunctionCall.ID
		if id == "" {
			id = ir.GeneratedToolID(d.scope, d.calls)
		}
		// Gemini sends calls whole: one start and the arguments in one
		// piece.
		d.events = append(d.events,
			ir.StreamEvent{Kind: ir.StreamToolStart, Index: d.calls, ID: id, Name: p.FunctionCall.Name, Signature: p.ThoughtSignature},
			ir.StreamEvent{Kind: ir.StreamToolArgs, Index: d.calls, Text: string(argsObject(p.FunctionCall.Args))},
		)
		d.calls++
	case p.Text == "":
	case p.Thought:
		d.events = append(d.events, ir.StreamEvent{Kind: ir.StreamThinking, Text: p.Text})
	default:
		d.events = append(d.events, ir.StreamEvent{Kind: ir.StreamText, Text: p.Text})
	}
}

// FuzzStreamChunkOracle holds the scanner-based chunk decoder to the
// encoding/json one: on any chunk encoding/json decodes, both give the same
// events, twice in a row (the second time with the stream already
// started). The scanner is allowed to be more lenient where encoding/json
// fails on a type mismatch, but not to accept invalid JSON. Chunks whose
// keys encoding/json would match differently (case variants, escapes,
// duplicates) are left out: the scanner matches keys exactly, as Gemini
// spells them.
func FuzzStreamChunkOracle(f *testing.F) {
	f.Add([]byte(`{"candidates":[{"content":{"role":"model","parts":[{"text":"Hi \u00e9\n"},{"text":"t","thought":true},{"functionCall":{"name":"f","args":{"a":[1,{"b":"}"}]}},"thoughtSignature":"c2ln"}]},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":9,"candidatesTokenCount":2,"thoughtsTokenCount":1,"cachedContentTokenCount":3,"totalTokenCount":11},"modelVersion":"gemini-2.5-flash","responseId":"r1"}`))
	f.Add([]byte(`{"candidates":[{"content":{"parts":[{"text":"one"}]},"index":1},{"content":{"parts":[{"functionCall":{"id":"x","name":"g"}}]}}]}`))
	f.Add([]byte(`{"promptFeedback":{"blockReason":"SAFETY"},"candidates":[]}`))
	f.Add([]byte(`{"error":{"code":503,"message":"m","status":"UNAVAILABLE"}}`))
	f.Add([]byte(` {"candidates":null,"usageMetadata":null,"error":null} `))
	f.Fuzz(func(t *testing.T, data []byte) {
		fast, ref := NewStreamDecoder(), NewStreamDecoder()
		for round := range 2 {
			fast.events, ref.events = nil, nil
			errFast := fast.chunk(data)
			errRef := ref.chunkOracle(data)
			if errFast != nil {
				// A bare JSON null is no chunk at all: encoding/json
				// decodes it into a struct as a no-op, the scanner says it
				// is not an object. Both are fine.
				if errRef == nil && string(bytes.TrimSpace(data)) != "null" {
					t.Fatalf("round %d: scanner refused what encoding/json took: %v", round, errFast)
				}
				return
			}
			if !json.Valid(bytes.TrimSpace(data)) {
				t.Fatal("scanner took invalid JSON")
			}
			if errRef != nil || ambiguousKeys(data) {
				return
			}
			if got, want := describe(fast.events), describe(ref.events); got != want {
				t.Fatalf("round %d\nscanner:\n%s\nencoding/json:\n%s", round, got, want)
			}
		}
	})
}

// knownKeys are the keys either decoder reads.
var knownKeys = []string{
	"candidates", "usageMetadata", "modelVersion", "responseId", "promptFeedback", "error",
	"content", "finishReason", "index", "parts", "text", "thought", "thoughtSignature",
	"functionCall", "id", "name", "args", "promptTokenCount", "cachedContentTokenCount",
	"candidatesTokenCount", "thoughtsTokenCount", "totalTokenCount", "blockReason",
	"inlineData", "fileData", "role",
}

// ambiguousKeys reports whether some object in the valid JSON v has keys
// that encoding/json and an exact match would read differently.
func ambiguousKeys(v []byte) bool {
	v = bytes.TrimSpace(v)
	if len(v) == 0 {
		return false
	}
	switch v[0] {
	case '{':
		seen := map[string]bool{}
		it, _ := jsonscan.Object(v)
		for m, ok := it.Next(); ok; m, ok = it.Next() {
			key, val := string(m.Key()), m.Value()
			if seen[key] || strings.ContainsAny(key, "\\") || !isASCII(key) {
				return true
			}
			seen[key] = true
			for _, known := range knownKeys {
				if key != known && strings.EqualFold(key, known) {
					return true
				}
			}
			if ambiguousKeys(val) {
				return true
			}
		}
	case '[':
		it, _ := jsonscan.Array(v)
		for el, ok := it.Next(); ok; el, ok = it.Next() {
			if ambiguousKeys(el.Value()) {
				return true
			}
		}
	}
	return false
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}
