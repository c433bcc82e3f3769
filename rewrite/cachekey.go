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
	"unicode/utf8"

	"github.com/detour-proxy/detour/rewrite/internal/jsonscan"
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
// The canonical form is written in a single pass over the body, with
// jsonscan's validating primitives, rather than through map[string]any,
// because the cache sees every request: a 10 KB body costs a few
// allocations instead of a thousand.
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
	i := jsonscan.SkipSpace(body, 0)
	if i >= len(body) {
		return &BodyError{i, "empty body, want a JSON object"}
	}
	if body[i] != '{' {
		return &BodyError{i, "not a JSON object"}
	}
	end, serr := c.object(body, i, 0)
	if serr != nil {
		return bodyError(serr)
	}
	if j := jsonscan.SkipSpace(body, end); j < len(body) {
		return &BodyError{j, "data after the JSON object"}
	}
	return nil
}

// value writes the value at b[i] (no leading space) and returns the index
// past it. depth counts the containers around it.
func (c *canonicalizer) value(b []byte, i, depth int) (int, *jsonscan.SyntaxError) {
	if i >= len(b) {
		return i, jsonscan.Unexpected(b, i)
	}
	switch ch := b[i]; {
	case ch == '{':
		return c.object(b, i, depth)
	case ch == '[':
		return c.array(b, i, depth)
	case ch == '"':
		end, esc, err := jsonscan.SkipString(b, i)
		if err != nil {
			return end, err
		}
		c.out = c.appendString(c.out, b[i+1:end-1], esc)
		return end, nil
	case ch == '-' || ch >= '0' && ch <= '9':
		end, err := jsonscan.SkipNumber(b, i)
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
	return i, jsonscan.Unexpected(b, i)
}

func (c *canonicalizer) literal(b []byte, i int, lit string) (int, *jsonscan.SyntaxError) {
	end, err := jsonscan.SkipLiteral(b, i, lit)
	if err == nil {
		c.out = append(c.out, lit...)
	}
	return end, err
}

func (c *canonicalizer) array(b []byte, i, depth int) (int, *jsonscan.SyntaxError) {
	if err := jsonscan.DepthError(i, depth); err != nil {
		return i, err
	}
	c.out = append(c.out, '[')
	i = jsonscan.SkipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		c.out = append(c.out, ']')
		return i + 1, nil
	}
	for {
		var err *jsonscan.SyntaxError
		if i, err = c.value(b, i, depth+1); err != nil {
			return i, err
		}
		i = jsonscan.SkipSpace(b, i)
		switch {
		case i < len(b) && b[i] == ',':
			c.out = append(c.out, ',')
			i = jsonscan.SkipSpace(b, i+1)
		case i < len(b) && b[i] == ']':
			c.out = append(c.out, ']')
			return i + 1, nil
		default:
			return i, jsonscan.Unexpected(b, i)
		}
	}
}

// object writes the object at b[i] with its members in key order. The
// members are written as they come, then reordered in place when they were
// not in order already (apps send "model" before "messages").
func (c *canonicalizer) object(b []byte, i, depth int) (int, *jsonscan.SyntaxError) {
	if err := jsonscan.DepthError(i, depth); err != nil {
		return i, err
	}
	top := depth == 0
	base, keysBase := len(c.mems), len(c.keys)
	c.out = append(c.out, '{')
	region := len(c.out)
	i = jsonscan.SkipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		c.out = append(c.out, '}')
		return i + 1, nil
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return i, jsonscan.Unexpected(b, i)
		}
		kend, esc, err := jsonscan.SkipString(b, i)
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
			c.keys = jsonscan.AppendUnquoted(c.keys, inner)
			m.ke = len(c.keys)
		}
		c.out = c.appendString(c.out, inner, esc)
		i = jsonscan.SkipSpace(b, kend)
		if i >= len(b) || b[i] != ':' {
			return i, jsonscan.Unexpected(b, i)
		}
		c.out = append(c.out, ':')
		i = jsonscan.SkipSpace(b, i+1)
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
		i = jsonscan.SkipSpace(b, i)
		if i < len(b) && b[i] == ',' {
			i = jsonscan.SkipSpace(b, i+1)
			continue
		}
		if i < len(b) && b[i] == '}' {
			i++
			break
		}
		return i, jsonscan.Unexpected(b, i)
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
	c.str = jsonscan.AppendUnquoted(c.str[:0], inner)
	return jsonscan.AppendString(dst, c.str)
}

// verbatimString reports whether a string without escapes is already in
// canonical form: valid UTF-8 without U+2028 and U+2029, which
// encoding/json escapes, and so jsonscan.AppendString would. (Quotes,
// backslashes and control characters cannot appear unescaped in valid
// JSON.)
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
		if it, ok := jsonscan.Scan(cfg); ok && it.IsObject() {
			for m, ok := it.Next(); ok; m, ok = it.Next() {
				if m.KeyIs("temperature") {
					v = m.Value()
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
