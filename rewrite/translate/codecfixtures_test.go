package translate

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/detour-proxy/detour/rewrite"
)

// TestStreamInvariantsOnCodecFixtures runs the codecs' own upstream stream
// fixtures (text before tools, thinking, parameterless tools, calls without
// an index, OpenRouter and bare Gemini errors, Gemini's JSON-array stream)
// through every pair that reads them, with usage asked for and not: the
// app's stream must keep its SDK's rules whatever the upstream sent.
func TestStreamInvariantsOnCodecFixtures(t *testing.T) {
	globs := map[rewrite.Shape][]string{
		rewrite.OpenAI:    {"../openai/testdata/streams/*.sse", "../sse/testdata/openai_*.sse", "../sse/testdata/openrouter_*.sse"},
		rewrite.Anthropic: {"../anthropic/testdata/*.sse", "../sse/testdata/anthropic_*.sse"},
		rewrite.Gemini:    {"../sse/testdata/gemini_*.sse", "../../internal/fakevendor/testdata/gemini_*stream*.golden"},
	}
	for _, p := range pairs {
		var files []string
		for _, g := range globs[p.to] {
			m, err := filepath.Glob(g)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, m...)
		}
		if len(files) < 3 {
			t.Fatalf("%s: only %d upstream fixtures found in %q", p, len(files), globs[p.to])
		}
		for _, f := range files {
			upstream, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, usage := range []bool{true, false} {
				name := p.String() + "/" + filepath.Base(f)
				if !usage {
					name += "/no_usage"
				}
				t.Run(name, func(t *testing.T) {
					req := decodeApp(t, p.from, true)
					req.IncludeUsage = usage && p.from == rewrite.OpenAI
					run := runStream(t, req, p, upstream)
					if len(run.closeAgain) > 0 {
						t.Errorf("a second Close appended %q", run.closeAgain)
					}
					checkStream(t, p.from, run.out, streamCheck{wantError: run.sawError, includeUsage: req.IncludeUsage, model: appModel[p.from], strict: true})
				})
			}
		}
	}
}
