package jsonscan

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

// The tests hold the scanner to encoding/json, its reference: same
// verdict on validity, same members, same decoded strings and integers,
// same escaped bytes.

// seeds are inputs for the table tests and the fuzz corpora.
var seeds = []string{
	``, ` `, `{}`, `[]`, ` { } `, `[ ]`, `null`, `true`, `false`, `0`, `-0`, `1.5e+10`, `"s"`,
	`{"a":1,"b":[true,false,null],"c":{"d":"e"}}`,
	`[1,"two",{"three":3},[4]]`,
	`{"mod\u0065l":"x","model":"y","model":"z"}`,
	`{"s":"quote \" backslash \\ slash \/ ctl \b\f\n\r\t \u0001 \u001f <>& \u003c"}`,
	`{"s":"line\u2028para\u2029 é \u00e9 😀 \ud83d\ude00"}`,
	`{"s":"lone \ud800 high, lone \udc00 low, \ud800x, \ud800\ud800, \udc00\ud800"}`,
	"{\"s\":\"bad \xff\xfe utf8 \xe2\x80\",\"\xc3\":1}",
	`{"n":[0,-1,9223372036854775807,-9223372036854775808,9223372036854775808,20000000000000000000,1.0,1e2,-]}`,
	`{"a":1,}`, `[1,]`, `{"a" 1}`, `{1:2}`, `{"a":1}x`, `[1]]`, `{"a":"\x"}`, `{"a":"\u12"}`,
	`{"a":tru}`, `{"a":01}`, `{"a":1.}`, `{"a":-}`, `{"a":1e}`, "{\"a\":\"x\ny\"}", `"unterminated`,
	`{"a":` + strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth) + `}`,
	`{"a":` + strings.Repeat("[", MaxDepth-1) + strings.Repeat("]", MaxDepth-1) + `}`,
}

func TestValid(t *testing.T) {
	for _, s := range seeds {
		checkValid(t, []byte(s))
	}
}

func FuzzValid(f *testing.F) {
	for _, s := range seeds {
		if len(s) < 1000 { // the deep nesting seeds would slow every mutation
			f.Add([]byte(s))
		}
	}
	f.Fuzz(checkValid)
}

// checkValid: Valid and a Scan walk give encoding/json's verdict; a walk
// over valid JSON yields the members encoding/json reads, with Scan and
// with Object/Array alike; a walk of Object/Array over anything ends
// without a panic.
func checkValid(t *testing.T, b []byte) {
	want := json.Valid(b)
	if got := Valid(b); (got == nil) != want {
		t.Fatalf("Valid(%q) = %v; json.Valid says %v", b, got, want)
	} else if got != nil {
		var se *SyntaxError
		if !errors.As(got, &se) || se.Offset < 0 || se.Offset > len(b) || se.Reason == "" {
			t.Fatalf("Valid(%q) = %v: want a *SyntaxError within the input", b, got)
		}
	}
	for _, walk := range []func([]byte) (Iter, bool){Object, Array} {
		it, _ := walk(b)
		for n := 0; ; n++ {
			if _, ok := it.Next(); !ok {
				break
			}
			if n > len(b) {
				t.Fatalf("a walk over %q does not end", b)
			}
		}
	}
	it, ok := Scan(b)
	if !ok {
		if c := firstByte(b); c == '{' || c == '[' {
			t.Fatalf("Scan(%q) refused a container", b)
		}
		return
	}
	scanned := members(&it)
	if err := it.End(); (err == nil) != want {
		t.Fatalf("Scan(%q) walk ends with %v; json.Valid says %v", b, err, want)
	}
	if !want {
		return
	}
	walk := Array
	if it.IsObject() {
		walk = Object
	}
	vit, ok := walk(b)
	if !ok {
		t.Fatalf("Object/Array(%q) refused it", b)
	}
	if trusted := members(&vit); !equalMembers(scanned, trusted) || vit.End() != nil {
		t.Fatalf("%q: Scan and Object/Array walks differ: %d and %d members", b, len(scanned), len(trusted))
	}
	if it.Count() != len(scanned) {
		t.Fatalf("%q: Count %d after %d members", b, it.Count(), len(scanned))
	}
	ref := referenceMembers(t, b)
	if len(ref) != len(scanned) {
		t.Fatalf("%q: %d members; encoding/json reads %d", b, len(scanned), len(ref))
	}
	for i, m := range scanned {
		if !bytes.Equal(m.value, ref[i].value) {
			t.Fatalf("%q: member %d value %q; encoding/json reads %q", b, i, m.value, ref[i].value)
		}
		if it.IsObject() {
			// KeyIs takes field names, which hold no U+FFFD: a key that
			// decodes to one is compared as it is written.
			if !m.m.KeyIs(ref[i].key) && !strings.ContainsRune(ref[i].key, utf8.RuneError) {
				t.Fatalf("%q: member %d key %q is not %q", b, i, m.m.Key(), ref[i].key)
			}
			if got := String([]byte(`"` + string(m.m.Key()) + `"`)); got != ref[i].key {
				t.Fatalf("%q: member %d key decodes to %q; encoding/json reads %q", b, i, got, ref[i].key)
			}
			if m.m.KeyIs(ref[i].key+"x") || m.m.KeyIs("x"+ref[i].key) {
				t.Fatalf("%q: member %d key %q matches another name", b, i, m.m.Key())
			}
		}
		start, end := m.m.ValueSpan()
		if !bytes.Equal(b[start:end], m.value) {
			t.Fatalf("%q: member %d span [%d:%d] is not its value", b, i, start, end)
		}
	}
}

