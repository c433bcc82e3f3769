// Package responses is the codec of OpenAI's Responses API (POST
// /v1/responses): its request, its response object and its typed
// `response.*` event stream, decoded into rewrite/ir and encoded from it
// (docs/vendors.md#openai-responses). An app that speaks the Responses API
// can then be answered by a Chat Completions, Anthropic or Gemini upstream,
// and an upstream that speaks only the Responses API can answer a chat app.
//
// What the Responses API keeps on OpenAI's side — previous_response_id,
// conversation, background, item references — has no meaning elsewhere: a
// request using it is an *ir.UnsupportedError, so the chain keeps it on
// OpenAI-shaped upstreams.
//
// responses imports only rewrite, rewrite/ir and rewrite/sse; its wire
// types live here and nowhere else.
package responses
