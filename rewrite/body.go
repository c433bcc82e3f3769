package rewrite

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// This file holds the request-body helpers of the same-shape fast path,
// where detour forwards the app's body as it is except for the model name,
// and the small JSON scanner they (and InspectEvent, ExtractUsage) share.
// The scanner validates and walks JSON without building any value, so that
// reading two fields of a 100 KB chat body, or one flag of a stream event,
// neither allocates nor decodes what detour does not look at.

// RequestFacts are the few fields detour needs from an app's request body.
type RequestFacts struct {
	// Model is the top-level "model" string; "" when absent or null (Gemini
	// bodies never have one: the model is in the URL path).
	Model string
	// Stream is the top-level "stream" flag; false when absent or null.
	Stream bool
}

// BodyError reports why a request body is not a JSON object detour can
// read, and where.
type BodyError struct {
	// Offset is the byte offset in the body where the problem was found.
	Offset int
	// Reason says what is wrong, in words for a log or an error body.
	Reason string
}

// Error implements error.
func (e *BodyError) Error() string {
	return fmt.Sprintf("request body: %s at offset %d", e.Reason, e.Offset)
}

// PeekRequest reads the top-level "model" and "stream" of a JSON request
// body. It checks that the whole body is valid JSON and an object, but
// builds no other value: nested values are only scanned over. Errors are
// *BodyError. As with encoding/json, the last of duplicate keys wins.
func PeekRequest(body []byte) (RequestFacts, error) {
	it, err := topLevelMembers(body)
	if err != nil {
		return RequestFacts{}, err
	}
	var model, stream jsonMember // the last of each; valEnd == 0 when absent
	for {
		m, ok := it.next()
		if !ok {
			break
		}
		switch {
		case m.keyIs("model"):
			model = m
		case m.keyIs("stream"):
			stream = m
		}
	}
	if err := it.end(); err != nil {
		return RequestFacts{}, err
	}
	var f RequestFacts
	if model.valEnd > 0 {
		switch v := model.value(); v[0] {
		case '"':
			f.Model = jsonStringValue(v)
		case 'n':
		default:
			return RequestFacts{}, &BodyError{model.valStart, `"model" is not a string`}
		}
	}
	if stream.valEnd > 0 {
		switch stream.value()[0] {
		case 't':
			f.Stream = true
		case 'f', 'n':
		default:
			return RequestFacts{}, &BodyError{stream.valStart, `"stream" is not a boolean`}
		}
	}
	return f, nil
}

// SetModel returns a copy of body, a JSON object, with the value of its
// top-level "model" key replaced by model, and every other byte unchanged:
// key order, whitespace, escapes and number spellings stay as the app sent
// them, so the upstream sees the app's request. Every top-level "model" key
// is replaced, so that no parser can pick a stale duplicate. When there is
// none, `"model":"…",` is inserted right after the opening brace. body is
// not modified. Errors are *BodyError.
func SetModel(body []byte, model string) ([]byte, error) {
	it, err := topLevelMembers(body)
	if err != nil {
		return nil, err
	}
	// Value spans of the "model" keys: almost always exactly one, so the
	// first few are kept without allocating.
	var spanBuf [4][2]int
	spans := spanBuf[:0]
	removed := 0
	for {
		m, ok := it.next()
		if !ok {
			break
		}
		if m.keyIs("model") {
			spans = append(spans, [2]int{m.valStart, m.valEnd})
			removed += m.valEnd - m.valStart
		}
	}
	if err := it.end(); err != nil {
		return nil, err
	}
	quotedLen := jsonStringLen(model)
	if len(spans) == 0 {
		// Insert after the brace; the comma only when a member follows.
		brace := skipJSONSpace(body, 0)
		size := len(body) + len(`"model":`) + quotedLen
		if it.count > 0 {
			size++
		}
		out := make([]byte, 0, size)
		out = append(out, body[:brace+1]...)
		out = append(out, `"model":`...)
		out = AppendJSONString(out, model)
		if it.count > 0 {
			out = append(out, ',')
		}
		return append(out, body[brace+1:]...), nil
	}
	out := make([]byte, 0, len(body)-removed+len(spans)*quotedLen)
	prev := 0
	for _, s := range spans {
		out = append(out, body[prev:s[0]]...)
		out = AppendJSONString(out, model)
		prev = s[1]
	}
	return append(out, body[prev:]...), nil
}

