package gemini

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/detour-proxy/detour/rewrite/ir"
)

func TestSanitizeSchema(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      string
		want    string
		dropped []string
	}{
		{"annotations and additionalProperties go quietly",
			`{"$schema":"x","$id":"y","type":"object","title":"T","properties":{"a":{"type":"string"}},"additionalProperties":false}`,
			`{"type":"OBJECT","title":"T","properties":{"a":{"type":"STRING"}}}`, nil},
		{"const string is an enum of one",
			`{"type":"object","properties":{"k":{"const":"fixed"}}}`,
			`{"type":"OBJECT","properties":{"k":{"enum":["fixed"],"type":"STRING"}}}`, nil},
		{"const number cannot be said",
			`{"type":"object","properties":{"k":{"type":"integer","const":3}}}`,
			`{"type":"OBJECT","properties":{"k":{"type":"INTEGER"}}}`, []string{"const (not a string)"}},
		{"enum of numbers cannot be said",
			`{"type":"integer","enum":[1,2]}`,
			`{"type":"INTEGER"}`, []string{"enum (not strings)"}},
		{"enum with null is nullable",
			`{"type":"string","enum":["a",null]}`,
			`{"type":"STRING","enum":["a"],"nullable":true}`, nil},
		{"type with null",
			`{"type":["string","null"],"description":"d"}`,
			`{"type":"STRING","description":"d","nullable":true}`, nil},
		{"several types",
			`{"type":["string","integer"]}`,
			`{"anyOf":[{"type":"STRING"},{"type":"INTEGER"}]}`, nil},
		{"anyOf with a null branch collapses",
			`{"anyOf":[{"type":"string","format":"date-time"},{"type":"null"}],"description":"when"}`,
			`{"description":"when","type":"STRING","format":"date-time","nullable":true}`, nil},
		{"oneOf is sent as anyOf",
			`{"oneOf":[{"type":"string"},{"type":"number"}]}`,
			`{"anyOf":[{"type":"STRING"},{"type":"NUMBER"}]}`, []string{"oneOf (sent as anyOf)"}},
		{"allOf merges",
			`{"allOf":[{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]},{"properties":{"b":{"type":"number"}},"required":["b"]}]}`,
			`{"type":"OBJECT","properties":{"a":{"type":"STRING"},"b":{"type":"NUMBER"}},"required":["a","b"]}`, nil},
		{"formats Gemini refuses",
			`{"type":"object","properties":{"u":{"type":"string","format":"uri"},"t":{"type":"string","format":"date-time"},"n":{"type":"integer","format":"int64"}}}`,
			`{"type":"OBJECT","properties":{"u":{"type":"STRING"},"t":{"type":"STRING","format":"date-time"},"n":{"type":"INTEGER","format":"int64"}}}`, []string{"format uri"}},
		{"array without items",
			`{"type":"array"}`,
			`{"type":"ARRAY","items":{"type":"STRING"}}`, []string{"items (array of anything, sent as strings)"}},
		{"tuple items",
			`{"type":"array","items":[{"type":"integer"},{"type":"string"}]}`,
			`{"type":"ARRAY","items":{"type":"INTEGER"}}`, []string{"items (tuple)"}},
		{"required only names properties",
			`{"type":"object","properties":{"a":{"type":"string"}},"required":["a","ghost","a"]}`,
			`{"type":"OBJECT","properties":{"a":{"type":"STRING"}},"required":["a"]}`, nil},
		{"empty properties removed",
			`{"type":"object","properties":{"o":{"type":"object","properties":{}}}}`,
			`{"type":"OBJECT","properties":{"o":{"type":"OBJECT"}}}`, nil},
		{"$ref inlined, siblings win",
			`{"type":"object","properties":{"u":{"$ref":"#/$defs/unit","description":"Unit to use"}},"$defs":{"unit":{"type":"string","enum":["C","F"],"description":"old"}}}`,
			`{"type":"OBJECT","properties":{"u":{"type":"STRING","description":"Unit to use","enum":["C","F"]}}}`, nil},
		{"definitions and escaped pointers",
			`{"type":"object","properties":{"x":{"$ref":"#/definitions/a~1b"}},"definitions":{"a/b":{"type":"boolean"}}}`,
			`{"type":"OBJECT","properties":{"x":{"type":"BOOLEAN"}}}`, nil},
		{"same $ref twice is not recursion",
			`{"type":"object","properties":{"a":{"$ref":"#/$defs/s"},"b":{"$ref":"#/$defs/s"}},"$defs":{"s":{"type":"string"}}}`,
			`{"type":"OBJECT","properties":{"a":{"type":"STRING"},"b":{"type":"STRING"}}}`, nil},
		{"unknown keywords are noted",
			`{"type":"array","items":{"type":"integer","multipleOf":2},"uniqueItems":true,"not":{"type":"null"}}`,
			`{"type":"ARRAY","items":{"type":"INTEGER"}}`, []string{"multipleOf", "not", "uniqueItems"}},
		{"examples become example",
			`{"type":"string","examples":["a","b"],"default":"a","pattern":"^a"}`,
			`{"type":"STRING","example":"a","default":"a","pattern":"^a"}`, nil},
		{"true schema",
			`{"type":"object","properties":{"any":true}}`,
			`{"type":"OBJECT","properties":{"any":{}}}`, nil},
		{"nothing to say", `{}`, ``, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, dropped, err := sanitizeSchema(json.RawMessage(tc.in), false)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
			if !reflect.DeepEqual(dropped, tc.dropped) {
				t.Errorf("dropped %q; want %q", dropped, tc.dropped)
			}
		})
	}
}

