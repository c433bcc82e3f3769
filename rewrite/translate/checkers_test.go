package translate

import (
	"fmt"
	"strings"
	"testing"

	"github.com/detour-proxy/detour/rewrite"
)

// recorder is a testing.TB that collects what a checker reports, so that
// the checkers themselves can be tested: an invariant that never fails
// protects nothing.
type recorder struct {
	testing.TB
	errs []string
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

type fatal struct{}

func (r *recorder) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	panic(fatal{})
}

// TestStreamCheckersCatchBrokenStreams feeds each app-stream checker a
// stream that breaks one of its rules and expects that rule's complaint.
func TestStreamCheckersCatchBrokenStreams(t *testing.T) {
	const (
		aStart  = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"model\":\"m\",\"usage\":{\"input_tokens\":1}}}\n\n"
		aText0  = "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"
		aDelta0 = "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n"
		aStop0  = "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n"
		aText2  = "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":2,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"
		aMsgD   = "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":1}}\n\n"
		aMsgS   = "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
		aErr    = "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"api_error\",\"message\":\"x\"}}\n\n"

		oHead   = `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[`
		oRole   = oHead + `{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}` + "\n\n"
		oText   = oHead + `{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]}` + "\n\n"
		oFinish = oHead + `{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n"
		oUsage  = oHead + `],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}` + "\n\n"
		oDone   = "data: [DONE]\n\n"
		oOther  = `data: {"id":"chatcmpl-2","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"x"},"finish_reason":null}]}` + "\n\n"
		oCall   = oHead + `{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c","type":"function","function":{"name":"f","arguments":""}}]},"finish_reason":null}]}` + "\n\n"
		oRename = oHead + `{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"name":"f","arguments":"{}"}}]},"finish_reason":null}]}` + "\n\n"
		oCall2  = oHead + `{"index":0,"delta":{"tool_calls":[{"index":2,"id":"d","type":"function","function":{"name":"g","arguments":"{}"}}]},"finish_reason":null}]}` + "\n\n"
		oErr    = `data: {"error":{"message":"x","type":"server_error"}}` + "\n\n"

		gText  = `data: {"candidates":[{"content":{"role":"model","parts":[{"text":"Hi"}]},"index":0}],"modelVersion":"m","responseId":"r"}` + "\n\n"
		gFinal = `data: {"candidates":[{"content":{"role":"model","parts":[{"text":""}]},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":1},"modelVersion":"m","responseId":"r"}` + "\n\n"
		gErr   = `data: {"error":{"code":503,"message":"x","status":"UNAVAILABLE"}}` + "\n\n"
	)
	for _, tc := range []struct {
		name      string
		app       rewrite.Shape
		stream    string
		wantError bool
		usage     bool
		complaint string // "" for a stream that must pass
	}{
		{"anthropic ok", rewrite.Anthropic, aStart + aText0 + aDelta0 + aStop0 + aMsgD + aMsgS, false, false, ""},
		{"anthropic error ok", rewrite.Anthropic, aStart + aText0 + aDelta0 + aErr, true, false, ""},
		{"anthropic no message_start", rewrite.Anthropic, aText0 + aDelta0 + aStop0 + aMsgD + aMsgS, false, false, "want message_start"},
		{"anthropic index gap", rewrite.Anthropic, aStart + aText0 + aStop0 + aText2 + aStop0 + aMsgD + aMsgS, false, false, "want 1"},
		{"anthropic two open blocks", rewrite.Anthropic, aStart + aText0 + strings.Replace(aText0, `"index":0`, `"index":1`, 1) + aMsgD + aMsgS, false, false, "while block 0 is open"},
		{"anthropic delta after stop", rewrite.Anthropic, aStart + aText0 + aStop0 + aDelta0 + aMsgD + aMsgS, false, false, "delta for block 0"},
		{"anthropic message_delta with open block", rewrite.Anthropic, aStart + aText0 + aMsgD + aMsgS, false, false, "while block 0 is open"},
		{"anthropic name differs from type", rewrite.Anthropic, aStart + strings.Replace(aText0, "event: content_block_start", "event: content_block_delta", 1) + aStop0 + aMsgD + aMsgS, false, false, "the SDK dispatches on the name"},
		{"anthropic message_stop twice", rewrite.Anthropic, aStart + aMsgD + aMsgS + aMsgS, false, false, "after the stream ended"},
		{"anthropic no message_stop", rewrite.Anthropic, aStart + aText0 + aDelta0 + aStop0 + aMsgD, false, false, "does not end with its message_stop"},
		{"anthropic event after error", rewrite.Anthropic, aStart + aErr + aMsgD + aMsgS, true, false, "after the stream ended"},
		{"anthropic missing error", rewrite.Anthropic, aStart + aMsgD + aMsgS, true, false, "does not end with the app's error event"},

		{"openai ok", rewrite.OpenAI, oRole + oText + oFinish + oUsage + oDone, false, true, ""},
		{"openai error ok", rewrite.OpenAI, oRole + oText + oErr, true, true, ""},
		{"openai two ids", rewrite.OpenAI, oRole + oOther + oFinish + oUsage + oDone, false, true, "the accumulator refuses it"},
		{"openai usage twice", rewrite.OpenAI, oRole + oFinish + oUsage + oUsage + oDone, false, true, "usage sent 2 times"},
		{"openai usage not asked for", rewrite.OpenAI, oRole + oFinish + oUsage + oDone, false, false, "did not ask for usage"},
		{"openai no usage", rewrite.OpenAI, oRole + oFinish + oDone, false, true, "usage sent 0 times"},
		{"openai done twice", rewrite.OpenAI, oRole + oFinish + oUsage + oDone + oDone, false, true, "after the stream ended"},
		{"openai no done", rewrite.OpenAI, oRole + oFinish + oUsage, false, true, "does not end with its [DONE]"},
		{"openai two finishes", rewrite.OpenAI, oRole + oFinish + oFinish + oUsage + oDone, false, true, "after the finish chunk"},
		{"openai tool named twice", rewrite.OpenAI, oRole + oCall + oRename + oFinish + oUsage + oDone, false, true, "named again"},
		{"openai tool index gap", rewrite.OpenAI, oRole + oCall + oCall2 + oFinish + oUsage + oDone, false, true, "want 1 (dense"},
		{"openai event line", rewrite.OpenAI, "event: chunk\n" + oRole + oFinish + oUsage + oDone, false, true, "has an event: line"},
		{"openai done after error", rewrite.OpenAI, oRole + oErr + oDone, true, true, "after the stream ended"},

		{"gemini ok", rewrite.Gemini, gText + gFinal, false, false, ""},
		{"gemini error ok", rewrite.Gemini, gText + gErr, true, false, ""},
		{"gemini done", rewrite.Gemini, gText + gFinal + oDone, false, false, "after the stream ended"},
		{"gemini done before final", rewrite.Gemini, gText + oDone + gFinal, false, false, "is [DONE]"},
		{"gemini comment", rewrite.Gemini, ": keep-alive\n\n" + gText + gFinal, false, false, "is a comment"},
		{"gemini event line", rewrite.Gemini, "event: message\n" + gText + gFinal, false, false, "has an event: line"},
		{"gemini id line", rewrite.Gemini, "id: 1\n" + gText + gFinal, false, false, "is not one data line"},
		{"gemini no final", rewrite.Gemini, gText + gText, false, false, "does not end with its chunk with a finishReason"},
		{"gemini two finals", rewrite.Gemini, gText + gFinal + gFinal, false, false, "after the stream ended"},
		{"gemini responseId changes", rewrite.Gemini, gText + strings.Replace(gFinal, `"responseId":"r"`, `"responseId":"s"`, 1), false, false, "the stream's is"},
		{"gemini bad signature", rewrite.Gemini, strings.Replace(gText, `{"text":"Hi"}`, `{"text":"Hi","thoughtSignature":"dtr_x"}`, 1) + gFinal, false, false, "is not base64"},
		{"unterminated event", rewrite.Gemini, gText + strings.TrimSuffix(gFinal, "\n\n"), false, false, "not terminated"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &recorder{TB: t}
			func() {
				defer func() {
					if v := recover(); v != nil {
						if _, ok := v.(fatal); !ok {
							panic(v)
						}
					}
				}()
				checkStream(r, tc.app, []byte(tc.stream), streamCheck{wantError: tc.wantError, includeUsage: tc.usage, model: "m", strict: true})
			}()
			got := strings.Join(r.errs, "\n")
			switch {
			case tc.complaint == "" && len(r.errs) > 0:
				t.Errorf("a valid stream was refused:\n%s", got)
			case tc.complaint != "" && !strings.Contains(got, tc.complaint):
				t.Errorf("complaints:\n%s\nwant one containing %q", got, tc.complaint)
			}
		})
	}
}