// GeminiModelFromPath splits a Gemini API path such as
// "/v1beta/models/gemini-2.5-flash:streamGenerateContent" into the model
// ("gemini-2.5-flash") and the method ("streamGenerateContent"). Any API
// version segment ("/v1", "/v1beta", "/v1alpha") is accepted. A tuned model
// ("/v1beta/tunedModels/my-model:generateContent") is returned with its
// collection, "tunedModels/my-model", as go-genai users name it, so that
// SetGeminiModelInPath can put it back; a base model is returned bare, like
// the model names in OpenAI and Anthropic bodies. ok is false for any other
// path. path is the URL's path, without the query.
func GeminiModelFromPath(path string) (model, method string, ok bool) {
	_, collection, id, method, ok := splitGeminiPath(path)
	if !ok {
		return "", "", false
	}
	if collection == "tunedModels" {
		id = collection + "/" + id
	}
	return id, method, true
}

// SetGeminiModelInPath returns path with its model replaced by model, named
// as GeminiModelFromPath returns it: a bare name (or "models/name") for a
// base model, "tunedModels/name" for a tuned one. ok is false when path is
// not a Gemini model path or model is not a valid name.
func SetGeminiModelInPath(path, model string) (string, bool) {
	version, _, _, method, ok := splitGeminiPath(path)
	if !ok {
		return "", false
	}
	collection := "models"
	if rest, found := strings.CutPrefix(model, "tunedModels/"); found {
		collection, model = "tunedModels", rest
	} else {
		model = strings.TrimPrefix(model, "models/")
	}
	if !validGeminiModelID(model) {
		return "", false
	}
	return "/" + version + "/" + collection + "/" + model + ":" + method, true
}

// splitGeminiPath splits "/{version}/{models|tunedModels}/{id}:{method}".
func splitGeminiPath(path string) (version, collection, id, method string, ok bool) {
	rest, found := strings.CutPrefix(path, "/")
	if !found {
		return
	}
	version, rest, found = strings.Cut(rest, "/")
	if !found || !validGeminiVersion(version) {
		return
	}
	collection, rest, found = strings.Cut(rest, "/")
	if !found || (collection != "models" && collection != "tunedModels") {
		return
	}
	// The method follows the last colon: ids never contain one.
	i := strings.LastIndexByte(rest, ':')
	if i < 0 {
		return
	}
	id, method = rest[:i], rest[i+1:]
	if !validGeminiModelID(id) || method == "" || strings.ContainsAny(method, "/:") {
		return
	}
	return version, collection, id, method, true
}

// validGeminiVersion accepts "v1", "v1beta", "v1alpha", "v2" and the like.
func validGeminiVersion(v string) bool {
	if len(v) < 2 || v[0] != 'v' || v[1] < '0' || v[1] > '9' {
		return false
	}
	for i := 2; i < len(v); i++ {
		c := v[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z') {
			return false
		}
	}
	return true
}

// validGeminiModelID reports whether id can stand as one path segment
// before the method.
func validGeminiModelID(id string) bool {
	return id != "" && id != "." && id != ".." && !strings.ContainsAny(id, "/:?#")
}

// ---- JSON scanning ----

// maxJSONDepth bounds nesting, as encoding/json does, so that a hostile body
// cannot exhaust the stack.
const maxJSONDepth = 10000

// jsonSyntax is a scanning error: what and where.
type jsonSyntax struct {
	off    int
	reason string
}

func (e jsonSyntax) bodyError() *BodyError { return &BodyError{e.off, e.reason} }

