package openai

import (
	"testing"

	"github.com/detour-proxy/detour/internal/codectest"
	"github.com/detour-proxy/detour/rewrite/ir"
)

// Streams and helpers the round trip and stream tests share. The tests that
// read the encoders' output with openai-go are internal/sdkcheck's
// TestOpenAICodec* (docs/vendors.md#openai-go).

// dataLines returns the data of every event of an encoded stream.
func dataLines(t *testing.T, stream []byte) [][]byte {
	t.Helper()
	return codectest.OpenAIDataLines(t, stream)
}

// textStream and parallelToolStream are internal/codectest's, which
// internal/sdkcheck's openai-go tests encode too.
var (
	textStream         = codectest.OpenAITextStream
	parallelToolStream = codectest.OpenAIParallelToolStream
)

func ptr[T any](v T) *T { return &v }

// normalizeRequest round-trips r through JSON so that equal requests
// compare equal whatever the spacing of their raw JSON fields.
func normalizeRequest(t *testing.T, r *ir.Request) any {
	t.Helper()
	return codectest.NormalizeRequest(t, r)
}
