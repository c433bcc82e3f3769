package gemini

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"

	"github.com/detour-proxy/detour/rewrite/ir"
)

// errErrorBody is returned (wrapped) by DecodeResponse for a body that is a
// Gemini error envelope rather than a GenerateContentResponse: the caller
// classifies error bodies (rewrite.ParseError) before decoding answers.
var errErrorBody = errors.New("gemini: response body is an error envelope")

// DecodeResponse decodes a generateContent response body into an
// ir.Response. Only the first candidate is read (the IR has one answer).
// Function calls without an id get ir.GeneratedToolID(responseId, n), n
// counting the calls of the response from 0, so that the same response
// always decodes to the same ids. A prompt blocked by
// promptFeedback.blockReason has no candidates: it decodes to no parts and
// Finish content_filter.
func DecodeResponse(body []byte) (*ir.Response, error) {
	var w respBody
	if err := json.Unmarshal(body, &w); err != nil {
		return nil, fmt.Errorf("gemini: response body: %w", err)
	}
	if !isNull(w.Error) {
		return nil, fmt.Errorf("%w: %s", errErrorBody, bytes.TrimSpace(w.Error))
	}
	r := &ir.Response{ID: w.ResponseID, Model: w.ModelVersion, Parts: []ir.Part{}, Finish: ir.FinishStop}
	if w.UsageMetadata != nil {
		r.Usage = decodeUsage(w.UsageMetadata)
	}
	if len(w.Candidates) == 0 {
		if w.PromptFeedback != nil && w.PromptFeedback.BlockReason != "" {
			r.Finish = ir.FinishContentFilter
		}
		return r, nil
	}
	c := firstCandidate(w.Candidates, false)
	scope := idScope(w.ResponseID, body)
	calls := 0
	if c.Content != nil {
		for _, p := range c.Content.Parts {
			part, ok := responsePart(p, scope, &calls)
			if ok {
				r.Parts = append(r.Parts, part)
			}
		}
	}
	r.Finish = decodeFinish(c.FinishReason, calls > 0)
	return r, nil
}

// idScope is the scope of generated call ids: the responseId, or, when a
// Gemini-compatible server sends none, a hash of the response, so that ids
// still differ between responses (two turns with the same id would break
// the other vendors' pairing of calls and results).
func idScope(responseID string, body []byte) string {
	if responseID != "" {
		return responseID
	}
	h := fnv.New64a()
	h.Write(body)
	return "h" + strconv.FormatUint(h.Sum64(), 36)
}

// responsePart decodes one part of a candidate; ok is false for a part the
// IR has no place for. calls counts the function calls so far.
func responsePart(p respPart, scope string, calls *int) (ir.Part, bool) {
	switch {
	case p.FunctionCall != nil:
		id := p.FunctionCall.ID
		if id == "" {
			id = ir.GeneratedToolID(scope, *calls)
		}
		*calls++
		return ir.Part{Kind: ir.PartToolCall, ToolCall: &ir.ToolCall{
			ID:               id,
			Name:             p.FunctionCall.Name,
			Arguments:        argsObject(p.FunctionCall.Args),
			ThoughtSignature: p.ThoughtSignature,
		}}, true
	case p.InlineData != nil:
		return ir.Part{Kind: mediaKind(p.InlineData.MimeType), Media: &ir.Media{MediaType: p.InlineData.MimeType, Data: p.InlineData.Data}}, true
	case p.FileData != nil:
		return ir.Part{Kind: mediaKind(p.FileData.MimeType), Media: &ir.Media{MediaType: p.FileData.MimeType, URL: p.FileData.FileURI}}, true
	case p.Text == "":
		// Gemini 3 may send a part that is only a thoughtSignature; the
		// IR keeps signatures only on function calls, which Gemini
		// requires back (docs/vendors.md#thought-signatures).
		return ir.Part{}, false
	case p.Thought:
		return ir.Part{Kind: ir.PartThinking, Text: p.Text}, true
	}
	return ir.Part{Kind: ir.PartText, Text: p.Text}, true
}

