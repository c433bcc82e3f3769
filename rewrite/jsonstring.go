package rewrite

import "github.com/detour-proxy/detour/rewrite/internal/jsonscan"

// AppendJSONString appends s to dst as a JSON string, exactly as
// json.Encoder writes it with SetEscapeHTML(false): it escapes what JSON
// requires (quotes, backslashes, control characters, \b and \f among them
// as short escapes) plus U+2028 and U+2029, and turns invalid UTF-8 into
// \ufffd; it does not escape HTML. The result never contains a raw line
// break, so it is safe on one SSE data line. It allocates nothing beyond
// growing dst. The vendor encoders share it: their stream encoders write
// JSON by hand to keep per-event allocations at zero. It is the same
// escaper the cache key's canonical form is written with.
func AppendJSONString(dst []byte, s string) []byte { return jsonscan.AppendString(dst, s) }
