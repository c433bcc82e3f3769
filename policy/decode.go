package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Duration is a Go duration string ("250ms", "10m"). It is kept as text by
// the decoder and parsed by Compile, so that a bad value is reported with
// its field path and line:column like every other validation error.
type Duration string

// Parse returns the duration; "" is zero.
func (d Duration) Parse() (time.Duration, error) {
	if d == "" {
		return 0, nil
	}
	v, err := time.ParseDuration(string(d))
	if err != nil {
		return 0, fmt.Errorf("invalid duration %q (use Go duration syntax such as \"250ms\", \"30s\", \"10m\")", string(d))
	}
	if v < 0 {
		return 0, fmt.Errorf("duration %q must not be negative", string(d))
	}
	return v, nil
}

// OrderedStrings is a JSON object of string values whose key order is kept:
// model mappings are tried in the order the user wrote them.
type OrderedStrings []KeyValue

// KeyValue is one entry of an OrderedStrings.
type KeyValue struct{ Key, Value string }

// UnmarshalJSON keeps the keys in document order.
func (o *OrderedStrings) UnmarshalJSON(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if tok == nil { // null: no mapping
		*o = nil
		return nil
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return errors.New("expected an object of strings")
	}
	var out OrderedStrings
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return err
		}
		var v string
		if err := dec.Decode(&v); err != nil {
			return fmt.Errorf("value of %q must be a string", kt)
		}
		out = append(out, KeyValue{Key: kt.(string), Value: v})
	}
	*o = out
	return nil
}

// Error is one problem found in a policy file, located by line and column
// (1-based; 0 when unknown) and by field path such as
// "upstreams.anthropic.timeouts.connect" or "routes[1].chain[0]".
type Error struct {
	File  string
	Line  int
	Col   int
	Field string
	Msg   string
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d:%d", e.Line, e.Col)
	}
	b.WriteString(": ")
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Errors is every problem found in one policy file, in file order.
type Errors []*Error

func (es Errors) Error() string {
	parts := make([]string, len(es))
	for i, e := range es {
		parts[i] = e.Error()
	}
	return strings.Join(parts, "\n")
}

// source is a policy file's bytes plus the position of every field, so that
// errors found after decoding can still point at a line and column.
type source struct {
	name string
	data []byte
	// pos maps a field path to the byte offset of its key (for object
	// members) or its value (for array elements and the root).
	pos  map[string]int64
	errs Errors
}

// errorf records an error at field path, locating it by the path or, when
// the path was never seen in the file (a missing required field), by its
// closest ancestor that was.
func (s *source) errorf(path, format string, args ...any) {
	off := int64(-1)
	for p := path; ; {
		if o, ok := s.pos[p]; ok {
			off = o
			break
		}
		i := strings.LastIndexAny(p, ".[")
		if i < 0 {
			if o, ok := s.pos[""]; ok {
				off = o
			}
			break
		}
		p = p[:i]
	}
	s.errorAt(off, path, fmt.Sprintf(format, args...))
}

func (s *source) errorAt(off int64, path, msg string) {
	e := &Error{File: s.name, Field: path, Msg: msg}
	if off >= 0 {
		e.Line, e.Col = lineCol(s.data, off)
	}
	s.errs = append(s.errs, e)
}

func lineCol(data []byte, off int64) (line, col int) {
	if off > int64(len(data)) {
		off = int64(len(data))
	}
	before := data[:off]
	line = bytes.Count(before, []byte{'\n'}) + 1
	// Columns count characters, as editors do, not bytes: policies hold
	// non-ASCII patterns (the classifier's Chinese word lists).
	col = utf8.RuneCount(before[bytes.LastIndexByte(before, '\n')+1:]) + 1
	return line, col
}

