// Package fakevendor is a fake LLM vendor with fault injection: an
// http.Handler that speaks the exact wire format of one rewrite.Shape
// (OpenAI Chat Completions, Anthropic Messages or Gemini generateContent),
// answers with deterministic text and usage, and fails on demand in the ways
// real vendors fail (error statuses with their exact bodies, hangs, slow first
// bytes, in-stream error events, cut or stalled streams, HTML or empty 200s).
//
// It is shared by detour's end-to-end tests, `detour demo` and
// `detour fake-vendor`. The wire formats follow
// shared/reference/translation.md §2–§3 and the error bodies
// shared/reference/provider-errors.md; a change here is a change to what the
// proxy is tested against, so keep it byte-exact with those references.
//
// fakevendor imports only the standard library and rewrite (for Shape); it
// must not import policy or proxy, which are what it is used to test.
package fakevendor
