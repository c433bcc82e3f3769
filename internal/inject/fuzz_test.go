package inject

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// FuzzMutate: for any pod the webhook accepts, the patch applies cleanly,
// the result is a pod, adds nothing invalid to it, and a second pass changes
// nothing.
func FuzzMutate(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.json")
	for _, name := range files {
		if filepath.Ext(filepath.Base(name[:len(name)-len(".json")])) == ".patch" {
			continue
		}
		var r struct {
			Request struct {
				Object json.RawMessage `json:"object"`
			} `json:"request"`
		}
		data, _ := os.ReadFile(name)
		if json.Unmarshal(data, &r) == nil && len(r.Request.Object) > 0 {
			f.Add([]byte(r.Request.Object))
		}
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var pod corev1.Pod
		if json.Unmarshal(raw, &pod) != nil {
			return
		}
		before := len(validatePod(&pod))
		d, err := testConfig.Mutate(&pod)
		if err != nil || len(d.Patch) == 0 {
			return
		}
		// Apply to the pod as the API server holds it (re-encoded: the
		// fuzzer's JSON may have duplicate keys or other oddities).
		doc, _ := json.Marshal(&pod)
		ops, _ := json.Marshal(d.Patch)
		patched, err := applyPatch(doc, ops)
		if err != nil {
			t.Fatalf("patch does not apply: %v\npod: %s\npatch: %s", err, doc, ops)
		}
		var after corev1.Pod
		if err := strictUnmarshal(patched, &after); err != nil {
			t.Fatalf("patched pod does not decode: %v", err)
		}
		if errs := validatePod(&after); len(errs) > before {
			t.Fatalf("the patch made the pod invalid: %q", errs)
		}
		if d2, err := testConfig.Mutate(&after); err != nil || len(d2.Patch) != 0 {
			t.Fatalf("second pass: %v, %d ops", err, len(d2.Patch))
		}
	})
}