// Decode parses a policy file strictly: unknown fields, duplicate keys,
// wrong JSON types and trailing data are errors. name is used in messages.
// The returned error is an Errors listing every problem found; when the
// problems still let the file be decoded, the File is returned too, so that
// the caller can go on validating and report everything in one pass.
func Decode(name string, data []byte) (*File, *source, error) {
	s := &source{name: name, data: data, pos: map[string]int64{}}
	w := walker{s: s, dec: json.NewDecoder(bytes.NewReader(data))}
	w.dec.UseNumber()
	if err := w.value(reflect.TypeOf(File{}), ""); err != nil {
		s.errorAt(w.offsetOf(err), "", syntaxMessage(err))
		return nil, s, s.errs
	}
	if _, err := w.dec.Token(); err != io.EOF {
		s.errorAt(w.dec.InputOffset(), "", "unexpected data after the top-level object")
		return nil, s, s.errs
	}
	var f File
	dec := json.NewDecoder(bytes.NewReader(data))
	if len(s.errs) > 0 {
		// Unknown fields, duplicate keys or wrong types were found. Decode
		// what can be decoded anyway, so that validation can report its
		// problems too: `detour policy check` lists every problem at once.
		if err := dec.Decode(&f); err != nil {
			return nil, s, s.errs
		}
		return &f, s, s.errs
	}
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		// The walker has already checked fields and types, so this is a
		// value the walker cannot judge (e.g. a number out of range).
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			s.errorAt(te.Offset, te.Field, fmt.Sprintf("expected %s, got %s", te.Type, te.Value))
		} else {
			s.errorAt(-1, "", err.Error())
		}
		return nil, s, s.errs
	}
	return &f, s, nil
}

func syntaxMessage(err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return "invalid JSON: " + strings.TrimPrefix(se.Error(), "json: ")
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return "invalid JSON: unexpected end of file"
	}
	return "invalid JSON: " + err.Error()
}

// walker reads the file token by token against the Go type it will be
// decoded into. encoding/json reports unknown fields without their position
// and stops at the first; the walker reports all of them with line:column.
type walker struct {
	s   *source
	dec *json.Decoder
}

type syntaxAt struct {
	off int64
	err error
}

func (e *syntaxAt) Error() string { return e.err.Error() }
func (e *syntaxAt) Unwrap() error { return e.err }

func (w *walker) offsetOf(err error) int64 {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return se.Offset
	}
	var sa *syntaxAt
	if errors.As(err, &sa) {
		return sa.off
	}
	return w.dec.InputOffset()
}

// next returns the next token and the offset where it starts.
func (w *walker) next() (json.Token, int64, error) {
	off := w.skipSpace(w.dec.InputOffset())
	tok, err := w.dec.Token()
	if err != nil {
		return nil, off, &syntaxAt{off: off, err: err}
	}
	return tok, off, nil
}

func (w *walker) skipSpace(off int64) int64 {
	d := w.s.data
	for off < int64(len(d)) {
		switch d[off] {
		case ' ', '\t', '\n', '\r', ',', ':':
			off++
		default:
			return off
		}
	}
	return off
}

var (
	orderedStringsType = reflect.TypeOf(OrderedStrings{})
	durationType       = reflect.TypeOf(Duration(""))
)