type member struct {
	m     Member
	value []byte
}

func members(it *Iter) []member {
	var out []member
	for m, ok := it.Next(); ok; m, ok = it.Next() {
		out = append(out, member{m, m.Value()})
	}
	return out
}

func equalMembers(a, b []member) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i].value, b[i].value) || !bytes.Equal(a[i].m.Key(), b[i].m.Key()) {
			return false
		}
	}
	return true
}

type refMember struct {
	key   string
	value []byte
}

// referenceMembers reads the top-level members of the valid container b
// with encoding/json's Decoder.
func referenceMembers(t *testing.T, b []byte) []refMember {
	dec := json.NewDecoder(bytes.NewReader(b))
	open, err := dec.Token()
	if err != nil {
		t.Fatal(err)
	}
	var out []refMember
	for dec.More() {
		var m refMember
		if open == json.Delim('{') {
			k, err := dec.Token()
			if err != nil {
				t.Fatal(err)
			}
			m.key = k.(string)
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			t.Fatal(err)
		}
		m.value = raw
		out = append(out, m)
	}
	return out
}

func firstByte(b []byte) byte {
	if i := SkipSpace(b, 0); i < len(b) {
		return b[i]
	}
	return 0
}

func TestSyntaxErrors(t *testing.T) {
	for _, tt := range []struct {
		in     string
		offset int
		reason string
	}{
		{``, 0, "unexpected end of JSON"},
		{`{"a":1`, 6, "unexpected end of JSON"},
		{`{"a":1,}`, 7, `unexpected '}'`},
		{`[1,]`, 3, `unexpected ']'`},
		{`{"a":1} x`, 8, "data after the JSON value"},
		{`{"a":"\x"}`, 7, "invalid escape"},
		{`{"a":"\u12"}`, 10, `invalid \u escape`},
		{"{\"a\":\"x\ny\"}", 7, "control character in string"},
		{`{"n":01}`, 6, `unexpected '1'`},
		{`[` + strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth+1), MaxDepth, "JSON nested too deeply"},
	} {
		err := Valid([]byte(tt.in))
		var se *SyntaxError
		if !errors.As(err, &se) || se.Offset != tt.offset || se.Reason != tt.reason {
			t.Errorf("Valid(%.40q) = %v; want %q at offset %d", tt.in, err, tt.reason, tt.offset)
		}
	}
	it, _ := Scan([]byte(`{"a":1} x`))
	for _, ok := it.Next(); ok; _, ok = it.Next() {
	}
	if err := it.End(); err == nil || err.Offset != 8 || err.Reason != "data after the JSON object" {
		t.Errorf("End() = %v; want data after the JSON object at 8", err)
	}
}

func TestString(t *testing.T) {
	for _, s := range stringSeeds {
		checkString(t, []byte(s))
	}
}

var stringSeeds = []string{
	`""`, `"plain"`, `"\"\\\/\b\f\n\r\t"`, `"\u00e9\u00E9 é"`, `"\ud83d\ude00"`, `"\ud800"`, `"\udc00\ud800"`,
	`"\ud800\u0041"`, "\"\xff\xfe\"", "\"\xed\xa0\x80\"", `"` + strings.Repeat(`\n`, 200) + `"`,
	`"a" `, ` "a"`, `"a`, `"\"`, `"\x"`, `1`, `null`, `"a""b"`,
}

func FuzzString(f *testing.F) {
	for _, s := range stringSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(checkString)
}

// checkString: String decodes a valid JSON string as json.Unmarshal does;
// Unquote takes exactly one JSON string and nothing else.
func checkString(t *testing.T, q []byte) {
	isString := json.Valid(q) && len(q) > 0 && q[0] == '"' && q[len(q)-1] == '"'
	got, ok := Unquote(q)
	if ok != isString {
		t.Fatalf("Unquote(%q) ok = %v; want %v", q, ok, isString)
	}
	if !isString {
		return
	}
	var want string
	if err := json.Unmarshal(q, &want); err != nil {
		t.Fatal(err)
	}
	if got != want || String(q) != want {
		t.Fatalf("Unquote(%q) = %q, String %q; encoding/json reads %q", q, got, String(q), want)
	}
	if got := string(AppendUnquoted(nil, q[1:len(q)-1])); got != want {
		t.Fatalf("AppendUnquoted(%q) = %q; encoding/json reads %q", q, got, want)
	}
}

func TestAppendString(t *testing.T) {
	for _, s := range appendSeeds {
		checkAppendString(t, s)
	}
}