// skipJSONSpace returns the index of the first non-space byte at or after i.
func skipJSONSpace(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

func unexpected(b []byte, i int) *jsonSyntax {
	if i >= len(b) {
		return &jsonSyntax{i, "unexpected end of JSON"}
	}
	return &jsonSyntax{i, fmt.Sprintf("unexpected %q", b[i])}
}

// skipJSONValue validates the JSON value starting at b[i] (no leading
// space) and returns the index just past it.
func skipJSONValue(b []byte, i, depth int) (int, *jsonSyntax) {
	if i >= len(b) {
		return i, unexpected(b, i)
	}
	switch c := b[i]; {
	case c == '"':
		end, _, err := skipJSONString(b, i)
		return end, err
	case c == '{' || c == '[':
		if depth >= maxJSONDepth {
			return i, &jsonSyntax{i, "JSON nested too deeply"}
		}
		it := jsonIter{b: b, pos: i + 1, obj: c == '{', depth: depth + 1}
		for {
			if _, ok := it.next(); !ok {
				break
			}
		}
		return it.pos, it.err
	case c == '-' || c >= '0' && c <= '9':
		return skipJSONNumber(b, i)
	case c == 't':
		return skipJSONLiteral(b, i, "true")
	case c == 'f':
		return skipJSONLiteral(b, i, "false")
	case c == 'n':
		return skipJSONLiteral(b, i, "null")
	}
	return i, unexpected(b, i)
}

func skipJSONLiteral(b []byte, i int, lit string) (int, *jsonSyntax) {
	for j := 0; j < len(lit); j++ {
		if i+j >= len(b) || b[i+j] != lit[j] {
			return i + j, unexpected(b, i+j)
		}
	}
	return i + len(lit), nil
}

// skipJSONString validates the string starting at the quote b[i] and
// returns the index past its closing quote and whether it has escapes.
func skipJSONString(b []byte, i int) (end int, escaped bool, err *jsonSyntax) {
	for j := i + 1; j < len(b); j++ {
		// Most bytes of a string need no thought: skip them in a tight loop.
		for j < len(b) && jsonPlainStringByte[b[j]] {
			j++
		}
		if j >= len(b) {
			break
		}
		switch c := b[j]; {
		case c == '"':
			return j + 1, escaped, nil
		case c == '\\':
			escaped = true
			j++
			if j >= len(b) {
				return j, escaped, unexpected(b, j)
			}
			switch b[j] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				for k := 1; k <= 4; k++ {
					if j+k >= len(b) || !isHex(b[j+k]) {
						return j + k, escaped, &jsonSyntax{j + k, `invalid \u escape`}
					}
				}
				j += 4
			default:
				return j, escaped, &jsonSyntax{j, "invalid escape"}
			}
		case c < 0x20:
			return j, escaped, &jsonSyntax{j, "control character in string"}
		}
	}
	return len(b), escaped, unexpected(b, len(b))
}

