package openai

import (
	"errors"
	"strings"

	"github.com/detour-proxy/detour/rewrite/internal/jsonscan"
	"github.com/detour-proxy/detour/rewrite/ir"
)

// The stream decoder reads chunks with jsonscan rather than encoding/json:
// a stream sends a chunk per token, and encoding/json's reflection costs
// several microseconds and a dozen allocations per chunk. A chunk is
// validated once (jsonscan.Valid), then the objects the decoder cares
// about are walked over the already valid bytes (jsonscan.Object, Array).
// The decoder follows encoding/json's rules wherever it relies on them:
// the last of duplicate keys wins, null is "not set", integers must be
// integer literals that fit, strings decode as encoding/json decodes them.
// Keys match exactly; encoding/json would also accept keys that differ in
// case, which no server sends.

// parsedChunk is what the stream decoder reads from one
// chat.completion.chunk. Its slices are reused from chunk to chunk.
type parsedChunk struct {
	id, model string
	// failed reports a non-null top-level "error".
	failed   bool
	choices  []parsedChoice
	usage    ir.TokenUsage
	hasUsage bool
}

// parsedChoice is one element of a chunk's choices.
type parsedChoice struct {
	index  int
	finish string
	// content is delta.content, a string or (Mistral, some gateways) an
	// array of parts whose text parts are concatenated.
	content string
	// reasoningContent (DeepSeek, vLLM) and reasoning (OpenRouter, newer
	// vLLM) are read when they are strings and ignored otherwise.
	reasoningContent, reasoning string
	refusal                     string
	tools                       []parsedToolDelta
	// function is the legacy functions API's function_call delta.
	function    functionIO
	hasFunction bool
}

// parsedToolDelta is one element of delta.tool_calls.
type parsedToolDelta struct {
	// index is the upstream's index; hasIndex is false when it sent none
	// (docs/vendors.md#openai-go: openai-go would then read 0 and collide parallel
	// calls).
	index    int
	hasIndex bool
	id       string
	function functionIO
}

// parseChunk reads data, one chat.completion.chunk, into c. Like
// encoding/json decoding into typed fields, it fails on invalid JSON and on
// a known field of the wrong type anywhere in the chunk, and ignores
// unknown fields. The id and model are decoded only with meta (the stream
// decoder needs them from the first chunk only); otherwise they are only
// type-checked, which spares two allocations per chunk.
func parseChunk(data []byte, c *parsedChunk, meta bool) error {
	if err := jsonscan.Valid(data); err != nil {
		return err
	}
	var id, model, choices, usage, failure []byte
	it, ok := jsonscan.Object(data)
	if !ok {
		return errJSONType
	}
	for m, more := it.Next(); more; m, more = it.Next() {
		switch {
		case m.KeyIs("id"):
			id = m.Value()
		case m.KeyIs("model"):
			model = m.Value()
		case m.KeyIs("choices"):
			choices = m.Value()
		case m.KeyIs("usage"):
			usage = m.Value()
		case m.KeyIs("error"):
			failure = m.Value()
		}
	}
	var err error
	c.choices = c.choices[:0]
	c.id, c.model = "", ""
	switch {
	case meta:
		if c.id, err = jsonStringOrNull(id); err != nil {
			return err
		}
		if c.model, err = jsonStringOrNull(model); err != nil {
			return err
		}
	case !jsonscan.IsNull(id) && id[0] != '"', !jsonscan.IsNull(model) && model[0] != '"':
		return errJSONType
	}
	c.failed = !jsonscan.IsNull(failure)
	if !jsonscan.IsNull(choices) {
		els, ok := jsonscan.Array(choices)
		if !ok {
			return errJSONType
		}
		for e, more := els.Next(); more; e, more = els.Next() {
			v := e.Value()
			if err := parseChoice(v, c.addChoice()); err != nil {
				return err
			}
		}
	}
	c.usage, c.hasUsage = ir.TokenUsage{}, !jsonscan.IsNull(usage)
	if c.hasUsage {
		return parseUsage(usage, &c.usage)
	}
	return nil
}

