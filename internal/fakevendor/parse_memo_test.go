package fakevendor

import (
	"reflect"
	"testing"

	"github.com/detour-proxy/detour/rewrite"
)

// memoSeeds are request bodies with and without tools, well-formed and not,
// in each shape's vocabulary.
var memoSeeds = []string{
	`{"model":"gpt-4o","messages":[{"role":"user","content":"Say hello."}]}`,
	`{"model":"gpt-4o","max_tokens":16}`,
	`{"model":"gpt-4o","stream":true,"stream_options":{"include_usage":true},"messages":[]}`,
	`{"model":"gpt-4o","messages":null}`,
	`{"MODEL":"x","Stream":true,"messages":[1]}`,
	`{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"get_weather","parameters":{}}}],"tool_choice":"auto"}`,
	`{"model":"gpt-4o","messages":[{"role":"tool","tool_call_id":"c1","content":"sunny"}]}`,
	`{"model":"gpt-4o","parallel_tool_calls":false,"messages":[]}`,
	`{"model":"claude-x","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`,
	`{"model":"gpt-4o","input":"hi"}`,
	`{"model":1}`,
	`{"model":"gpt-4o"`,
	` {"model":"gpt-4o","messages":[]} `,
	`[]`,
	``,
}

// parseOnce is the call parseBody makes of body on a fresh vendor: the
// oracle of parseBodyMemo.
func parseOnce(shape rewrite.Shape, body []byte) (call, bool) {
	var c call
	ok := New(shape, Options{}).parseBody(body, &c)
	return c, ok
}

// checkMemo parses every body twice through one vendor's memo (so that the
// second parse of a tool-free body is a hit), interleaved with the others,
// and wants parseBody's answer each time.
func checkMemo(t *testing.T, shape rewrite.Shape, bodies []string) {
	t.Helper()
	v := New(shape, Options{})
	for _, round := range []string{"first", "again"} {
		for _, b := range bodies {
			for range 2 {
				var got call
				ok := v.parseBodyMemo([]byte(b), &got)
				want, wantOK := parseOnce(shape, []byte(b))
				if ok != wantOK || !reflect.DeepEqual(got, want) {
					t.Fatalf("%s, %s: parseBodyMemo(%q) = %+v, %t; parseBody says %+v, %t", shape, round, b, got, ok, want, wantOK)
				}
			}
		}
	}
}

func TestParseBodyMemoMatchesParseBody(t *testing.T) {
	t.Parallel()
	for _, shape := range []rewrite.Shape{rewrite.OpenAI, rewrite.OpenAIResponses, rewrite.Anthropic, rewrite.Gemini} {
		checkMemo(t, shape, memoSeeds)
	}
}

// A tool-free body is decoded once, however often it is sent.
func TestParseBodyMemoRemembersAToolFreeBody(t *testing.T) {
	t.Parallel()
	v := New(rewrite.OpenAI, Options{})
	body := []byte(memoSeeds[0])
	var c call
	v.parseBodyMemo(body, &c)
	first := v.memo.Load()
	if first == nil || first.body != string(body) || !first.ok || first.model != "gpt-4o" {
		t.Fatalf("memo after one parse: %+v", first)
	}
	v.parseBodyMemo(body, &call{})
	if v.memo.Load() != first {
		t.Error("a second parse of the same body replaced the memo")
	}
	v.parseBodyMemo([]byte(memoSeeds[5]), &call{}) // declares a tool
	if v.memo.Load() != first {
		t.Error("a body with tools was remembered")
	}
}

func FuzzParseBodyMemo(f *testing.F) {
	for _, b := range memoSeeds {
		f.Add(b, b)
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		for _, shape := range []rewrite.Shape{rewrite.OpenAI, rewrite.OpenAIResponses, rewrite.Anthropic} {
			checkMemo(t, shape, []string{a, b})
		}
	})
}
