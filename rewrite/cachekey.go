package rewrite

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// cacheKeyVersion starts every key's hashed input, so that a change to the
// canonical form below can never make an old entry answer a new request:
// bump it with any such change.
const cacheKeyVersion = "detour-cachekey-1"

// CacheKey returns the response cache's key for an app's request of shape
// shape to path (the URL path, without the query), and the request's
// sampling temperature, which the caller may use to decide whether a
// cached answer is acceptable at all.
//
// The key is SHA-256 over the shape, the path and the body in canonical
// form: the body as encoding/json would re-encode it after decoding it
// with UseNumber into a map[string]any — object keys sorted, the last of
// duplicate keys kept, numbers as written, strings decoded and escaped the
// one way json.Encoder (without HTML escaping) does — with the top-level
// "stream" and "stream_options" removed. So the key does not depend on
// whitespace, key order or string escapes, nor on whether the app
// streams: for Gemini, which streams by path, ":streamGenerateContent"
// counts as ":generateContent". A cached answer is replayed in whichever
// form the app asks for. Any other difference — a message, the model, a
// number spelled differently ("1" and "1.0") — gives another key.
//
// The key says nothing about who asked: a cache shared between apps or
// credentials must add that itself.
//
// temperature is the top-level "temperature" (OpenAI, Anthropic) or
// generationConfig.temperature (Gemini; generation_config, which the API
// also takes, when generationConfig is not an object); hasTemperature is
// false when it is absent, null, not a number or out of float64's range.
// A body that is not one JSON object is an error (*BodyError).
//
// The canonical form is written by a single-pass scanner rather than
// through map[string]any, because the cache sees every request: a 10 KB
// body costs a few allocations instead of a thousand.
// FuzzCacheKeyMatchesEncodingJSON holds the scanner to encoding/json byte
// for byte.
func CacheKey(shape Shape, path string, body []byte) (key [32]byte, temperature float64, hasTemperature bool, err error) {
	if !shape.Valid() {
		return key, 0, false, fmt.Errorf("cache key: unknown shape %q", shape)
	}
	c := canonPool.Get().(*canonicalizer)
	defer c.release()
	if err := c.canonicalize(body); err != nil {
		return key, 0, false, err
	}
	temperature, hasTemperature = c.temperature(shape)

	if shape == Gemini {
		if p, ok := strings.CutSuffix(path, ":streamGenerateContent"); ok {
			path = p + ":generateContent"
		}
	}
	h := sha256.New()
	// Length prefixes, so that no two (shape, path) pairs hash the same
	// bytes whatever characters they hold.
	hdr := c.tmp[:0]
	for _, s := range [...]string{cacheKeyVersion, string(shape), path} {
		hdr = binary.AppendUvarint(hdr, uint64(len(s)))
		hdr = append(hdr, s...)
	}
	c.tmp = hdr
	h.Write(hdr)
	h.Write(c.out)
	h.Sum(key[:0])
	return key, temperature, hasTemperature, nil
}

// canonPool keeps canonicalizers' buffers from request to request.
var canonPool = sync.Pool{New: func() any { return new(canonicalizer) }}

// maxPooledCanon bounds the buffers a pooled canonicalizer keeps, so that
// one huge body does not pin its memory for good.
const maxPooledCanon = 1 << 20

// canonicalizer writes a JSON object in canonical form (see CacheKey).
type canonicalizer struct {
	out  []byte        // the canonical form
	tmp  []byte        // scratch for reordering an object's members
	str  []byte        // scratch for a decoded string
	keys []byte        // decoded keys that differ from their raw bytes
	mems []canonMember // the members of the objects being written, a stack

	// The raw values of the top-level members the temperature is read
	// from (the last of duplicates, as encoding/json keeps).
	temp, genConfig, genConfigSnake []byte
}

// canonMember is one member of an object as written to out.
type canonMember struct {
	// The decoded key is body[ks:ke], or keys[ks:ke] when inKeys (it had
	// escapes or invalid UTF-8).
	ks, ke     int
	inKeys     bool
	start, end int // `"key":value` in out
}

