package fakevendor

import (
	"encoding/json"

	"github.com/detour-proxy/detour/rewrite"
)

// Anthropic Messages wire types, in the field order of docs/vendors.md#whole-answers and docs/vendors.md#anthropic-stream.
type (
	// anthropicMessage is the non-streaming answer (the whole answer lists model before
	// content).
	anthropicMessage struct {
		ID    string `json:"id"`
		Type  string `json:"type"`
		Role  string `json:"role"`
		Model string `json:"model"`
		// Content holds anthropicText and anthropicToolUse blocks.
		Content      []any          `json:"content"`
		StopReason   *string        `json:"stop_reason"`
		StopSequence *string        `json:"stop_sequence"`
		Usage        anthropicUsage `json:"usage"`
	}
	// anthropicStartMessage is the message of message_start (the stream
	// example puts content before model).
	anthropicStartMessage struct {
		ID           string          `json:"id"`
		Type         string          `json:"type"`
		Role         string          `json:"role"`
		Content      []anthropicText `json:"content"`
		Model        string          `json:"model"`
		StopReason   *string         `json:"stop_reason"`
		StopSequence *string         `json:"stop_sequence"`
		Usage        anthropicUsage  `json:"usage"`
	}
	anthropicText struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	// anthropicToolUse is a tool_use block; in content_block_start its
	// input is {}.
	anthropicToolUse struct {
		Type  string          `json:"type"`
		ID    string          `json:"id"`
		Name  string          `json:"name"`
		Input json.RawMessage `json:"input"`
	}
	anthropicBlockStart struct {
		Type         string           `json:"type"`
		Index        int              `json:"index"`
		ContentBlock anthropicToolUse `json:"content_block"`
	}
	anthropicBlockStop struct {
		Type  string `json:"type"`
		Index int    `json:"index"`
	}
	anthropicJSONDelta struct {
		Type        string `json:"type"`
		PartialJSON string `json:"partial_json"`
	}
	anthropicUsage struct {
		InputTokens  int `json:"input_tokens"`
		OutputTokens int `json:"output_tokens"`
	}
	anthropicMessageStart struct {
		Type    string                `json:"type"`
		Message anthropicStartMessage `json:"message"`
	}
	anthropicBlockDelta struct {
		Type  string `json:"type"`
		Index int    `json:"index"`
		// Delta is an anthropicDeltaValue or an anthropicJSONDelta.
		Delta any `json:"delta"`
	}
	anthropicDeltaValue struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	anthropicMessageDelta struct {
		Type  string                 `json:"type"`
		Delta anthropicMessageChange `json:"delta"`
		Usage anthropicOutputUsage   `json:"usage"`
	}
	anthropicMessageChange struct {
		StopReason   string  `json:"stop_reason"`
		StopSequence *string `json:"stop_sequence"`
	}
	anthropicOutputUsage struct {
		OutputTokens int `json:"output_tokens"`
	}
)

// anthropicID is the message id of call c.
func anthropicID(c call) string { return "msg_fake" + pad(c.n) }

// anthropicBody is the message answering c: a text block, or tool_use
// blocks with stop_reason tool_use.
func (v *Vendor) anthropicBody(c call) []byte {
	content := []any{anthropicText{Type: "text", Text: c.plan.text}}
	stop := "end_turn"
	if len(c.plan.calls) > 0 {
		content, stop = content[:0], "tool_use"
		for _, tc := range c.plan.calls {
			content = append(content, anthropicToolUse{Type: "tool_use", ID: tc.ID, Name: tc.Name, Input: json.RawMessage(tc.Arguments)})
		}
	}
	return marshal(anthropicMessage{
		ID: anthropicID(c), Type: "message", Role: "assistant",
		Content: content, Model: c.model, StopReason: ptr(stop),
		Usage: anthropicUsage{InputTokens: c.promptTokens, OutputTokens: c.plan.outputTokens()},
	})
}

