package policy

import (
	"os"
	"reflect"
	"strings"
	"testing"
)

// fieldPaths lists the documented form of every leaf field of the policy
// file: map keys as NAME (or CLASS), array elements as [].
func fieldPaths(t reflect.Type, prefix string, out *[]string) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == reflect.TypeOf(OrderedStrings{}), t == reflect.TypeOf(Duration("")):
		*out = append(*out, prefix)
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		for i := 0; i < t.NumField(); i++ {
			name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
			p := name
			if prefix != "" {
				p = prefix + "." + name
			}
			fieldPaths(t.Field(i).Type, p, out)
		}
	case reflect.Map:
		key := "NAME"
		switch {
		case strings.HasSuffix(prefix, "classes"):
			key = "CLASS"
		case strings.HasSuffix(prefix, "headers"):
			*out = append(*out, prefix)
			return
		}
		fieldPaths(t.Elem(), prefix+"."+key, out)
	case reflect.Slice:
		if t.Elem().Kind() == reflect.String {
			*out = append(*out, prefix)
			return
		}
		fieldPaths(t.Elem(), prefix+"[]", out)
	default:
		*out = append(*out, prefix)
	}
}

// TestEveryPolicyFieldIsDocumented fails when a field of policy.json has no
// row in the README's policy reference.
func TestEveryPolicyFieldIsDocumented(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	fieldPaths(reflect.TypeOf(File{}), "", &paths)
	if len(paths) < 30 {
		t.Fatalf("only %d fields found: %v", len(paths), paths)
	}
	for _, p := range paths {
		if !strings.Contains(string(readme), "`"+p+"`") {
			t.Errorf("policy field %s is not documented in README.md (add a row `%s` to the policy reference)", p, p)
		}
	}
}
