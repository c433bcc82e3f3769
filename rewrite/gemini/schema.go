package gemini

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"

	"github.com/detour-proxy/detour/rewrite/ir"
)

// Gemini's function parameters and responseSchema take an OpenAPI 3.0
// subset (genai.Schema), not JSON Schema: unknown keywords such as $schema,
// additionalProperties or const are a 400 "Unknown name … Cannot find
// field" (docs/vendors.md#gemini-schema-subset), and so are arrays without items, OBJECT
// parameters with empty properties and formats other than a handful.
//
// detour sends `parameters` / `responseSchema` with the schema sanitised
// into that subset rather than `parametersJsonSchema` /
// `responseJsonSchema`, which take JSON Schema as is: the subset is
// accepted by every Gemini model and by Vertex AI, while the JSON Schema
// fields are newer and not taken by every model or Gemini-shaped server.
// What the subset cannot say (additionalProperties, not, const on numbers)
// only loosens what the model is told; a recursive $ref, which it cannot
// say at all, is an *ir.UnsupportedError so that the chain skips the
// upstream rather than send a different schema.

// Limits that keep a hostile schema from costing more than a real one.
const (
	// maxSchemaDepth is the deepest nesting sanitizeSchema follows.
	maxSchemaDepth = 64
	// maxSchemaNodes bounds the schemas sanitizeSchema builds, so that
	// $refs that fan out (each definition using the next one twice) cannot
	// expand exponentially.
	maxSchemaNodes = 10000
)

// geminiKeywords are the schema keywords genai.Schema has, which pass
// through unchanged (apart from recursion into sub-schemas).
var geminiKeywords = map[string]bool{
	"description": true, "title": true, "pattern": true, "nullable": true,
	"minimum": true, "maximum": true, "minLength": true, "maxLength": true,
	"minItems": true, "maxItems": true, "minProperties": true, "maxProperties": true,
	"default": true, "example": true, "propertyOrdering": true,
}

// quietlyDropped are JSON Schema keywords that Gemini cannot take and whose
// loss is not worth a note on every request: annotations, the definitions
// that $refs are inlined from, and additionalProperties, which OpenAI strict
// schemas carry everywhere and Gemini does not need to stay on-schema.
var quietlyDropped = map[string]bool{
	"$schema": true, "$id": true, "$comment": true, "$anchor": true,
	"$defs": true, "definitions": true, "additionalProperties": true,
	"unevaluatedProperties": true, "readOnly": true, "writeOnly": true,
	"deprecated": true, "strict": true, "examples": true,
}

// geminiFormats are the formats Gemini accepts per type ("only 'enum' and
// 'date-time' are supported for STRING type").
var geminiFormats = map[string][]string{
	"STRING":  {"enum", "date-time"},
	"INTEGER": {"int32", "int64"},
	"NUMBER":  {"float", "double"},
}

// sanitizer turns one JSON Schema into Gemini's subset.
type sanitizer struct {
	root      any
	expanding map[string]bool // $refs being inlined: one seen again is recursion
	nodes     int
	dropped   map[string]bool // keywords removed with a loss of meaning
	// ordering adds propertyOrdering to objects, so that Gemini generates
	// JSON output in the app's property order instead of alphabetically.
	ordering bool
}

// sanitizeSchema returns raw, a JSON Schema, in Gemini's schema subset, and
// the sorted keywords it had to remove with a loss of meaning (for a note).
// The result is nil when the schema says nothing (no properties at all),
// which Gemini wants as no schema. Errors are *ir.UnsupportedError.
func sanitizeSchema(raw json.RawMessage, ordering bool) ([]byte, []string, error) {
	if isNull(raw) {
		return nil, nil, nil
	}
	root, err := parseOrdered(raw)
	if err != nil {
		return nil, nil, &ir.UnsupportedError{What: "schema that is not valid JSON"}
	}
	s := &sanitizer{root: root, expanding: map[string]bool{}, dropped: map[string]bool{}, ordering: ordering}
	out, err := s.node(root, 0)
	if err != nil {
		return nil, nil, err
	}
	var dropped []string
	for k := range s.dropped {
		dropped = append(dropped, k)
	}
	slices.Sort(dropped)
	if len(out.keys) == 0 {
		return nil, dropped, nil
	}
	return appendOrdered(nil, out), dropped, nil
}