func (c *canonicalizer) release() {
	if cap(c.out) > maxPooledCanon || cap(c.tmp) > maxPooledCanon || cap(c.str) > maxPooledCanon {
		return
	}
	c.out, c.tmp, c.str, c.keys, c.mems = c.out[:0], c.tmp[:0], c.str[:0], c.keys[:0], c.mems[:0]
	c.temp, c.genConfig, c.genConfigSnake = nil, nil, nil
	canonPool.Put(c)
}

// canonicalize writes the canonical form of body, a JSON object, to c.out.
func (c *canonicalizer) canonicalize(body []byte) error {
	i := skipJSONSpace(body, 0)
	if i >= len(body) {
		return &BodyError{i, "empty body, want a JSON object"}
	}
	if body[i] != '{' {
		return &BodyError{i, "not a JSON object"}
	}
	end, serr := c.object(body, i, 0)
	if serr != nil {
		return serr.bodyError()
	}
	if j := skipJSONSpace(body, end); j < len(body) {
		return &BodyError{j, "data after the JSON object"}
	}
	return nil
}

// value writes the value at b[i] (no leading space) and returns the index
// past it. depth counts the containers around it.
func (c *canonicalizer) value(b []byte, i, depth int) (int, *jsonSyntax) {
	if i >= len(b) {
		return i, unexpected(b, i)
	}
	switch ch := b[i]; {
	case ch == '{':
		return c.object(b, i, depth)
	case ch == '[':
		return c.array(b, i, depth)
	case ch == '"':
		end, esc, err := skipJSONString(b, i)
		if err != nil {
			return end, err
		}
		c.out = c.appendString(c.out, b[i+1:end-1], esc)
		return end, nil
	case ch == '-' || ch >= '0' && ch <= '9':
		end, err := skipJSONNumber(b, i)
		if err != nil {
			return end, err
		}
		c.out = append(c.out, b[i:end]...) // json.Number keeps its spelling
		return end, nil
	case ch == 't':
		return c.literal(b, i, "true")
	case ch == 'f':
		return c.literal(b, i, "false")
	case ch == 'n':
		return c.literal(b, i, "null")
	}
	return i, unexpected(b, i)
}

func (c *canonicalizer) literal(b []byte, i int, lit string) (int, *jsonSyntax) {
	end, err := skipJSONLiteral(b, i, lit)
	if err == nil {
		c.out = append(c.out, lit...)
	}
	return end, err
}

func (c *canonicalizer) array(b []byte, i, depth int) (int, *jsonSyntax) {
	if depth >= maxJSONDepth {
		return i, &jsonSyntax{i, "JSON nested too deeply"}
	}
	c.out = append(c.out, '[')
	i = skipJSONSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		c.out = append(c.out, ']')
		return i + 1, nil
	}
	for {
		var err *jsonSyntax
		if i, err = c.value(b, i, depth+1); err != nil {
			return i, err
		}
		i = skipJSONSpace(b, i)
		switch {
		case i < len(b) && b[i] == ',':
			c.out = append(c.out, ',')
			i = skipJSONSpace(b, i+1)
		case i < len(b) && b[i] == ']':
			c.out = append(c.out, ']')
			return i + 1, nil
		default:
			return i, unexpected(b, i)
		}
	}
}

