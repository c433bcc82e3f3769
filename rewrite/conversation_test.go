package rewrite

import "testing"

func TestConversationStart(t *testing.T) {
	for _, tc := range []struct {
		name  string
		shape Shape
		body  string
		want  string
	}{
		{"openai: system and the first user turn", OpenAI,
			`{"model":"m","messages":[{"role":"system","content":"s"},{"role":"user","content":"q"},{"role":"assistant","content":"a"}]}`,
			`[{"role":"system","content":"s"},{"role":"user","content":"q"}`},
		{"anthropic", Anthropic, `{"messages":[{"role":"user","content":"q"},{"role":"assistant","content":"a"}],"system":"s"}`,
			`[{"role":"user","content":"q"}`},
		{"gemini contents", Gemini, `{"contents":[{"role":"user","parts":[{"text":"q"}]},{"role":"model","parts":[]}],"messages":[1]}`,
			`[{"role":"user","parts":[{"text":"q"}]}`},
		{"responses input string", OpenAI, `{"input":"hello"}`, `"hello"`},
		{"no user turn: every message", OpenAI, `{"messages":[{"role":"system","content":"s"}]}`, `[{"role":"system","content":"s"}`},
		{"no messages", OpenAI, `{"model":"m"}`, ``},
		{"empty messages", OpenAI, `{"messages":[]}`, ``},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(ConversationStart(tc.shape, []byte(tc.body))); got != tc.want {
				t.Errorf("got %q; want %q", got, tc.want)
			}
		})
	}
}

func TestConversationStartDoesNotAllocate(t *testing.T) {
	body := []byte(`{"model":"m","messages":[{"role":"system","content":"s"},{"role":"user","content":"q"}]}`)
	if n := testing.AllocsPerRun(100, func() { ConversationStart(OpenAI, body) }); n != 0 {
		t.Errorf("%v allocations; want 0", n)
	}
}