// jsonPlainStringByte marks the bytes that stand for themselves inside a
// JSON string: not a quote, a backslash or a control character.
var jsonPlainStringByte = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// skipJSONNumber validates -?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)? at b[i].
func skipJSONNumber(b []byte, i int) (int, *jsonSyntax) {
	digits := func(j int) (int, *jsonSyntax) {
		k := j
		for k < len(b) && b[k] >= '0' && b[k] <= '9' {
			k++
		}
		if k == j {
			return k, unexpected(b, k)
		}
		return k, nil
	}
	if b[i] == '-' {
		i++
	}
	var err *jsonSyntax
	if i < len(b) && b[i] == '0' {
		i++
	} else if i, err = digits(i); err != nil {
		return i, err
	}
	if i < len(b) && b[i] == '.' {
		if i, err = digits(i + 1); err != nil {
			return i, err
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i, err = digits(i); err != nil {
			return i, err
		}
	}
	return i, nil
}

// jsonMember is one member of an object (or element of an array: no key)
// found by jsonIter. Offsets index the scanned slice.
type jsonMember struct {
	b                []byte
	keyStart, keyEnd int // the key's bytes between its quotes
	keyEscaped       bool
	valStart, valEnd int
}

// keyIs reports whether the member's key is name, decoding escapes only
// when the key has any (rare; "mod\u0065l" is still "model").
func (m *jsonMember) keyIs(name string) bool {
	key := m.b[m.keyStart:m.keyEnd]
	if !m.keyEscaped {
		return string(key) == name
	}
	return jsonStringValue(m.b[m.keyStart-1:m.keyEnd+1]) == name
}

// value returns the member's value bytes.
func (m *jsonMember) value() []byte { return m.b[m.valStart:m.valEnd] }

// jsonIter walks the members of one object or the elements of one array,
// validating each as it skips it. It allocates nothing.
type jsonIter struct {
	b     []byte
	pos   int // next byte to read; past the closing bracket when done
	obj   bool
	depth int
	count int
	done  bool
	err   *jsonSyntax
}

// iterJSON starts a walk over the object or array v (a whole value, spaces
// around it allowed). ok is false when v is neither.
func iterJSON(v []byte) (jsonIter, bool) {
	i := skipJSONSpace(v, 0)
	if i >= len(v) || (v[i] != '{' && v[i] != '[') {
		return jsonIter{}, false
	}
	return jsonIter{b: v, pos: i + 1, obj: v[i] == '{', depth: 1}, true
}

// next returns the next member. ok is false at the end of the container or
// at a syntax error (then it.err is set).
func (it *jsonIter) next() (m jsonMember, ok bool) {
	if it.done {
		return m, false
	}
	b := it.b
	i := skipJSONSpace(b, it.pos)
	closer := byte(']')
	if it.obj {
		closer = '}'
	}
	if i < len(b) && b[i] == closer {
		it.pos, it.done = i+1, true
		return m, false
	}
	if it.count > 0 {
		if i >= len(b) || b[i] != ',' {
			return m, it.fail(unexpected(b, i))
		}
		i = skipJSONSpace(b, i+1)
	}
	m.b = b
	if it.obj {
		if i >= len(b) || b[i] != '"' {
			return m, it.fail(unexpected(b, i))
		}
		end, esc, err := skipJSONString(b, i)
		if err != nil {
			return m, it.fail(err)
		}
		m.keyStart, m.keyEnd, m.keyEscaped = i+1, end-1, esc
		i = skipJSONSpace(b, end)
		if i >= len(b) || b[i] != ':' {
			return m, it.fail(unexpected(b, i))
		}
		i = skipJSONSpace(b, i+1)
	}
	end, err := skipJSONValue(b, i, it.depth)
	if err != nil {
		return m, it.fail(err)
	}
	m.valStart, m.valEnd = i, end
	it.pos = end
	it.count++
	return m, true
}

func (it *jsonIter) fail(err *jsonSyntax) bool {
	it.err, it.done = err, true
	return false
}

// end reports, once next has returned false, whether the walk stopped at a
// syntax error. For a walk from topLevelMembers it also checks that nothing
// but space follows the object.
func (it *jsonIter) end() error {
	if it.err != nil {
		return it.err.bodyError()
	}
	if it.depth == 1 {
		if i := skipJSONSpace(it.b, it.pos); i < len(it.b) {
			return (&jsonSyntax{i, "data after the JSON object"}).bodyError()
		}
	}
	return nil
}

// validJSON reports whether a walk ended cleanly and nothing follows.
func (it *jsonIter) validJSON() bool { return it.end() == nil }

// topLevelMembers starts a walk over the members of body, which must be a
// JSON object.
func topLevelMembers(body []byte) (jsonIter, error) {
	it, ok := iterJSON(body)
	if !ok || !it.obj {
		i := skipJSONSpace(body, 0)
		if i >= len(body) {
			return it, &BodyError{i, "empty body, want a JSON object"}
		}
		return it, &BodyError{i, "not a JSON object"}
	}
	return it, nil
}

// jsonStringValue decodes the JSON string v (quotes included, already
// validated). Plain strings cost one copy; strings with escapes or invalid
// UTF-8 are left to encoding/json (surrogate pairs, U+FFFD and all), so that
// detour reads every string the way a Go upstream would.
func jsonStringValue(v []byte) string {
	if len(v) < 2 {
		return ""
	}
	inner := v[1 : len(v)-1]
	ascii := true
	for _, c := range inner {
		if c == '\\' {
			return decodeJSONString(v)
		}
		ascii = ascii && c < utf8.RuneSelf
	}
	if !ascii && !utf8.Valid(inner) {
		return decodeJSONString(v)
	}
	return string(inner)
}

func decodeJSONString(v []byte) string {
	var s string
	json.Unmarshal(v, &s)
	return s
}

// jsonInt reads a JSON number that is an integer; anything else (a
// fraction, an exponent, a value out of the int64 range, not a number) is
// 0, as a token count detour cannot read.
func jsonInt(v []byte) int64 {
	neg := len(v) > 0 && v[0] == '-'
	if neg {
		v = v[1:]
	}
	if len(v) == 0 {
		return 0
	}
	var n uint64
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0
		}
		n = n*10 + uint64(c-'0')
		if n > 1<<63 {
			return 0
		}
	}
	if neg {
		return -int64(n) // -(1<<63) converts exactly
	}
	if n == 1<<63 {
		return 0
	}
	return int64(n)
}

// jsonStringLen is len(AppendJSONString(nil, s)) without building it.
func jsonStringLen(s string) int {
	n := 2
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c >= utf8.RuneSelf:
			r, size := utf8.DecodeRuneInString(s[i:])
			switch {
			case r == utf8.RuneError && size == 1:
				n += len(`\ufffd`)
			case r == '\u2028' || r == '\u2029':
				n += len(`\u2028`)
			default:
				n += size
			}
			i += size
			continue
		case c == '"' || c == '\\' || c == '\n' || c == '\r' || c == '\t':
			n += 2
		case c < 0x20:
			n += 6
		default:
			n++
		}
		i++
	}
	return n
}