func TestSanitizeSchemaPropertyOrdering(t *testing.T) {
	got, _, err := sanitizeSchema(json.RawMessage(`{"type":"object","properties":{"z":{"type":"string"},"a":{"type":"object","properties":{"y":{"type":"string"},"b":{"type":"string"}}}}}`), true)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"type":"OBJECT","properties":{"z":{"type":"STRING"},"a":{"type":"OBJECT","properties":{"y":{"type":"STRING"},"b":{"type":"STRING"}},"propertyOrdering":["y","b"]}},"propertyOrdering":["z","a"]}`
	if string(got) != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

func TestSanitizeSchemaUnsupported(t *testing.T) {
	deep := strings.Repeat(`{"type":"array","items":`, maxSchemaDepth+2) + `{"type":"string"}` + strings.Repeat(`}`, maxSchemaDepth+2)
	// Each definition uses the next twice: 2^20 nodes once inlined.
	var fan strings.Builder
	fan.WriteString(`{"$ref":"#/$defs/d0","$defs":{`)
	for i := range 20 {
		fmt.Fprintf(&fan, `"d%d":{"type":"object","properties":{"a":{"$ref":"#/$defs/d%d"},"b":{"$ref":"#/$defs/d%d"}}},`, i, i+1, i+1)
	}
	fan.WriteString(`"d20":{"type":"string"}}}`)
	for name, in := range map[string]string{
		"recursive":     `{"type":"object","properties":{"child":{"$ref":"#"}}}`,
		"recursive def": `{"$ref":"#/$defs/node","$defs":{"node":{"type":"object","properties":{"next":{"$ref":"#/$defs/node"}}}}}`,
		"remote ref":    `{"$ref":"https://example.com/schema.json"}`,
		"missing ref":   `{"$ref":"#/$defs/nope"}`,
		"too deep":      deep,
		"fan-out":       fan.String(),
		"not JSON":      `{"type":`,
	} {
		_, _, err := sanitizeSchema(json.RawMessage(in), false)
		var ue *ir.UnsupportedError
		if !errors.As(err, &ue) {
			t.Errorf("%s: err %v; want *ir.UnsupportedError", name, err)
		}
	}
}

// TestEncodeRequestRecursiveSchema: a tool schema Gemini cannot say skips
// the upstream rather than send a different tool.
func TestEncodeRequestRecursiveSchema(t *testing.T) {
	r := &ir.Request{Tools: []ir.Tool{{Name: "tree", Parameters: json.RawMessage(`{"type":"object","properties":{"kids":{"type":"array","items":{"$ref":"#"}}}}`)}}}
	_, err := EncodeRequest(r, ir.EncodeOptions{})
	var ue *ir.UnsupportedError
	if !errors.As(err, &ue) || !strings.Contains(ue.What, "recursive") {
		t.Errorf("err %v; want *ir.UnsupportedError about recursion", err)
	}
}

func TestJSONSchemaFromGemini(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"type":"OBJECT","properties":{"b":{"type":"STRING"},"a":{"type":"INTEGER","nullable":true}},"propertyOrdering":["a","b"],"required":["a"]}`,
			`{"type":"object","properties":{"a":{"type":["integer","null"]},"b":{"type":"string"}},"required":["a"]}`},
		{`{"type":"STRING","format":"enum","enum":["x"]}`, `{"type":"string","enum":["x"]}`},
		{`{"any_of":[{"type":"STRING"}],"nullable":true}`, `{"anyOf":[{"type":"string"},{"type":"null"}]}`},
		{`{"type":"ARRAY","items":{"type":"NUMBER","format":"float"},"max_items":3}`, `{"type":"array","items":{"type":"number","format":"float"},"maxItems":3}`},
		{`{"type":"TYPE_UNSPECIFIED","description":"d"}`, `{"description":"d"}`},
		{`not json`, `not json`},
	} {
		if got := string(jsonSchemaFromGemini(json.RawMessage(tc.in))); got != tc.want {
			t.Errorf("%s\n got  %s\n want %s", tc.in, got, tc.want)
		}
	}
}

func TestAppendString(t *testing.T) {
	for _, s := range []string{"", "plain", "quote\" back\\ slash", "ctl\x00\x01\x1f\t\r\n", "<html>&", "ünï €", "\u2028\u2029", "bad\xffutf8", "\xed\xa0\x80"} {
		got := appendString(nil, s)
		if strings.ContainsAny(string(got), "\r\n") {
			t.Errorf("%q → %s has a raw line break", s, got)
		}
		var back string
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatalf("%q → %s is not a JSON string: %v", s, got, err)
		}
		want, _ := json.Marshal(s) // encoding/json's own view of the text
		var wantBack string
		_ = json.Unmarshal(want, &wantBack)
		if back != wantBack {
			t.Errorf("%q → %s reads back as %q; want %q", s, got, back, wantBack)
		}
	}
}
