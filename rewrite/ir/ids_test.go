package ir

import "testing"

func TestSafeToolIDRoundTrip(t *testing.T) {
	for _, id := range []string{"toolu_01A", "call_abc-DEF_9", "call:with.dots", "dtr_looks-encoded", "", "ünïcode id"} {
		s := SafeToolID(id)
		if !anthropicID.MatchString(s) {
			t.Errorf("SafeToolID(%q) = %q; not in Anthropic's charset", id, s)
		}
		if back := OriginalToolID(s); back != id {
			t.Errorf("OriginalToolID(SafeToolID(%q)) = %q", id, back)
		}
	}
	if got := SafeToolID("call_abc"); got != "call_abc" {
		t.Errorf("a fitting id was changed: %q", got)
	}
}

func FuzzSafeToolID(f *testing.F) {
	f.Add("call_1")
	f.Add("a:b/c")
	f.Fuzz(func(t *testing.T, id string) {
		s := SafeToolID(id)
		if !anthropicID.MatchString(s) || OriginalToolID(s) != id {
			t.Fatalf("id %q → %q → %q", id, s, OriginalToolID(s))
		}
	})
}
