package fakevendor

import (
	"github.com/detour-proxy/detour/rewrite"
)

// Gemini generateContent wire types, in the field order of
// translation.md §2–§3.
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
		Role  string       `json:"role"`
		Parts []geminiPart `json:"parts"`
	}
	geminiPart struct {
		Text string `json:"text"`
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
	cand := geminiCandidate{Content: geminiContent{Role: "model", Parts: []geminiPart{{Text: text}}}}
	usage := geminiUsage{PromptTokenCount: c.promptTokens, TotalTokenCount: c.promptTokens}
	if final {
		cand.FinishReason = "STOP"
		usage.CandidatesTokenCount = v.completionTokens()
		usage.TotalTokenCount += usage.CandidatesTokenCount
	}
	return marshal(geminiResponse{
		Candidates: []geminiCandidate{cand}, UsageMetadata: usage,
		ModelVersion: c.model, ResponseID: geminiID(c),
	})
}

// geminiBody is the generateContent answer to c.
func (v *Vendor) geminiBody(c call) []byte { return v.geminiChunk(c, v.text, true) }

// geminiScript is the streamGenerateContent answer to c: one chunk per
// piece, the last with finishReason and the final usage; no opening events,
// no comments, no terminator (go-genai rejects anything but data lines).
func (v *Vendor) geminiScript(c call, errClass string) script {
	s := script{fail: event{data: streamErrorData(rewrite.Gemini, errClass, c.model, v.now())}}
	for _, p := range v.pieces {
		s.deltas = append(s.deltas, event{data: v.geminiChunk(c, p, false)})
	}
	last := event{data: v.geminiChunk(c, v.pieces[len(v.pieces)-1], true)}
	tail := event{data: v.geminiChunk(c, "", true)}
	s.last, s.tail = &last, &tail
	return s
}
