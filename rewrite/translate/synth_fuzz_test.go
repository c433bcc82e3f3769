package translate

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/detour-proxy/detour/rewrite"
	"github.com/detour-proxy/detour/rewrite/ir"
)

// answerSeeds are the answers FuzzDecodeAnswer starts from: every stream
// and response fixture of the repository, by shape, and Synthesize's own
// output.
func answerSeeds(f *testing.F) (streams, wholes map[rewrite.Shape][][]byte) {
	f.Helper()
	streams, wholes = map[rewrite.Shape][][]byte{}, map[rewrite.Shape][][]byte{}
	globs := []struct {
		shape  rewrite.Shape
		stream bool
		glob   string
	}{
		{rewrite.OpenAI, true, "testdata/upstream/openai_stream_*.sse"},
		{rewrite.OpenAI, true, "../openai/testdata/streams/*.sse"},
		{rewrite.OpenAI, true, "../sse/testdata/open*.sse"},
		{rewrite.OpenAI, false, "testdata/upstream/openai_*.json"},
		{rewrite.Anthropic, true, "testdata/upstream/anthropic_stream_*.sse"},
		{rewrite.Anthropic, true, "../anthropic/testdata/*.sse"},
		{rewrite.Anthropic, true, "../sse/testdata/anthropic_*.sse"},
		{rewrite.Anthropic, false, "testdata/upstream/anthropic_*.json"},
		{rewrite.Gemini, true, "testdata/upstream/gemini_stream_*.sse"},
		{rewrite.Gemini, true, "../sse/testdata/gemini_*.sse"},
		{rewrite.Gemini, true, "../../internal/fakevendor/testdata/gemini_*stream*.golden"},
		{rewrite.Gemini, false, "testdata/upstream/gemini_*.json"},
	}
	for _, g := range globs {
		files, err := filepath.Glob(g.glob)
		if err != nil || len(files) == 0 {
			f.Fatalf("no seeds in %s (%v)", g.glob, err)
		}
		for _, file := range files {
			b, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			if g.stream {
				streams[g.shape] = append(streams[g.shape], b)
			} else {
				wholes[g.shape] = append(wholes[g.shape], b)
			}
		}
	}
	for _, app := range rewrite.Shapes {
		for _, a := range synthAnswers {
			_, s, _ := Synthesize(app, "m", a.r, true, true)
			_, w, _ := Synthesize(app, "m", a.r, false, false)
			streams[app] = append(streams[app], s)
			wholes[app] = append(wholes[app], w)
		}
	}
	return streams, wholes
}

// FuzzDecodeAnswer: DecodeAnswer never panics, and whatever it accepts the
// cache can replay: Synthesize renders it in the same shape without error,
// and that decodes again to the same text, thinking, tool calls, and the
// finish reasons that matter (cut off, filtered).
func FuzzDecodeAnswer(f *testing.F) {
	streams, wholes := answerSeeds(f)
	for i, app := range rewrite.Shapes {
		for _, b := range streams[app] {
			f.Add(uint8(i), true, b)
		}
		for _, b := range wholes[app] {
			f.Add(uint8(i), false, b)
		}
	}
	f.Fuzz(func(t *testing.T, shape uint8, stream bool, body []byte) {
		app := rewrite.Shapes[int(shape)%len(rewrite.Shapes)]
		r, err := DecodeAnswer(app, body, stream)
		if err != nil {
			return
		}
		// Replay in both forms, as a cached answer may be.
		for _, replayStream := range []bool{false, true} {
			_, out, err := Synthesize(app, "", r, replayStream, true)
			if err != nil {
				t.Fatalf("%s: Synthesize(stream=%v) of an accepted answer: %v\n%+v", app, replayStream, err, r)
			}
			again, err := DecodeAnswer(app, out, replayStream)
			if err != nil {
				t.Fatalf("%s: the replay (stream=%v) does not decode: %v\n%s", app, replayStream, err, out)
			}
			if got, want := replayView(again), replayView(r); !reflect.DeepEqual(got, want) {
				t.Fatalf("%s: the replay (stream=%v) reads differently\n got %+v\nwant %+v\n%s", app, replayStream, got, want, out)
			}
			// Call ids survive (a missing one is made up).
			var ids, idsAgain []string
			for _, p := range r.Parts {
				if p.ToolCall != nil {
					ids = append(ids, p.ToolCall.ID)
				}
			}
			for _, p := range again.Parts {
				if p.ToolCall != nil {
					idsAgain = append(idsAgain, p.ToolCall.ID)
				}
			}
			for i, id := range ids {
				if id != "" && idsAgain[i] != id {
					t.Fatalf("%s: call %d id %q came back as %q", app, i, id, idsAgain[i])
				}
			}
		}
	})
}

// replayView is what must survive a replay. Strings go through []rune, as
// the encoders write each invalid UTF-8 byte as U+FFFD.
type replayViewT struct {
	Text, Thinking string
	Calls          []callView
	Cut, Filtered  bool
}

func replayView(r *ir.Response) replayViewT {
	valid := func(s string) string { return string([]rune(s)) }
	var v replayViewT
	for _, p := range r.Parts {
		switch p.Kind {
		case ir.PartText:
			v.Text += valid(p.Text)
		case ir.PartThinking:
			v.Thinking += valid(p.Text)
		case ir.PartToolCall:
			// Ids are compared apart; thought signatures survive only
			// where the shape carries them.
			v.Calls = append(v.Calls, callView{Name: valid(p.ToolCall.Name), Args: valid(string(p.ToolCall.Arguments))})
		}
	}
	v.Cut, v.Filtered = r.Finish == ir.FinishLength, r.Finish == ir.FinishContentFilter
	return v
}
