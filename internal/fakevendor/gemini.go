package fakevendor

import (
	"encoding/json"

	"github.com/detour-proxy/detour/rewrite"
)

// Gemini generateContent wire types, in the field order of
// docs/vendors.md#whole-answers and docs/vendors.md#gemini-stream.
type (
	geminiResponse struct {
		Candidates    []geminiCandidate `json:"candidates"`
		UsageMetadata geminiUsage       `json:"usageMetadata"`
		ModelVersion  string            `json:"modelVersion"`
		ResponseID    string            `json:"responseId"`
	}
	geminiCandidate struct {
		Content      geminiContent `json:"content"`
		FinishReason string        `json:"finishReason,omitempty"`
		Index        int           `json:"index"`
	}
	geminiContent struct {
		Role string `json:"role"`
		// Parts holds geminiPart and geminiCallPart values.
		Parts []any `json:"parts"`
	}
	geminiPart struct {
		Text string `json:"text"`
	}
	// geminiCallPart is a functionCall part; Gemini 3 adds a
	// thoughtSignature to the first one.
	geminiCallPart struct {
		FunctionCall     geminiFunctionCall `json:"functionCall"`
		ThoughtSignature string             `json:"thoughtSignature,omitempty"`
	}
	geminiFunctionCall struct {
		ID   string          `json:"id,omitempty"`
		Name string          `json:"name"`
		Args json.RawMessage `json:"args"`
	}
	geminiUsage struct {
		PromptTokenCount     int `json:"promptTokenCount"`
		CandidatesTokenCount int `json:"candidatesTokenCount,omitempty"`
		TotalTokenCount      int `json:"totalTokenCount"`
	}
)

// geminiID is the responseId of call c.
func geminiID(c call) string { return "fake" + pad(c.n) }

// geminiChunk is one GenerateContentResponse carrying text; final adds
// finishReason STOP and the candidates' token count.
func (v *Vendor) geminiChunk(c call, text string, final bool) []byte {
	return v.geminiResponse(c, []any{geminiPart{Text: text}}, final)
}

// geminiResponse is one GenerateContentResponse carrying parts; final adds
// finishReason STOP and the candidates' token count.
func (v *Vendor) geminiResponse(c call, parts []any, final bool) []byte {
	cand := geminiCandidate{Content: geminiContent{Role: "model", Parts: parts}}
	usage := geminiUsage{PromptTokenCount: c.promptTokens, TotalTokenCount: c.promptTokens}
	if final {
		cand.FinishReason = "STOP"
		usage.CandidatesTokenCount = c.plan.outputTokens()
		usage.TotalTokenCount += usage.CandidatesTokenCount
	}
	return marshal(geminiResponse{
		Candidates: []geminiCandidate{cand}, UsageMetadata: usage,
		ModelVersion: c.model, ResponseID: geminiID(c),
	})
}

// geminiCallParts are the functionCall parts of c's tool calls, all in one
// content as Gemini sends parallel calls; with Options.GeminiIDs the first
// carries the thoughtSignature.
func (v *Vendor) geminiCallParts(c call) []any {
	parts := make([]any, len(c.plan.calls))
	for i, tc := range c.plan.calls {
		p := geminiCallPart{FunctionCall: geminiFunctionCall{ID: tc.ID, Name: tc.Name, Args: json.RawMessage(tc.Arguments)}}
		if v.geminiIDs && i == 0 {
			p.ThoughtSignature = geminiThoughtSignature
		}
		parts[i] = p
	}
	return parts
}

// geminiBody is the generateContent answer to c: its text, or its function
// calls (finishReason STOP all the same).
func (v *Vendor) geminiBody(c call) []byte {
	if len(c.plan.calls) > 0 {
		return v.geminiResponse(c, v.geminiCallParts(c), true)
	}
	return v.geminiChunk(c, c.plan.text, true)
}

// geminiScript is the streamGenerateContent answer to c: one chunk per
// piece, the last with finishReason and the final usage; no opening events,
// no comments, no terminator (go-genai rejects anything but data lines).
// Tool calls come whole, in one chunk with finishReason; a partial stream
// carries that chunk without finishReason.
func (v *Vendor) geminiScript(c call, errClass string) script {
	s := script{fail: event{data: streamErrorData(rewrite.Gemini, errClass, c.model, v.now())}}
	var last event
	if len(c.plan.calls) > 0 {
		parts := v.geminiCallParts(c)
		s.deltas = []event{{data: v.geminiResponse(c, parts, false)}}
		last = event{data: v.geminiResponse(c, parts, true)}
	} else {
		for _, p := range c.plan.pieces {
			s.deltas = append(s.deltas, event{data: v.geminiChunk(c, p, false)})
		}
		last = event{data: v.geminiChunk(c, c.plan.pieces[len(c.plan.pieces)-1], true)}
	}
	tail := event{data: v.geminiChunk(c, "", true)}
	s.last, s.tail = &last, &tail
	return s
}
