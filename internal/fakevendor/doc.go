// Package fakevendor is a fake LLM vendor with fault injection: an
// http.Handler that speaks the exact wire format of one rewrite.Shape
// (OpenAI Chat Completions, Anthropic Messages or Gemini generateContent),
// answers with deterministic text and usage, and fails on demand in the ways
// real vendors fail (error statuses with their exact bodies, hangs, slow first
// bytes, in-stream error events, cut or stalled streams, HTML or empty 200s).
//
// It also calls tools, deterministically. When a request declares function
// tools (OpenAI tools[].function, Anthropic tools[], Gemini
// tools[].functionDeclarations) and its last turn carries no tool result,
// the answer calls the first declared tool, or the one that tool_choice /
// toolConfig forces (the first two with Options.ParallelTools); a tool
// choice of "none" gets the text answer. The arguments hold each required
// property of the tool's parameters schema (every property when none is
// required), keys sorted, valued by type: string "Paris" for a property
// named city or location, else "test"; number and integer 1; boolean true;
// array []; object {}. When the last turn carries tool results, the answer
// is the text "The tool said: <result>" (ToolResultPrefix; several results
// joined by ToolResultSeparator), so that a test can see that each result
// reached the upstream intact. Recorded shows the declared tools, the tool
// choice, the results and the calls of every request.
//
// It is shared by detour's end-to-end tests, `detour demo` and
// `detour fake-vendor`. The wire formats follow
// docs/vendors.md (#whole-answers, #streams) and the error bodies of its
// vendors' sections; a change here is a change to what the
// proxy is tested against, so keep it byte-exact with those references.
//
// fakevendor imports only the standard library, rewrite (for Shape) and,
// for Bedrock, internal/eventstream and internal/sigv4; it must not import
// policy or proxy, which are what it is used to test.
package fakevendor