// object writes the object at b[i] with its members in key order. The
// members are written as they come, then reordered in place when they were
// not in order already (apps send "model" before "messages").
func (c *canonicalizer) object(b []byte, i, depth int) (int, *jsonSyntax) {
	if depth >= maxJSONDepth {
		return i, &jsonSyntax{i, "JSON nested too deeply"}
	}
	top := depth == 0
	base, keysBase := len(c.mems), len(c.keys)
	c.out = append(c.out, '{')
	region := len(c.out)
	i = skipJSONSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		c.out = append(c.out, '}')
		return i + 1, nil
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return i, unexpected(b, i)
		}
		kend, esc, err := skipJSONString(b, i)
		if err != nil {
			return kend, err
		}
		inner := b[i+1 : kend-1]
		comma := len(c.out)
		if len(c.mems) > base {
			c.out = append(c.out, ',')
		}
		m := canonMember{start: len(c.out), ks: i + 1, ke: kend - 1}
		if esc || !utf8.Valid(inner) {
			m.inKeys, m.ks = true, len(c.keys)
			c.keys = appendUnquoted(c.keys, inner)
			m.ke = len(c.keys)
		}
		c.out = c.appendString(c.out, inner, esc)
		i = skipJSONSpace(b, kend)
		if i >= len(b) || b[i] != ':' {
			return i, unexpected(b, i)
		}
		c.out = append(c.out, ':')
		i = skipJSONSpace(b, i+1)
		vstart := i
		if i, err = c.value(b, i, depth+1); err != nil {
			return i, err
		}
		m.end = len(c.out)
		if top && c.topMember(c.key(b, &m), b[vstart:i]) {
			c.out = c.out[:comma] // "stream", "stream_options"
		} else {
			c.mems = append(c.mems, m)
		}
		i = skipJSONSpace(b, i)
		if i < len(b) && b[i] == ',' {
			i = skipJSONSpace(b, i+1)
			continue
		}
		if i < len(b) && b[i] == '}' {
			i++
			break
		}
		return i, unexpected(b, i)
	}
	c.order(b, base, region)
	c.out = append(c.out, '}')
	c.mems, c.keys = c.mems[:base], c.keys[:keysBase]
	return i, nil
}

// topMember notes the top-level members the temperature is read from, and
// reports whether the member is one the key leaves out.
func (c *canonicalizer) topMember(key, value []byte) (drop bool) {
	switch string(key) {
	case "stream", "stream_options":
		return true
	case "temperature":
		c.temp = value
	case "generationConfig":
		c.genConfig = value
	case "generation_config":
		c.genConfigSnake = value
	}
	return false
}

// key returns m's decoded key.
func (c *canonicalizer) key(b []byte, m *canonMember) []byte {
	if m.inKeys {
		return c.keys[m.ks:m.ke]
	}
	return b[m.ks:m.ke]
}

// order rewrites the members c.mems[base:], written from out[region:]
// separated by commas, sorted by key, keeping only the last of equal keys.
func (c *canonicalizer) order(b []byte, base, region int) {
	mems := c.mems[base:]
	sorted := true
	for j := 1; j < len(mems) && sorted; j++ {
		sorted = bytes.Compare(c.key(b, &mems[j-1]), c.key(b, &mems[j])) < 0
	}
	if sorted {
		return // and without duplicates: the common case costs no copy
	}
	slices.SortStableFunc(mems, func(x, y canonMember) int {
		return bytes.Compare(c.key(b, &x), c.key(b, &y))
	})
	c.tmp = append(c.tmp[:0], c.out[region:]...)
	c.out = c.out[:region]
	first := true
	for j := range mems {
		if j+1 < len(mems) && bytes.Equal(c.key(b, &mems[j]), c.key(b, &mems[j+1])) {
			continue // a later duplicate wins (the sort is stable)
		}
		if !first {
			c.out = append(c.out, ',')
		}
		first = false
		c.out = append(c.out, c.tmp[mems[j].start-region:mems[j].end-region]...)
	}
}

// appendString appends the canonical form of the JSON string whose raw
// bytes between the quotes are inner; esc says inner has escapes.
func (c *canonicalizer) appendString(dst, inner []byte, esc bool) []byte {
	if !esc && verbatimString(inner) {
		dst = append(dst, '"')
		dst = append(dst, inner...)
		return append(dst, '"')
	}
	c.str = appendUnquoted(c.str[:0], inner)
	return appendCanonicalString(dst, c.str)
}