// value consumes one JSON value that will be decoded into t. Type problems
// are recorded and the value skipped; only syntax errors are returned.
func (w *walker) value(t reflect.Type, path string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	tok, off, err := w.next()
	if err != nil {
		return err
	}
	if _, seen := w.s.pos[path]; !seen {
		w.s.pos[path] = off
	}
	if tok == nil { // JSON null: leaves the Go zero value, i.e. the default
		return nil
	}
	switch {
	case t == orderedStringsType:
		return w.object(tok, off, path, "an object of model patterns to model names", func(key string, _ int64) error {
			return w.value(reflect.TypeOf(""), joinKey(path, key))
		})
	case t == durationType:
		if _, ok := tok.(string); !ok {
			w.s.errorAt(off, path, fmt.Sprintf("expected a duration string such as \"30s\", got %s", describe(tok)))
			return w.skip(tok)
		}
		return nil
	}
	switch t.Kind() {
	case reflect.Struct:
		fields := jsonFields(t)
		return w.object(tok, off, path, "an object", func(key string, keyOff int64) error {
			ft, ok := fields[key]
			if !ok {
				w.s.errorAt(keyOff, joinKey(path, key), fmt.Sprintf("unknown field %q (known fields: %s)", key, knownList(fields)))
				return w.skipValue()
			}
			return w.value(ft, joinKey(path, key))
		})
	case reflect.Map:
		return w.object(tok, off, path, "an object", func(key string, _ int64) error {
			return w.value(t.Elem(), joinKey(path, key))
		})
	case reflect.Slice:
		d, ok := tok.(json.Delim)
		if !ok || d != '[' {
			w.s.errorAt(off, path, fmt.Sprintf("expected an array, got %s", describe(tok)))
			return w.skip(tok)
		}
		for i := 0; w.dec.More(); i++ {
			if err := w.value(t.Elem(), path+"["+strconv.Itoa(i)+"]"); err != nil {
				return err
			}
		}
		_, _, err := w.next()
		return err
	case reflect.String:
		if _, ok := tok.(string); !ok {
			w.s.errorAt(off, path, fmt.Sprintf("expected a string, got %s", describe(tok)))
			return w.skip(tok)
		}
	case reflect.Bool:
		if _, ok := tok.(bool); !ok {
			w.s.errorAt(off, path, fmt.Sprintf("expected true or false, got %s", describe(tok)))
			return w.skip(tok)
		}
	case reflect.Int, reflect.Int64, reflect.Float64:
		n, ok := tok.(json.Number)
		if !ok {
			w.s.errorAt(off, path, fmt.Sprintf("expected a number, got %s", describe(tok)))
			return w.skip(tok)
		}
		if t.Kind() != reflect.Float64 {
			if _, err := n.Int64(); err != nil {
				w.s.errorAt(off, path, fmt.Sprintf("expected a whole number, got %s", n))
			}
		}
	}
	return nil
}

// object walks the members of an object, reporting duplicate keys.
func (w *walker) object(tok json.Token, off int64, path, want string, member func(key string, keyOff int64) error) error {
	d, ok := tok.(json.Delim)
	if !ok || d != '{' {
		w.s.errorAt(off, path, fmt.Sprintf("expected %s, got %s", want, describe(tok)))
		return w.skip(tok)
	}
	seen := map[string]bool{}
	for w.dec.More() {
		kt, koff, err := w.next()
		if err != nil {
			return err
		}
		key := kt.(string)
		kp := joinKey(path, key)
		if seen[key] {
			w.s.errorAt(koff, kp, "duplicate key (JSON would silently keep only the last one)")
		}
		seen[key] = true
		if _, dup := w.s.pos[kp]; !dup {
			w.s.pos[kp] = koff
		}
		if err := member(key, koff); err != nil {
			return err
		}
	}
	_, _, err := w.next()
	return err
}

// skip consumes the rest of a value whose first token was tok.
func (w *walker) skip(tok json.Token) error {
	d, ok := tok.(json.Delim)
	if !ok || (d != '{' && d != '[') {
		return nil
	}
	for depth := 1; depth > 0; {
		t, _, err := w.next()
		if err != nil {
			return err
		}
		if d, ok := t.(json.Delim); ok {
			switch d {
			case '{', '[':
				depth++
			default:
				depth--
			}
		}
	}
	return nil
}

func (w *walker) skipValue() error {
	tok, _, err := w.next()
	if err != nil {
		return err
	}
	return w.skip(tok)
}

func joinKey(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func describe(tok json.Token) string {
	switch v := tok.(type) {
	case json.Delim:
		if v == '{' {
			return "an object"
		}
		return "an array"
	case string:
		return strconv.Quote(v)
	case bool:
		return strconv.FormatBool(v)
	case json.Number:
		return v.String()
	case nil:
		return "null"
	}
	return fmt.Sprint(tok)
}

// jsonFields maps a struct's JSON names to field types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	m := map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		m[name] = f.Type
	}
	return m
}

func knownList(fields map[string]reflect.Type) string {
	names := make([]string, 0, len(fields))
	for k := range fields {
		names = append(names, k)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}
