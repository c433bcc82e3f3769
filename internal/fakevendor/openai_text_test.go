package fakevendor

import (
	"bytes"
	"testing"
	"time"

	"github.com/detour-proxy/detour/rewrite"
)

// openaiTextOracle is openaiBody's marshal of a text answer, as it was
// before openaiTextBody.
func openaiTextOracle(v *Vendor, c call) []byte {
	out := c.plan.outputTokens()
	return marshal(openaiCompletion{
		ID: openaiID(c), Object: "chat.completion", Created: v.now().Unix(), Model: c.model,
		Choices: []openaiChoice{{
			Message:      openaiMessage{Role: "assistant", Content: c.plan.text, Annotations: []any{}},
			FinishReason: "stop",
		}},
		Usage: openaiUsage{PromptTokens: c.promptTokens, CompletionTokens: out, TotalTokens: c.promptTokens + out},
	})
}

func checkOpenAIText(t *testing.T, model, text string, n, prompt int, unix int64) {
	t.Helper()
	v := New(rewrite.OpenAI, Options{Now: func() time.Time { return time.Unix(unix, 0) }})
	c := call{n: n, model: model, promptTokens: prompt, plan: plan{text: text}}
	want := openaiTextOracle(v, c)
	if got := v.openaiBody(c); !bytes.Equal(got, want) {
		t.Errorf("openaiBody(model %q, text %q) =\n%s\nmarshal says\n%s", model, text, got, want)
	}
	if got, ok := v.openaiTextBody(c); ok && !bytes.Equal(got, want) {
		t.Errorf("openaiTextBody(model %q, text %q) =\n%s\nmarshal says\n%s", model, text, got, want)
	}
}

// openaiTextSeeds are models and texts, plain and in need of escaping.
var openaiTextSeeds = []struct{ model, text string }{
	{"gpt-4o", "Hello from u1."},
	{"", ""},
	{"gpt-4o", "a <b> & c"},
	{"gpt-4o", `say "hi"`},
	{`gp\t`, "x"},
	{"gpt-4o", "line\nbreak"},
	{"gpt-4o", "caf\u00e9"},
	{"gpt-4o", "\u2028"},
	{"gpt-4o", "bad \xff utf-8"},
	{"gpt-4o", "tab\there"},
	{"gpt-4o", "\x7f"},
}

func TestOpenAITextBodyMatchesMarshal(t *testing.T) {
	t.Parallel()
	for _, s := range openaiTextSeeds {
		checkOpenAIText(t, s.model, s.text, 7, 18, 1735689600)
		checkOpenAIText(t, s.model, s.text, 1234567, 0, -5)
	}
	// Tool calls take marshal's path.
	v := New(rewrite.OpenAI, Options{})
	if _, ok := v.openaiTextBody(call{plan: plan{calls: []ToolCall{{ID: "c", Name: "f", Arguments: "{}"}}}}); ok {
		t.Error("openaiTextBody wrote an answer with tool calls")
	}
}

func FuzzOpenAITextBody(f *testing.F) {
	for _, s := range openaiTextSeeds {
		f.Add(s.model, s.text, 7, 18, int64(1735689600))
	}
	f.Fuzz(func(t *testing.T, model, text string, n, prompt int, unix int64) {
		checkOpenAIText(t, model, text, n, prompt, unix)
	})
}
