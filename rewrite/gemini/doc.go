// Package gemini is the Gemini generateContent codec of detour's
// cross-vendor translation: it decodes Gemini requests, responses and
// streamGenerateContent?alt=sse events into the vendor-neutral rewrite/ir
// types, and encodes ir values back into the Gemini wire format, so that a
// go-genai (or gg-py) app answered by another vendor cannot tell, and so
// that another vendor's app can be served by a Gemini upstream.
//
// Facts for every mapping are in docs/vendors.md (#request-fields onwards); the
// choices this package makes where the vendors differ are commented where
// they are made. Gemini wire types live here and nowhere else.
//
// The request decoder accepts both spellings the Gemini REST API accepts
// (camelCase, and the snake_case of Google's own curl examples); everything
// else this package reads and writes is camelCase.
//
// gemini imports only rewrite, rewrite/ir and rewrite/sse; it must not
// import rewrite/openai, rewrite/anthropic, rewrite/translate, policy or
// proxy.
package gemini