// node sanitises one schema.
func (s *sanitizer) node(v any, depth int) (*object, error) {
	if depth > maxSchemaDepth {
		return nil, &ir.UnsupportedError{What: "schema nested more than " + strconv.Itoa(maxSchemaDepth) + " deep"}
	}
	if s.nodes++; s.nodes > maxSchemaNodes {
		return nil, &ir.UnsupportedError{What: "schema too large once its $refs are inlined"}
	}
	in, ok := v.(*object)
	if !ok {
		// true (anything) or false or garbage: Gemini has no way to say
		// either, so the property is left unconstrained.
		if b, isBool := v.(bool); !isBool || !b {
			s.dropped["non-object schema"] = true
		}
		return &object{}, nil
	}
	if ref, ok := in.get("$ref"); ok {
		return s.ref(in, ref, depth)
	}

	out := &object{}
	var (
		anyOf    []any
		nullable bool
		enum     any
		hasEnum  bool
		constV   any
		hasConst bool
		format   string
		required []any
	)
	for i, k := range in.keys {
		val := in.vals[i]
		switch k {
		case "type":
			switch t := val.(type) {
			case string:
				if t == "null" {
					nullable = true
				} else {
					out.set("type", strings.ToUpper(t))
				}
			case []any:
				var types []string
				for _, e := range t {
					if es, ok := e.(string); ok {
						if es == "null" {
							nullable = true
						} else {
							types = append(types, strings.ToUpper(es))
						}
					}
				}
				switch len(types) {
				case 0:
				case 1:
					out.set("type", types[0])
				default:
					// ["string","number"]: Gemini's Type is one value.
					for _, t := range types {
						anyOf = append(anyOf, &object{keys: []string{"type"}, vals: []any{t}})
					}
				}
			}
		case "properties":
			props, ok := val.(*object)
			if !ok {
				continue
			}
			outProps := &object{}
			for j, name := range props.keys {
				p, err := s.node(props.vals[j], depth+1)
				if err != nil {
					return nil, err
				}
				outProps.set(name, p)
			}
			if len(outProps.keys) > 0 {
				// Empty properties on an OBJECT are a 400 ("should be
				// non-empty for OBJECT type").
				out.set("properties", outProps)
			}
		case "items":
			if tuple, ok := val.([]any); ok {
				// Draft-7 tuple form: Gemini has one item schema.
				s.dropped["items (tuple)"] = true
				if len(tuple) == 0 {
					continue
				}
				val = tuple[0]
			}
			it, err := s.node(val, depth+1)
			if err != nil {
				return nil, err
			}
			out.set("items", it)
		case "anyOf", "oneOf", "allOf":
			list, ok := val.([]any)
			if !ok {
				continue
			}
			var subs []*object
			for _, e := range list {
				if isNullSchema(e) {
					nullable = true
					continue
				}
				sub, err := s.node(e, depth+1)
				if err != nil {
					return nil, err
				}
				subs = append(subs, sub)
			}
			if k == "allOf" {
				// All must hold: merge them into this schema, which is
				// exact for the common case of one member or of objects
				// that add properties.
				for _, sub := range subs {
					mergeSchema(out, sub)
				}
				continue
			}
			if k == "oneOf" {
				// oneOf's exclusivity cannot be said; anyOf is close.
				s.dropped["oneOf (sent as anyOf)"] = true
			}
			for _, sub := range subs {
				anyOf = append(anyOf, sub)
			}
		case "enum":
			enum, hasEnum = val, true
		case "const":
			constV, hasConst = val, true
		case "format":
			format, _ = val.(string)
		case "required":
			required, _ = val.([]any)
		default:
			switch {
			case geminiKeywords[k]:
				out.set(k, val)
			case k == "examples":
				if ex, ok := val.([]any); ok && len(ex) > 0 {
					if _, has := in.get("example"); !has {
						out.set("example", ex[0])
					}
				}
			case quietlyDropped[k]:
			default:
				s.dropped[k] = true
			}
		}
	}

	// Exactly one non-null alternative is that alternative.
	switch len(anyOf) {
	case 0:
	case 1:
		mergeSchema(out, anyOf[0].(*object))
	default:
		out.set("anyOf", anyOf)
	}

	typ, _ := out.get("type")
	if hasConst {
		if c, ok := constV.(string); ok {
			enum, hasEnum = []any{c}, true
		} else if constV == nil {
			nullable = true
		} else {
			s.dropped["const (not a string)"] = true
		}
	}
	if hasEnum {
		if vals, ok := stringEnum(enum, &nullable); ok {
			out.set("enum", vals)
			if typ == nil {
				typ = "STRING"
				out.set("type", typ)
			}
		} else {
			// genai.Schema.Enum is []string: an enum of numbers cannot be
			// said.
			s.dropped["enum (not strings)"] = true
		}
	}
	if format != "" {
		t, _ := typ.(string)
		if slices.Contains(geminiFormats[t], format) {
			out.set("format", format)
		} else {
			s.dropped["format "+format] = true
		}
	}
	if nullable {
		out.set("nullable", true)
	}
	props, _ := out.get("properties")
	if len(required) > 0 {
		// Every required name must be a property.
		var req []any
		if p, ok := props.(*object); ok {
			for _, r := range required {
				if name, ok := r.(string); ok && !slices.Contains(req, any(name)) {
					if _, defined := p.get(name); defined {
						req = append(req, name)
					}
				}
			}
		}
		if len(req) > 0 {
			out.set("required", req)
		}
	}
	if typ == "ARRAY" {
		if _, ok := out.get("items"); !ok {
			// "items: missing field": an array of anything is best said as
			// an array of strings, which every value can be written as.
			s.dropped["items (array of anything, sent as strings)"] = true
			out.set("items", &object{keys: []string{"type"}, vals: []any{"STRING"}})
		}
	}
	if p, ok := props.(*object); ok && s.ordering && len(p.keys) > 1 {
		if _, has := out.get("propertyOrdering"); !has {
			order := make([]any, len(p.keys))
			for i, k := range p.keys {
				order[i] = k
			}
			out.set("propertyOrdering", order)
		}
	}
	return out, nil
}

