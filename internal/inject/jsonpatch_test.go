package inject

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
)

// applyPatch applies an RFC 6902 patch of "add" and "replace" operations (all
// the injector emits) to a JSON document, strictly: a missing parent, an
// index out of range, a replace of a missing member and any other op are
// errors, as they would be for the API server.
func applyPatch(doc []byte, patch []byte) ([]byte, error) {
	var root any
	if err := json.Unmarshal(doc, &root); err != nil {
		return nil, fmt.Errorf("document: %w", err)
	}
	var ops []struct {
		Op    string           `json:"op"`
		Path  string           `json:"path"`
		Value *json.RawMessage `json:"value"`
	}
	dec := json.NewDecoder(strings.NewReader(string(patch)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&ops); err != nil {
		return nil, fmt.Errorf("patch: %w", err)
	}
	for i, op := range ops {
		if op.Value == nil {
			return nil, fmt.Errorf("op %d (%s %s): no value", i, op.Op, op.Path)
		}
		var v any
		if err := json.Unmarshal(*op.Value, &v); err != nil {
			return nil, fmt.Errorf("op %d: value: %w", i, err)
		}
		var err error
		switch op.Op {
		case "add", "replace":
			root, err = setPointer(root, op.Path, v, op.Op == "add")
		default:
			err = fmt.Errorf("unsupported op %q", op.Op)
		}
		if err != nil {
			return nil, fmt.Errorf("op %d (%s %s): %w", i, op.Op, op.Path, err)
		}
	}
	return json.Marshal(root)
}

// setPointer adds or replaces the value at the JSON Pointer path.
func setPointer(root any, path string, v any, add bool) (any, error) {
	if path == "" {
		return v, nil
	}
	if !strings.HasPrefix(path, "/") {
		return nil, fmt.Errorf("pointer %q does not start with /", path)
	}
	tokens := strings.Split(path[1:], "/")
	for i, t := range tokens {
		tokens[i] = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
	}
	parent := root
	for _, t := range tokens[:len(tokens)-1] {
		switch p := parent.(type) {
		case map[string]any:
			next, ok := p[t]
			if !ok {
				return nil, fmt.Errorf("no member %q", t)
			}
			parent = next
		case []any:
			n, err := strconv.Atoi(t)
			if err != nil || n < 0 || n >= len(p) {
				return nil, fmt.Errorf("index %q out of range (len %d)", t, len(p))
			}
			parent = p[n]
		default:
			return nil, fmt.Errorf("cannot descend into %T at %q", parent, t)
		}
	}
	last := tokens[len(tokens)-1]
	switch p := parent.(type) {
	case map[string]any:
		if _, ok := p[last]; !ok && !add {
			return nil, fmt.Errorf("replace of missing member %q", last)
		}
		p[last] = v
	case []any:
		var n int
		if last == "-" && add {
			n = len(p)
		} else {
			var err error
			n, err = strconv.Atoi(last)
			limit := len(p) - 1
			if add {
				limit = len(p)
			}
			if err != nil || n < 0 || n > limit {
				return nil, fmt.Errorf("index %q out of range (len %d)", last, len(p))
			}
		}
		var out []any
		if add {
			out = append(append(append([]any{}, p[:n]...), v), p[n:]...)
		} else {
			out = append([]any{}, p...)
			out[n] = v
		}
		// Arrays are values in the decoded tree: write the new one back.
		return setPointer(root, "/"+strings.Join(escapeAll(tokens[:len(tokens)-1]), "/"), out, false)
	default:
		return nil, fmt.Errorf("cannot set a member of %T", parent)
	}
	return root, nil
}

func escapeAll(tokens []string) []string {
	out := make([]string, len(tokens))
	for i, t := range tokens {
		out[i] = escapePointer(t)
	}
	return out
}

func TestApplyPatch(t *testing.T) {
	doc := `{"a":{"b/c":[1,2]},"s":[]}`
	for _, tc := range []struct{ patch, want, err string }{
		{`[{"op":"add","path":"/a/b~1c/-","value":3}]`, `{"a":{"b/c":[1,2,3]},"s":[]}`, ""},
		{`[{"op":"add","path":"/a/b~1c/0","value":0}]`, `{"a":{"b/c":[0,1,2]},"s":[]}`, ""},
		{`[{"op":"replace","path":"/a/b~1c/1","value":9}]`, `{"a":{"b/c":[1,9]},"s":[]}`, ""},
		{`[{"op":"add","path":"/a/x~0y","value":"v"}]`, `{"a":{"b/c":[1,2],"x~y":"v"},"s":[]}`, ""},
		{`[{"op":"add","path":"/s","value":[1]}]`, `{"a":{"b/c":[1,2]},"s":[1]}`, ""},
		{`[{"op":"replace","path":"/a/nope","value":1}]`, "", "replace of missing member"},
		{`[{"op":"add","path":"/nope/x","value":1}]`, "", "no member"},
		{`[{"op":"add","path":"/a/b~1c/3","value":1}]`, "", "out of range"},
		{`[{"op":"remove","path":"/a","value":1}]`, "", "unsupported op"},
	} {
		got, err := applyPatch([]byte(doc), []byte(tc.patch))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: err %v; want %q", tc.patch, err, tc.err)
			}
			continue
		}
		if err != nil || string(got) != tc.want {
			t.Errorf("%s: got %s, %v; want %s", tc.patch, got, err, tc.want)
		}
	}
}
