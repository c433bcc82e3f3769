package fakevendor

import "strconv"

// openaiTextBody is openaiBody for a text answer, written without
// reflection: the same bytes as marshal(openaiCompletion{…}), a fifth of a
// simulated request's fake-vendor CPU less. It reports false, and the caller
// marshals, when the answer has tool calls or a string needs escaping.
func (v *Vendor) openaiTextBody(c call) ([]byte, bool) {
	id := openaiID(c)
	if len(c.plan.calls) > 0 || !plainJSON(id) || !plainJSON(c.model) || !plainJSON(c.plan.text) {
		return nil, false
	}
	out := c.plan.outputTokens()
	b := make([]byte, 0, 300+len(id)+len(c.model)+len(c.plan.text))
	b = append(b, `{"id":"`...)
	b = append(b, id...)
	b = append(b, `","object":"chat.completion","created":`...)
	b = strconv.AppendInt(b, v.now().Unix(), 10)
	b = append(b, `,"model":"`...)
	b = append(b, c.model...)
	b = append(b, `","choices":[{"index":0,"message":{"role":"assistant","content":"`...)
	b = append(b, c.plan.text...)
	b = append(b, `","refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":`...)
	b = strconv.AppendInt(b, int64(c.promptTokens), 10)
	b = append(b, `,"completion_tokens":`...)
	b = strconv.AppendInt(b, int64(out), 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, int64(c.promptTokens+out), 10)
	b = append(b, `}}`...)
	return b, true
}

// plainJSON reports whether encoding/json writes s between its quotes
// unchanged (marshal does not escape HTML): printable ASCII other than the
// quote and the backslash.
func plainJSON(s string) bool {
	for i := 0; i < len(s); i++ {
		if b := s[i]; b < 0x20 || b > 0x7e || b == '"' || b == '\\' {
			return false
		}
	}
	return true
}
