// Package jsonscan is detour's one JSON scanner: it validates JSON, walks
// the members of an object or the elements of an array as byte ranges of
// the input, decodes the few strings and integers a caller picks out, and
// writes JSON strings. It builds no value and, on valid input, allocates
// nothing but the strings it returns, which is why it exists:
// encoding/json costs microseconds and a dozen allocations per stream
// event, and a thousand per 10 KB request body, where detour needs two
// fields.
//
// Everything that reads JSON on detour's hot paths goes through it: the
// same-shape fast path (rewrite.PeekRequest, rewrite.SetModel), stream
// event inspection and usage (rewrite.InspectEvent, rewrite.ExtractUsage),
// the response cache key, and the vendor stream decoders. So they all
// accept exactly what encoding/json accepts, read keys and strings exactly
// as encoding/json reads them (escapes, surrogate pairs, invalid UTF-8 as
// U+FFFD, the last of duplicate keys), and write strings exactly as
// json.Encoder does with SetEscapeHTML(false). The package's fuzz targets
// hold it to encoding/json on all of that.
//
// Two ways to walk:
//   - Scan validates as it goes, and reports where and why input is not
//     JSON (Iter.End): for input nobody has checked yet.
//   - Object and Array trust that the input is valid (checked once with
//     Valid, or by encoding/json), and only find where values end: for
//     decoders that look into a few nested levels of one document.
//
// jsonscan imports only the standard library, and not encoding/json: it is
// what the hot paths use instead of encoding/json, and encoding/json is the
// oracle its tests compare it with. It must not import any detour package:
// every rewrite package, rewrite itself included, depends on it.
package jsonscan
