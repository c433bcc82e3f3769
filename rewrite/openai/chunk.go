package openai

import (
	"strings"

	"github.com/detour-proxy/detour/rewrite/ir"
)

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
	if err := validJSON(data); err != nil {
		return err
	}
	var id, model, choices, usage, failure []byte
	m, ok := objectMembers(data)
	if !ok {
		return errJSONType
	}
	for key, val, more := m.next(); more; key, val, more = m.next() {
		switch {
		case keyIs(key, "id"):
			id = val
		case keyIs(key, "model"):
			model = val
		case keyIs(key, "choices"):
			choices = val
		case keyIs(key, "usage"):
			usage = val
		case keyIs(key, "error"):
			failure = val
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
	case !isNull(id) && id[0] != '"', !isNull(model) && model[0] != '"':
		return errJSONType
	}
	c.failed = !isNull(failure)
	if !isNull(choices) {
		els, ok := arrayElements(choices)
		if !ok {
			return errJSONType
		}
		for v, more := els.next(); more; v, more = els.next() {
			if err := parseChoice(v, c.addChoice()); err != nil {
				return err
			}
		}
	}
	c.usage, c.hasUsage = ir.TokenUsage{}, !isNull(usage)
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
	if isNull(v) {
		return nil
	}
	m, ok := objectMembers(v)
	if !ok {
		return errJSONType
	}
	var index, delta, finish []byte
	for key, val, more := m.next(); more; key, val, more = m.next() {
		switch {
		case keyIs(key, "index"):
			index = val
		case keyIs(key, "delta"):
			delta = val
		case keyIs(key, "finish_reason"):
			finish = val
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
	if isNull(v) {
		return nil
	}
	m, ok := objectMembers(v)
	if !ok {
		return errJSONType
	}
	var content, reasoningContent, reasoning, refusal, tools, function []byte
	for key, val, more := m.next(); more; key, val, more = m.next() {
		switch {
		case keyIs(key, "content"):
			content = val
		case keyIs(key, "reasoning_content"):
			reasoningContent = val
		case keyIs(key, "reasoning"):
			reasoning = val
		case keyIs(key, "refusal"):
			refusal = val
		case keyIs(key, "tool_calls"):
			tools = val
		case keyIs(key, "function_call"):
			function = val
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
	if !isNull(function) {
		c.hasFunction = true
		if err := parseFunction(function, &c.function); err != nil {
			return err
		}
	}
	if isNull(tools) {
		return nil
	}
	els, ok := arrayElements(tools)
	if !ok {
		return errJSONType
	}
	for v, more := els.next(); more; v, more = els.next() {
		c.tools = append(c.tools, parsedToolDelta{})
		if err := parseToolDelta(v, &c.tools[len(c.tools)-1]); err != nil {
			return err
		}
	}
	return nil
}

func parseToolDelta(v []byte, t *parsedToolDelta) error {
	if isNull(v) {
		return nil
	}
	m, ok := objectMembers(v)
	if !ok {
		return errJSONType
	}
	var index, id, function []byte
	for key, val, more := m.next(); more; key, val, more = m.next() {
		switch {
		case keyIs(key, "index"):
			index = val
		case keyIs(key, "id"):
			id = val
		case keyIs(key, "function"):
			function = val
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
	if isNull(v) {
		return nil
	}
	m, ok := objectMembers(v)
	if !ok {
		return errJSONType
	}
	var name, args []byte
	for key, val, more := m.next(); more; key, val, more = m.next() {
		switch {
		case keyIs(key, "name"):
			name = val
		case keyIs(key, "arguments"):
			args = val
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
	m, ok := objectMembers(v)
	if !ok {
		return errJSONType
	}
	var prompt, completion, promptDetails, completionDetails []byte
	for key, val, more := m.next(); more; key, val, more = m.next() {
		switch {
		case keyIs(key, "prompt_tokens"):
			prompt = val
		case keyIs(key, "completion_tokens"):
			completion = val
		case keyIs(key, "total_tokens"):
			if _, _, err := jsonInt(val); err != nil {
				return err
			}
		case keyIs(key, "prompt_tokens_details"):
			promptDetails = val
		case keyIs(key, "completion_tokens_details"):
			completionDetails = val
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
	if isNull(v) {
		return 0, nil
	}
	m, ok := objectMembers(v)
	if !ok {
		return 0, errJSONType
	}
	var count []byte
	for k, val, more := m.next(); more; k, val, more = m.next() {
		if keyIs(k, key) {
			count = val
		}
	}
	n, _, err := jsonInt(count)
	return n, err
}

// parseFlexText reads a content value: a string, null, or an array of
// parts (objects or null) whose text parts are concatenated.
func parseFlexText(v []byte) (string, error) {
	switch {
	case isNull(v):
		return "", nil
	case v[0] == '"':
		return unquote(v)
	case v[0] != '[':
		return "", errJSONType
	}
	els, _ := arrayElements(v)
	var sb strings.Builder
	for el, more := els.next(); more; el, more = els.next() {
		if isNull(el) {
			continue
		}
		m, ok := objectMembers(el)
		if !ok {
			return "", errJSONType
		}
		var typ, text []byte
		for key, val, more := m.next(); more; key, val, more = m.next() {
			switch {
			case keyIs(key, "type"):
				typ = val
			case keyIs(key, "text"):
				text = val
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
	return unquote(v)
}