// addChoice appends a zero choice to c, reusing the memory of an earlier
// chunk's.
func (c *parsedChunk) addChoice() *parsedChoice {
	if len(c.choices) < cap(c.choices) {
		c.choices = c.choices[:len(c.choices)+1]
		p := &c.choices[len(c.choices)-1]
		*p = parsedChoice{tools: p.tools[:0]}
		return p
	}
	c.choices = append(c.choices, parsedChoice{})
	return &c.choices[len(c.choices)-1]
}

func parseChoice(v []byte, c *parsedChoice) error {
	if jsonscan.IsNull(v) {
		return nil
	}
	it, ok := jsonscan.Object(v)
	if !ok {
		return errJSONType
	}
	var index, delta, finish []byte
	for m, more := it.Next(); more; m, more = it.Next() {
		switch {
		case m.KeyIs("index"):
			index = m.Value()
		case m.KeyIs("delta"):
			delta = m.Value()
		case m.KeyIs("finish_reason"):
			finish = m.Value()
		}
	}
	n, _, err := jsonInt(index)
	if err != nil {
		return err
	}
	c.index = int(n)
	if c.finish, err = jsonStringOrNull(finish); err != nil {
		return err
	}
	return parseDelta(delta, c)
}

func parseDelta(v []byte, c *parsedChoice) error {
	if jsonscan.IsNull(v) {
		return nil
	}
	it, ok := jsonscan.Object(v)
	if !ok {
		return errJSONType
	}
	var content, reasoningContent, reasoning, refusal, tools, function []byte
	for m, more := it.Next(); more; m, more = it.Next() {
		switch {
		case m.KeyIs("content"):
			content = m.Value()
		case m.KeyIs("reasoning_content"):
			reasoningContent = m.Value()
		case m.KeyIs("reasoning"):
			reasoning = m.Value()
		case m.KeyIs("refusal"):
			refusal = m.Value()
		case m.KeyIs("tool_calls"):
			tools = m.Value()
		case m.KeyIs("function_call"):
			function = m.Value()
		}
	}
	var err error
	if c.content, err = parseFlexText(content); err != nil {
		return err
	}
	if c.refusal, err = jsonStringOrNull(refusal); err != nil {
		return err
	}
	if c.reasoningContent, err = looseString(reasoningContent); err != nil {
		return err
	}
	if c.reasoning, err = looseString(reasoning); err != nil {
		return err
	}
	if !jsonscan.IsNull(function) {
		c.hasFunction = true
		if err := parseFunction(function, &c.function); err != nil {
			return err
		}
	}
	if jsonscan.IsNull(tools) {
		return nil
	}
	els, ok := jsonscan.Array(tools)
	if !ok {
		return errJSONType
	}
	for e, more := els.Next(); more; e, more = els.Next() {
		v := e.Value()
		c.tools = append(c.tools, parsedToolDelta{})
		if err := parseToolDelta(v, &c.tools[len(c.tools)-1]); err != nil {
			return err
		}
	}
	return nil
}

func parseToolDelta(v []byte, t *parsedToolDelta) error {
	if jsonscan.IsNull(v) {
		return nil
	}
	it, ok := jsonscan.Object(v)
	if !ok {
		return errJSONType
	}
	var index, id, function []byte
	for m, more := it.Next(); more; m, more = it.Next() {
		switch {
		case m.KeyIs("index"):
			index = m.Value()
		case m.KeyIs("id"):
			id = m.Value()
		case m.KeyIs("function"):
			function = m.Value()
		}
	}
	n, ok, err := jsonInt(index)
	if err != nil {
		return err
	}
	t.index, t.hasIndex = int(n), ok
	if t.id, err = jsonStringOrNull(id); err != nil {
		return err
	}
	return parseFunction(function, &t.function)
}

func parseFunction(v []byte, f *functionIO) error {
	if jsonscan.IsNull(v) {
		return nil
	}
	it, ok := jsonscan.Object(v)
	if !ok {
		return errJSONType
	}
	var name, args []byte
	for m, more := it.Next(); more; m, more = it.Next() {
		switch {
		case m.KeyIs("name"):
			name = m.Value()
		case m.KeyIs("arguments"):
			args = m.Value()
		}
	}
	var err error
	if f.Name, err = jsonStringOrNull(name); err != nil {
		return err
	}
	f.Arguments, err = jsonStringOrNull(args)
	return err
}