// verbatimString reports whether a string without escapes is already in
// canonical form: valid UTF-8 without U+2028 and U+2029, which
// encoding/json escapes. (Quotes, backslashes and control characters
// cannot appear unescaped in valid JSON.)
func verbatimString(inner []byte) bool {
	for i, ch := range inner {
		if ch >= utf8.RuneSelf {
			rest := inner[i:]
			return utf8.Valid(rest) && !bytes.Contains(rest, lineSep) && !bytes.Contains(rest, paraSep)
		}
	}
	return true
}

var (
	lineSep = []byte("\u2028")
	paraSep = []byte("\u2029")
)

// appendUnquoted appends the string the valid JSON string body s stands
// for, exactly as encoding/json decodes it: invalid UTF-8 and unpaired
// surrogates become U+FFFD.
func appendUnquoted(dst, s []byte) []byte {
	for r := 0; r < len(s); {
		ch := s[r]
		switch {
		case ch == '\\':
			switch e := s[r+1]; e {
			case 'b':
				dst = append(dst, '\b')
			case 'f':
				dst = append(dst, '\f')
			case 'n':
				dst = append(dst, '\n')
			case 'r':
				dst = append(dst, '\r')
			case 't':
				dst = append(dst, '\t')
			case 'u':
				rr := hex4(s[r+2:])
				r += 6
				if utf16.IsSurrogate(rr) {
					if r+6 <= len(s) && s[r] == '\\' && s[r+1] == 'u' {
						if dec := utf16.DecodeRune(rr, hex4(s[r+2:])); dec != unicode.ReplacementChar {
							r += 6
							dst = utf8.AppendRune(dst, dec)
							continue
						}
					}
					rr = unicode.ReplacementChar
				}
				dst = utf8.AppendRune(dst, rr)
				continue
			default: // '"', '\\', '/'
				dst = append(dst, e)
			}
			r += 2
		case ch < utf8.RuneSelf:
			dst = append(dst, ch)
			r++
		default:
			rr, size := utf8.DecodeRune(s[r:])
			dst = utf8.AppendRune(dst, rr)
			r += size
		}
	}
	return dst
}

// hex4 reads the four hex digits at the start of s (validated).
func hex4(s []byte) rune {
	var r rune
	for _, ch := range s[:4] {
		switch {
		case ch >= '0' && ch <= '9':
			ch -= '0'
		case ch >= 'a' && ch <= 'f':
			ch -= 'a' - 10
		default:
			ch -= 'A' - 10
		}
		r = r<<4 | rune(ch)
	}
	return r
}

// appendCanonicalString appends s (valid UTF-8) quoted as json.Encoder
// does with SetEscapeHTML(false): \" \\ \b \f \n \r \t, \u00XX for other
// control characters, \u2028 and \u2029; everything else as it is.
func appendCanonicalString(dst, s []byte) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		ch := s[i]
		if ch < utf8.RuneSelf {
			if ch >= 0x20 && ch != '"' && ch != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch ch {
			case '"', '\\':
				dst = append(dst, '\\', ch)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[ch>>4], hex[ch&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRune(s[i:])
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[r&0xf])
			start = i + size
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// temperature reads the sampling temperature from the top-level values
// noted while canonicalizing.
func (c *canonicalizer) temperature(shape Shape) (float64, bool) {
	v := c.temp
	if shape == Gemini {
		cfg := c.genConfig
		if !isJSONObject(cfg) {
			cfg = c.genConfigSnake
		}
		v = nil
		if it, ok := iterJSON(cfg); ok && it.obj {
			for {
				m, ok := it.next()
				if !ok {
					break
				}
				if m.keyIs("temperature") {
					v = m.value()
				}
			}
		}
	}
	if len(v) == 0 || !(v[0] == '-' || v[0] >= '0' && v[0] <= '9') {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(v), 64)
	if err != nil {
		return 0, false // out of float64's range, as json.Number.Float64 says
	}
	return f, true
}

func isJSONObject(v []byte) bool { return len(v) > 0 && v[0] == '{' }
