// Package anthropic is the Anthropic Messages codec of detour's translators:
// it decodes Anthropic requests, responses and stream events into the
// vendor-neutral form of package ir, and encodes ir values into the
// Anthropic wire shape, so that an app using anthropic-sdk-go can be
// answered by another vendor and another vendor's app by an Anthropic
// upstream (docs/vendors.md, from #request-fields to #anthropic-sdk-go).
//
// The rules the encoders follow are the ones the Messages API and the SDK
// enforce, where other gateways have tripped (docs/vendors.md#translation-pitfalls):
//
//   - requests: every system prompt kept in order; only user and assistant
//     turns, consecutive ones merged; tool results in the user turn right
//     after the tool calls, results first; tool ids mapped into Anthropic's
//     charset (ir.SafeToolID) and back (ir.OriginalToolID); no empty text
//     blocks; max_tokens always set and above a thinking budget; temperature
//     clamped to [0, 1]; blank stop sequences removed; JSON mode through a
//     forced tool named JSONToolName. Every lossy change is reported through
//     ir.EncodeOptions.Notes.
//   - streams: message_start first, content block indexes in order with one
//     block open at a time, deltas only for started blocks, the `event:`
//     line equal to the JSON type, and the closing message_delta and
//     message_stop exactly once.
//
// The package imports only rewrite, rewrite/ir and rewrite/sse; it must not
// import another vendor's package (translators in rewrite/translate pair a
// decoder of one vendor with an encoder of another) nor anything outside
// rewrite. Unwrapping the JSON-mode tool call back into text is the
// translator's job: it knows what the app asked for.
package anthropic

// JSONToolName is the tool that carries JSON mode to an Anthropic upstream:
// EncodeRequest declares a tool of this name whose input_schema is the
// requested schema and forces it, and the model's answer comes back as that
// tool's input (docs/vendors.md#request-fields, litellm's convention).
const JSONToolName = "json_tool_call"