// parseUsage reads a usage object: prompt_tokens already includes the
// cached tokens, completion_tokens the reasoning tokens.
func parseUsage(v []byte, u *ir.TokenUsage) error {
	it, ok := jsonscan.Object(v)
	if !ok {
		return errJSONType
	}
	var prompt, completion, promptDetails, completionDetails []byte
	for m, more := it.Next(); more; m, more = it.Next() {
		switch {
		case m.KeyIs("prompt_tokens"):
			prompt = m.Value()
		case m.KeyIs("completion_tokens"):
			completion = m.Value()
		case m.KeyIs("total_tokens"):
			if _, _, err := jsonInt(m.Value()); err != nil {
				return err
			}
		case m.KeyIs("prompt_tokens_details"):
			promptDetails = m.Value()
		case m.KeyIs("completion_tokens_details"):
			completionDetails = m.Value()
		}
	}
	var err error
	if u.Input, _, err = jsonInt(prompt); err != nil {
		return err
	}
	if u.Output, _, err = jsonInt(completion); err != nil {
		return err
	}
	if u.CachedInput, err = detailCount(promptDetails, "cached_tokens"); err != nil {
		return err
	}
	u.Reasoning, err = detailCount(completionDetails, "reasoning_tokens")
	return err
}

// detailCount reads one count from a usage details object (or null).
func detailCount(v []byte, key string) (int64, error) {
	if jsonscan.IsNull(v) {
		return 0, nil
	}
	it, ok := jsonscan.Object(v)
	if !ok {
		return 0, errJSONType
	}
	var count []byte
	for m, more := it.Next(); more; m, more = it.Next() {
		if m.KeyIs(key) {
			count = m.Value()
		}
	}
	n, _, err := jsonInt(count)
	return n, err
}

// parseFlexText reads a content value: a string, null, or an array of
// parts (objects or null) whose text parts are concatenated.
func parseFlexText(v []byte) (string, error) {
	switch {
	case jsonscan.IsNull(v):
		return "", nil
	case v[0] == '"':
		return jsonscan.String(v), nil
	case v[0] != '[':
		return "", errJSONType
	}
	els, _ := jsonscan.Array(v)
	var sb strings.Builder
	for e, more := els.Next(); more; e, more = els.Next() {
		el := e.Value()
		if jsonscan.IsNull(el) {
			continue
		}
		it, ok := jsonscan.Object(el)
		if !ok {
			return "", errJSONType
		}
		var typ, text []byte
		for m, more := it.Next(); more; m, more = it.Next() {
			switch {
			case m.KeyIs("type"):
				typ = m.Value()
			case m.KeyIs("text"):
				text = m.Value()
			}
		}
		t, err := jsonStringOrNull(typ)
		if err != nil {
			return "", err
		}
		s, err := jsonStringOrNull(text)
		if err != nil {
			return "", err
		}
		if t == "text" || t == "" {
			sb.WriteString(s)
		}
	}
	return sb.String(), nil
}

// looseString reads an optional extension field (reasoning text) when it
// is a string and ignores it in any other form, so that an unexpected
// variant from some server cannot fail a whole chunk.
func looseString(v []byte) (string, error) {
	if len(v) == 0 || v[0] != '"' {
		return "", nil
	}
	return jsonscan.String(v), nil
}

var errJSONType = errors.New("JSON value of the wrong type")

// jsonStringOrNull decodes a value that must be a string or null.
func jsonStringOrNull(v []byte) (string, error) {
	switch {
	case jsonscan.IsNull(v):
		return "", nil
	case v[0] == '"':
		return jsonscan.String(v), nil
	}
	return "", errJSONType
}

// jsonInt decodes a value that must be an integer literal that fits in an
// int64, or null (ok false), as encoding/json decodes into an int.
func jsonInt(v []byte) (n int64, ok bool, err error) {
	if jsonscan.IsNull(v) {
		return 0, false, nil
	}
	if n, ok = jsonscan.Int(v); !ok {
		return 0, false, errJSONType // a string, a fraction, an exponent, true…
	}
	return n, true, nil
}
