package fakevendor

import (
	"github.com/detour-proxy/detour/rewrite"
)

// Anthropic Messages wire types, in the field order of translation.md §2–§3.
type (
	// anthropicMessage is the non-streaming answer (§2 lists model before
	// content).
	anthropicMessage struct {
		ID           string          `json:"id"`
		Type         string          `json:"type"`
		Role         string          `json:"role"`
		Model        string          `json:"model"`
		Content      []anthropicText `json:"content"`
		StopReason   *string         `json:"stop_reason"`
		StopSequence *string         `json:"stop_sequence"`
		Usage        anthropicUsage  `json:"usage"`
	}
	// anthropicStartMessage is the message of message_start (the §3
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
	anthropicUsage struct {
		InputTokens  int `json:"input_tokens"`
		OutputTokens int `json:"output_tokens"`
	}
	anthropicMessageStart struct {
		Type    string                `json:"type"`
		Message anthropicStartMessage `json:"message"`
	}
	anthropicBlockDelta struct {
		Type  string              `json:"type"`
		Index int                 `json:"index"`
		Delta anthropicDeltaValue `json:"delta"`
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

// anthropicBody is the message answering c.
func (v *Vendor) anthropicBody(c call) []byte {
	return marshal(anthropicMessage{
		ID: anthropicID(c), Type: "message", Role: "assistant",
		Content: []anthropicText{{Type: "text", Text: v.text}},
		Model:   c.model, StopReason: ptr("end_turn"),
		Usage: anthropicUsage{InputTokens: c.promptTokens, OutputTokens: v.completionTokens()},
	})
}

// anthropicScript is the event stream answering c: message_start,
// content_block_start, ping, one content_block_delta per piece,
// content_block_stop, message_delta (stop_reason and cumulative
// output_tokens), message_stop; every event with its `event:` line.
func (v *Vendor) anthropicScript(c call, errClass string) script {
	start := marshal(anthropicMessageStart{Type: "message_start", Message: anthropicStartMessage{
		ID: anthropicID(c), Type: "message", Role: "assistant", Content: []anthropicText{},
		Model: c.model, Usage: anthropicUsage{InputTokens: c.promptTokens, OutputTokens: 1},
	}})
	s := script{
		open: []event{{name: "message_start", data: start}},
		lead: []event{
			{name: "content_block_start", data: []byte(`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)},
			{name: "ping", data: []byte(`{"type":"ping"}`)},
		},
		close: []event{
			{name: "content_block_stop", data: []byte(`{"type":"content_block_stop","index":0}`)},
			{name: "message_delta", data: marshal(anthropicMessageDelta{
				Type: "message_delta", Delta: anthropicMessageChange{StopReason: "end_turn"},
				Usage: anthropicOutputUsage{OutputTokens: v.completionTokens()},
			})},
			{name: "message_stop", data: []byte(`{"type":"message_stop"}`)},
		},
		fail: event{name: "error", data: streamErrorData(rewrite.Anthropic, errClass, c.model, v.now())},
	}
	for _, p := range v.pieces {
		s.deltas = append(s.deltas, event{name: "content_block_delta", data: marshal(anthropicBlockDelta{
			Type: "content_block_delta", Delta: anthropicDeltaValue{Type: "text_delta", Text: p},
		})})
	}
	return s
}