// anthropicScript is the event stream answering c: message_start,
// content_block_start, ping, one content_block_delta per piece,
// content_block_stop, message_delta (stop_reason and cumulative
// output_tokens), message_stop; every event with its `event:` line. A
// tool-call answer has per call a content_block_start of a tool_use block
// with input {} (the first followed by ping), input_json_delta fragments
// and content_block_stop, and stop_reason tool_use.
func (v *Vendor) anthropicScript(c call, errClass string) script {
	if len(c.plan.calls) > 0 {
		return v.anthropicToolScript(c, errClass)
	}
	s := script{
		open: []event{v.anthropicMessageStartEvent(c)},
		lead: []event{
			{name: "content_block_start", data: []byte(`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)},
			{name: "ping", data: []byte(`{"type":"ping"}`)},
		},
		close: []event{
			{name: "content_block_stop", data: []byte(`{"type":"content_block_stop","index":0}`)},
			{name: "message_delta", data: marshal(anthropicMessageDelta{
				Type: "message_delta", Delta: anthropicMessageChange{StopReason: "end_turn"},
				Usage: anthropicOutputUsage{OutputTokens: c.plan.outputTokens()},
			})},
			{name: "message_stop", data: []byte(`{"type":"message_stop"}`)},
		},
		fail: event{name: "error", data: streamErrorData(rewrite.Anthropic, errClass, c.model, v.now())},
	}
	for _, p := range c.plan.pieces {
		s.deltas = append(s.deltas, event{name: "content_block_delta", data: marshal(anthropicBlockDelta{
			Type: "content_block_delta", Delta: anthropicDeltaValue{Type: "text_delta", Text: p},
		})})
	}
	return s
}

// anthropicMessageStartEvent is the message_start event of c's stream.
func (v *Vendor) anthropicMessageStartEvent(c call) event {
	return event{name: "message_start", data: marshal(anthropicMessageStart{Type: "message_start", Message: anthropicStartMessage{
		ID: anthropicID(c), Type: "message", Role: "assistant", Content: []anthropicText{},
		Model: c.model, Usage: anthropicUsage{InputTokens: c.promptTokens, OutputTokens: 1},
	}})}
}

// anthropicToolScript is the event stream of a tool-call answer to c. The
// content blocks after the first one's start (and ping) count as deltas, so
// that a partial stream stops inside the calls; the last block's
// content_block_stop opens the closing events.
func (v *Vendor) anthropicToolScript(c call, errClass string) script {
	stop := func(i int) event {
		return event{name: "content_block_stop", data: marshal(anthropicBlockStop{Type: "content_block_stop", Index: i})}
	}
	s := script{
		open: []event{v.anthropicMessageStartEvent(c)},
		fail: event{name: "error", data: streamErrorData(rewrite.Anthropic, errClass, c.model, v.now())},
	}
	for i, tc := range c.plan.calls {
		start := event{name: "content_block_start", data: marshal(anthropicBlockStart{
			Type: "content_block_start", Index: i,
			ContentBlock: anthropicToolUse{Type: "tool_use", ID: tc.ID, Name: tc.Name, Input: json.RawMessage("{}")},
		})}
		if i == 0 {
			s.lead = []event{start, {name: "ping", data: []byte(`{"type":"ping"}`)}}
		} else {
			s.deltas = append(s.deltas, stop(i-1), start)
		}
		for _, frag := range splitArgs(tc.Arguments) {
			s.deltas = append(s.deltas, event{name: "content_block_delta", data: marshal(anthropicBlockDelta{
				Type: "content_block_delta", Index: i, Delta: anthropicJSONDelta{Type: "input_json_delta", PartialJSON: frag},
			})})
		}
	}
	s.close = []event{
		stop(len(c.plan.calls) - 1),
		{name: "message_delta", data: marshal(anthropicMessageDelta{
			Type: "message_delta", Delta: anthropicMessageChange{StopReason: "tool_use"},
			Usage: anthropicOutputUsage{OutputTokens: c.plan.outputTokens()},
		})},
		{name: "message_stop", data: []byte(`{"type":"message_stop"}`)},
	}
	return s
}