var appendSeeds = []string{
	"", "plain", "quote\" back\\ slash /", "ctl\x00\x01\b\f\x1f\x7f\t\r\n", "<html>&", "ünï € 😀",
	"\u2028\u2029", "bad\xff\xfeutf8", "\xed\xa0\x80", "\xef\xbf\xbd", "trunc\xe2\x80",
}

func FuzzAppendString(f *testing.F) {
	for _, s := range appendSeeds {
		f.Add(s)
	}
	f.Fuzz(checkAppendString)
}

// checkAppendString: AppendString writes json.Encoder's bytes (without
// HTML escaping), for a string and a []byte alike, and StringLen is their
// length.
func checkAppendString(t *testing.T, s string) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		t.Fatal(err)
	}
	want := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	if got := AppendString([]byte("x"), s); !bytes.Equal(got[1:], want) || got[0] != 'x' {
		t.Fatalf("AppendString(%q) = %s; encoding/json writes %s", s, got, want)
	}
	if got := AppendString(nil, []byte(s)); !bytes.Equal(got, want) {
		t.Fatalf("AppendString([]byte(%q)) = %s; encoding/json writes %s", s, got, want)
	}
	if n, m := StringLen(s), StringLen([]byte(s)); n != len(want) || m != len(want) {
		t.Fatalf("StringLen(%q) = %d, %d; want %d", s, n, m, len(want))
	}
	if bytes.ContainsAny(want, "\r\n") {
		t.Fatalf("AppendString(%q) = %s holds a line break", s, want)
	}
}

func TestInt(t *testing.T) {
	for _, s := range intSeeds {
		checkInt(t, []byte(s))
	}
}

var intSeeds = []string{
	`0`, `-0`, `7`, `-7`, `9223372036854775807`, `-9223372036854775808`, `9223372036854775808`,
	`-9223372036854775809`, `18446744073709551615`, `18446744073709551616`, `20000000000000000000`,
	`123456789012345678901234567890`, `1.0`, `1e2`, `"5"`, `true`, `null`, `[]`, `-`,
}

func FuzzInt(f *testing.F) {
	for _, s := range intSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(checkInt)
}

// checkInt: Int reads what json.Unmarshal puts in an int64 without an
// error (null aside, which json.Unmarshal leaves alone and Int calls not
// an integer).
func checkInt(t *testing.T, v []byte) {
	v = bytes.TrimSpace(v)
	if !json.Valid(v) {
		return
	}
	n, ok := Int(v)
	var want int64
	err := json.Unmarshal(v, &want)
	if string(v) == "null" {
		err = errors.New("null")
	}
	if ok != (err == nil) || n != want {
		t.Fatalf("Int(%s) = %d, %v; encoding/json reads %d, %v", v, n, ok, want, err)
	}
}

func TestIsNull(t *testing.T) {
	for v, want := range map[string]bool{``: true, `null`: true, `0`: false, `""`: false, `{}`: false, `false`: false} {
		if got := IsNull([]byte(v)); got != want {
			t.Errorf("IsNull(%q) = %v; want %v", v, got, want)
		}
	}
}

// TestAllocations pins what the package exists for: walking and matching
// keys costs nothing, a decoded string one allocation (the string).
func TestAllocations(t *testing.T) {
	doc := []byte(`{"id":"x","choices":[{"index":0,"delta":{"content":"Hi \u00e9\n"}}],"mod\u0065l":"m","n":12}`)
	dst := make([]byte, 0, 256)
	text := []byte("Hi é \u2028 \xff \"q\"\n")
	for name, tc := range map[string]struct {
		want float64
		f    func()
	}{
		"Scan walk": {0, func() {
			it, _ := Scan(doc)
			for m, ok := it.Next(); ok; m, ok = it.Next() {
				_ = m.KeyIs("model")
			}
			_ = it.End()
		}},
		"Object walk": {0, func() {
			it, _ := Object(doc)
			for m, ok := it.Next(); ok; m, ok = it.Next() {
				_ = m.KeyIs("model")
			}
		}},
		"Valid":                 {0, func() { _ = Valid(doc) }},
		"Int":                   {0, func() { _, _ = Int([]byte("12")) }},
		"String plain":          {1, func() { _ = String([]byte(`"plain text"`)) }},
		"String escaped":        {1, func() { _ = String([]byte(`"Hi \u00e9\n"`)) }},
		"AppendString string":   {0, func() { _ = AppendString(dst[:0], "Hi é \u2028 \xff \"q\"\n") }},
		"AppendString []byte":   {0, func() { _ = AppendString(dst[:0], text) }},
		"StringLen of a []byte": {0, func() { _ = StringLen(doc) }},
	} {
		if got := testing.AllocsPerRun(50, tc.f); got != tc.want {
			t.Errorf("%s: %v allocations; want %v", name, got, tc.want)
		}
	}
}

// TestReferenceMembers: the reference sees the whole container, or the
// comparison in checkValid would be vacuous.
func TestReferenceMembers(t *testing.T) {
	if got := referenceMembers(t, []byte(`{"a":1,"b":[2]}`)); len(got) != 2 || got[1].key != "b" || string(got[1].value) != `[2]` {
		t.Errorf("referenceMembers = %q", got)
	}
}