// ref inlines the local $ref of in, with in's other keywords on top.
func (s *sanitizer) ref(in *object, refV any, depth int) (*object, error) {
	ref, _ := refV.(string)
	if s.expanding[ref] {
		return nil, &ir.UnsupportedError{What: "recursive schema ($ref " + ref + ")"}
	}
	target, ok := resolvePointer(s.root, ref)
	if !ok {
		return nil, &ir.UnsupportedError{What: "schema $ref " + ref + " that is not a local definition"}
	}
	s.expanding[ref] = true
	base, err := s.node(target, depth+1)
	delete(s.expanding, ref)
	if err != nil {
		return nil, err
	}
	rest := &object{}
	for i, k := range in.keys {
		if k != "$ref" {
			rest.set(k, in.vals[i])
		}
	}
	if len(rest.keys) == 0 {
		return base, nil
	}
	over, err := s.node(rest, depth+1)
	if err != nil {
		return nil, err
	}
	// Siblings of $ref (a description, mostly) win over the definition's.
	for i, k := range over.keys {
		base.set(k, over.vals[i])
	}
	return base, nil
}

// resolvePointer follows a local JSON Pointer reference ("#/$defs/Name").
func resolvePointer(root any, ref string) (any, bool) {
	if !strings.HasPrefix(ref, "#") {
		return nil, false
	}
	cur := root
	path := ref[1:]
	if path == "" {
		return cur, true
	}
	if path[0] != '/' {
		return nil, false
	}
	for _, tok := range strings.Split(path[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch c := cur.(type) {
		case *object:
			v, ok := c.get(tok)
			if !ok {
				return nil, false
			}
			cur = v
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(c) {
				return nil, false
			}
			cur = c[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

// isNullSchema reports whether v is {"type":"null"}.
func isNullSchema(v any) bool {
	o, ok := v.(*object)
	if !ok || len(o.keys) != 1 {
		return false
	}
	t, _ := o.get("type")
	return t == "null"
}

// mergeSchema adds src's keywords to dst: properties and required are
// united, other keywords already in dst stay.
func mergeSchema(dst, src *object) {
	for i, k := range src.keys {
		v := src.vals[i]
		switch k {
		case "properties":
			sp, _ := v.(*object)
			dp, ok := dst.get("properties")
			if d, isObj := dp.(*object); ok && isObj && sp != nil {
				for j, name := range sp.keys {
					if _, has := d.get(name); !has {
						d.set(name, sp.vals[j])
					}
				}
				continue
			}
		case "required":
			sr, _ := v.([]any)
			dr, ok := dst.get("required")
			if d, isArr := dr.([]any); ok && isArr {
				for _, r := range sr {
					if !slices.Contains(d, r) {
						d = append(d, r)
					}
				}
				dst.set("required", d)
				continue
			}
		}
		if _, has := dst.get(k); !has {
			dst.set(k, v)
		}
	}
}

// stringEnum returns the enum's values when all are strings; a null value
// makes the schema nullable instead.
func stringEnum(v any, nullable *bool) ([]any, bool) {
	list, ok := v.([]any)
	if !ok || len(list) == 0 {
		return nil, false
	}
	out := make([]any, 0, len(list))
	for _, e := range list {
		switch t := e.(type) {
		case string:
			out = append(out, t)
		case nil:
			*nullable = true
		default:
			return nil, false
		}
	}
	return out, len(out) > 0
}

// snakeSchemaKeys are genai.Schema's multi-word fields under their
// snake_case names, which the REST API also accepts.
var snakeSchemaKeys = map[string]string{
	"any_of": "anyOf", "property_ordering": "propertyOrdering",
	"max_items": "maxItems", "min_items": "minItems",
	"max_length": "maxLength", "min_length": "minLength",
	"max_properties": "maxProperties", "min_properties": "minProperties",
}

// jsonSchemaFromGemini turns a Gemini (OpenAPI subset) schema, as an app
// sends it in parameters or responseSchema, into the JSON Schema the other
// vendors take: go-genai sends types in upper case ("OBJECT"), which JSON
// Schema does not know, and nullable and propertyOrdering have JSON Schema
// spellings. A schema that is not valid JSON is returned as it is.
func jsonSchemaFromGemini(raw json.RawMessage) json.RawMessage {
	if isNull(raw) {
		return nil
	}
	root, err := parseOrdered(raw)
	if err != nil {
		return raw
	}
	return appendOrdered(nil, toJSONSchema(root, 0))
}

// toJSONSchema converts one Gemini schema node.
func toJSONSchema(v any, depth int) any {
	in, ok := v.(*object)
	if !ok || depth > maxSchemaDepth {
		return v
	}
	out := &object{}
	var nullable bool
	var order []any
	for i, k := range in.keys {
		val := in.vals[i]
		if camel, ok := snakeSchemaKeys[k]; ok {
			k = camel
		}
		switch k {
		case "type":
			t, _ := val.(string)
			if t == "" || strings.EqualFold(t, "TYPE_UNSPECIFIED") {
				continue
			}
			out.set("type", strings.ToLower(t))
		case "nullable":
			nullable, _ = val.(bool)
		case "propertyOrdering":
			order, _ = val.([]any)
		case "format":
			// "enum" is a Gemini format for string enums, not JSON Schema's.
			if val != "enum" {
				out.set(k, val)
			}
		case "properties":
			props, ok := val.(*object)
			if !ok {
				continue
			}
			outProps := &object{}
			for j, name := range props.keys {
				outProps.set(name, toJSONSchema(props.vals[j], depth+1))
			}
			out.set(k, outProps)
		case "items":
			out.set(k, toJSONSchema(val, depth+1))
		case "anyOf":
			list, _ := val.([]any)
			subs := make([]any, 0, len(list))
			for _, e := range list {
				subs = append(subs, toJSONSchema(e, depth+1))
			}
			out.set(k, subs)
		default:
			out.set(k, val)
		}
	}
	if p, ok := out.get("properties"); ok && len(order) > 0 {
		reorder(p.(*object), order)
	}
	if nullable {
		switch t := mustGet(out, "type").(type) {
		case string:
			out.set("type", []any{t, "null"})
		default:
			if list, ok := mustGet(out, "anyOf").([]any); ok {
				out.set("anyOf", append(list, &object{keys: []string{"type"}, vals: []any{"null"}}))
			}
		}
	}
	return out
}

// reorder puts o's keys named in order first, in that order.
func reorder(o *object, order []any) {
	n := &object{}
	for _, k := range order {
		if name, ok := k.(string); ok {
			if v, has := o.get(name); has {
				n.set(name, v)
			}
		}
	}
	for i, k := range o.keys {
		if _, has := n.get(k); !has {
			n.set(k, o.vals[i])
		}
	}
	*o = *n
}

// mustGet returns o's value for key, or nil.
func mustGet(o *object, key string) any {
	v, _ := o.get(key)
	return v
}
