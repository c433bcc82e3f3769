// Package openai decodes and encodes the OpenAI Chat Completions shape
// (POST /v1/chat/completions, docs/vendors.md#request-fields) to and from the
// vendor-neutral IR of package rewrite/ir: the app's request and an
// upstream's request, a whole chat.completion, and chat.completion.chunk
// streams in both directions.
//
// The decoders accept what the official SDKs and OpenAI-compatible servers
// (vLLM, Ollama, OpenRouter, DeepSeek) send; the encoders write only what
// OpenAI itself sends or accepts, in the field order of its own answers, so
// that openai-go (including ChatCompletionAccumulator, docs/vendors.md#openai-go)
// cannot tell a translated answer from a native one.
//
// What the IR cannot carry (an audio part, a file_id reference, a custom
// tool) is refused with an *ir.UnsupportedError rather than dropped, so the
// chain can skip the cross-vendor upstream and go on.
//
// The OpenAI wire types live here and nowhere else. openai imports only
// rewrite, rewrite/ir and rewrite/sse; it must not import another vendor
// package or anything outside rewrite.
package openai