// decodeFinish maps a candidate's finishReason (docs/vendors.md#finish-reasons). A turn
// with function calls ends as tool_calls whatever Gemini says short of a
// length or safety stop, since Gemini reports STOP for them.
func decodeFinish(reason string, sawCall bool) ir.FinishReason {
	switch reason {
	case "MAX_TOKENS":
		return ir.FinishLength
	case "SAFETY", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY",
		"RECITATION", "LANGUAGE", "OTHER", "IMAGE_PROHIBITED_CONTENT",
		"IMAGE_RECITATION", "IMAGE_OTHER", "MODEL_ARMOR", "JAILBREAK":
		return ir.FinishContentFilter
	}
	// STOP, MALFORMED_FUNCTION_CALL, UNEXPECTED_TOOL_CALL,
	// FINISH_REASON_UNSPECIFIED and whatever comes next.
	if sawCall {
		return ir.FinishToolCalls
	}
	return ir.FinishStop
}

// encodeFinish maps the IR's finish reason onto Gemini's.
func encodeFinish(f ir.FinishReason) string {
	switch f {
	case ir.FinishLength:
		return "MAX_TOKENS"
	case ir.FinishContentFilter:
		return "SAFETY"
	}
	return "STOP" // stop, tool_calls and anything unknown
}

// decodeUsage maps usageMetadata (docs/vendors.md#usage): Gemini's prompt count
// includes cached tokens, like the IR's Input; thoughts are output tokens.
func decodeUsage(u *usageMetadata) ir.TokenUsage {
	return ir.TokenUsage{
		Input:       u.PromptTokenCount,
		CachedInput: u.CachedContentTokenCount,
		Output:      u.CandidatesTokenCount + u.ThoughtsTokenCount,
		Reasoning:   u.ThoughtsTokenCount,
	}
}

// encodeUsage is the inverse of decodeUsage.
func encodeUsage(u ir.TokenUsage) *outUsage {
	return &outUsage{
		PromptTokenCount:        u.Input,
		CandidatesTokenCount:    max(u.Output-u.Reasoning, 0),
		TotalTokenCount:         u.Input + u.Output,
		CachedContentTokenCount: u.CachedInput,
		ThoughtsTokenCount:      u.Reasoning,
	}
}

// EncodeResponse encodes r as the generateContent response a Gemini app
// expects: one candidate with the parts in order, finishReason, usage, and
// model as modelVersion (the model the app asked for, so that its SDK sees
// its own model name).
//
// Function calls keep their ids (Gemini 3 sends ids too, and go-genai
// chats send the call back as it came, so the app's next request pairs
// results with calls by id) and their thoughtSignature.
func EncodeResponse(r *ir.Response, model string) ([]byte, error) {
	parts := make([]outPart, 0, len(r.Parts))
	for _, p := range r.Parts {
		if part, ok := appPart(p); ok {
			parts = append(parts, part)
		}
	}
	return marshal(outResponse{
		Candidates: []outCandidate{{
			Content:      outContent{Role: "model", Parts: parts},
			FinishReason: encodeFinish(r.Finish),
		}},
		UsageMetadata: encodeUsage(r.Usage),
		ModelVersion:  model,
		ResponseID:    r.ID,
	})
}

// appPart encodes one part of an answer for a Gemini app; ok is false for
// parts an answer does not carry (tool results, empty text).
func appPart(p ir.Part) (outPart, bool) {
	switch p.Kind {
	case ir.PartText:
		return outPart{Text: p.Text}, p.Text != ""
	case ir.PartThinking:
		return outPart{Text: p.Text, Thought: true}, p.Text != ""
	case ir.PartToolCall:
		if p.ToolCall == nil {
			return outPart{}, false
		}
		args := compactObject(p.ToolCall.Arguments)
		if args == nil {
			args = emptyObject
		}
		out := outPart{FunctionCall: &wireFunctionCall{ID: p.ToolCall.ID, Name: p.ToolCall.Name, Args: args}}
		if validSignature(p.ToolCall.ThoughtSignature) {
			out.ThoughtSignature = p.ToolCall.ThoughtSignature
		}
		return out, true
	case ir.PartImage, ir.PartDocument:
		switch m := p.Media; {
		case m == nil:
		case m.Data != "":
			return outPart{InlineData: &outBlob{MimeType: m.MediaType, Data: m.Data}}, true
		case m.URL != "":
			return outPart{FileData: &outFileData{MimeType: m.MediaType, FileURI: m.URL}}, true
		}
	}
	return outPart{}, false
}
