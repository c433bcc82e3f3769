package rewrite

import (
	"fmt"
	"strings"

	"github.com/detour-proxy/detour/rewrite/internal/jsonscan"
)

// This file holds the request-body helpers of the same-shape fast path,
// where detour forwards the app's body as it is except for the model name.
// They read the body with jsonscan, which validates and walks JSON without
// building any value, so that reading two fields of a 100 KB chat body
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
	var model, stream []byte // the last of each; nil when absent
	var modelAt, streamAt int
	for m, ok := it.Next(); ok; m, ok = it.Next() {
		switch {
		case m.KeyIs("model"):
			model = m.Value()
			modelAt, _ = m.ValueSpan()
		case m.KeyIs("stream"):
			stream = m.Value()
			streamAt, _ = m.ValueSpan()
		}
	}
	if err := it.End(); err != nil {
		return RequestFacts{}, bodyError(err)
	}
	var f RequestFacts
	if model != nil {
		switch model[0] {
		case '"':
			f.Model = jsonscan.String(model)
		case 'n':
		default:
			return RequestFacts{}, &BodyError{modelAt, `"model" is not a string`}
		}
	}
	if stream != nil {
		switch stream[0] {
		case 't':
			f.Stream = true
		case 'f', 'n':
		default:
			return RequestFacts{}, &BodyError{streamAt, `"stream" is not a boolean`}
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
	for m, ok := it.Next(); ok; m, ok = it.Next() {
		if m.KeyIs("model") {
			start, end := m.ValueSpan()
			spans = append(spans, [2]int{start, end})
			removed += end - start
		}
	}
	if err := it.End(); err != nil {
		return nil, bodyError(err)
	}
	quotedLen := jsonscan.StringLen(model)
	if len(spans) == 0 {
		// Insert after the brace; the comma only when a member follows.
		brace := jsonscan.SkipSpace(body, 0)
		size := len(body) + len(`"model":`) + quotedLen
		if it.Count() > 0 {
			size++
		}
		out := make([]byte, 0, size)
		out = append(out, body[:brace+1]...)
		out = append(out, `"model":`...)
		out = AppendJSONString(out, model)
		if it.Count() > 0 {
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

// bodyError is a request body's syntax error in the API's terms.
func bodyError(e *jsonscan.SyntaxError) *BodyError { return &BodyError{e.Offset, e.Reason} }

// topLevelMembers starts a walk over the members of body, which must be a
// JSON object.
func topLevelMembers(body []byte) (jsonscan.Iter, error) {
	it, ok := jsonscan.Scan(body)
	if !ok || !it.IsObject() {
		i := jsonscan.SkipSpace(body, 0)
		if i >= len(body) {
			return it, &BodyError{i, "empty body, want a JSON object"}
		}
		return it, &BodyError{i, "not a JSON object"}
	}
	return it, nil
}
