package responses

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/detour-proxy/detour/rewrite/ir"
)

// DecodeResponse decodes an upstream's whole Responses answer into the IR:
// message text (output_text and refusal) as text, function_call items as
// tool calls, reasoning summaries as thinking; status "incomplete" as the
// finish its reason names. A "failed" response is an error.
func DecodeResponse(body []byte) (*ir.Response, error) {
	var in responseIn
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, fmt.Errorf("responses: response: %w", err)
	}
	if in.Status == "failed" {
		msg := "response failed"
		if in.Error != nil && in.Error.Message != "" {
			msg = in.Error.Message
		}
		return nil, errors.New("responses: " + msg)
	}
	r := &ir.Response{ID: in.ID, Model: in.Model, Created: int64(in.CreatedAt)}
	tools := false
	for i := range in.Output {
		it := &in.Output[i]
		switch it.Type {
		case "message":
			for _, c := range it.Content {
				switch c.Type {
				case "output_text":
					r.Parts = append(r.Parts, ir.Part{Kind: ir.PartText, Text: c.Text})
				case "refusal":
					r.Parts = append(r.Parts, ir.Part{Kind: ir.PartText, Text: c.Refusal})
				}
			}
		case "function_call":
			tools = true
			r.Parts = append(r.Parts, ir.Part{Kind: ir.PartToolCall, ToolCall: &ir.ToolCall{ID: it.CallID, Name: it.Name, Arguments: argumentsObject(it.Arguments)}})
		case "reasoning":
			var b strings.Builder
			for _, s := range it.Summary {
				b.WriteString(s.Text)
			}
			if b.Len() > 0 {
				r.Parts = append(r.Parts, ir.Part{Kind: ir.PartThinking, Text: b.String()})
			}
		}
	}
	r.Finish = finishOf(in.Status, in.IncompleteDetails, tools)
	if in.Usage != nil {
		r.Usage = usageOf(in.Usage)
	}
	return r, nil
}

// argumentsObject parses a function call's argument string; anything but
// a JSON object becomes {} (the IR's rule for tool arguments).
func argumentsObject(s string) json.RawMessage {
	b := bytes.TrimSpace([]byte(s))
	if len(b) == 0 || b[0] != '{' || !json.Valid(b) {
		return json.RawMessage("{}")
	}
	return b
}

// finishOf maps a response's status onto the IR's finish reasons.
func finishOf(status string, d *incompleteDetails, tools bool) ir.FinishReason {
	if status == "incomplete" && d != nil {
		switch d.Reason {
		case "max_output_tokens":
			return ir.FinishLength
		case "content_filter":
			return ir.FinishContentFilter
		}
	}
	if tools {
		return ir.FinishToolCalls
	}
	return ir.FinishStop
}

// usageOf maps the Responses usage object onto the IR's.
func usageOf(u *usageWire) ir.TokenUsage {
	return ir.TokenUsage{
		Input:       u.InputTokens,
		Output:      u.OutputTokens,
		CachedInput: u.InputTokensDetails.CachedTokens,
		Reasoning:   u.OutputTokensDetails.ReasoningTokens,
	}
}

// EncodeResponse encodes r as the response object an app's SDK reads from
// POST /v1/responses, for the model the app asked for. Text parts become
// one assistant message item (its output_text parts in order), each tool
// call a function_call item; thinking is left out, since the Responses API
// shows reasoning only as OpenAI's own encrypted items. A length or
// content-filter finish is status "incomplete" with its reason.
func EncodeResponse(r *ir.Response, model string) ([]byte, error) {
	if model == "" {
		model = r.Model
	}
	created := r.Created
	if created == 0 {
		created = time.Now().Unix()
	}
	a := newAssembly(r.ID)
	for _, p := range r.Parts {
		switch p.Kind {
		case ir.PartText:
			a.text(p.Text)
		case ir.PartToolCall:
			a.endMessage()
			a.call(p.ToolCall.ID, p.ToolCall.Name, string(argsOrEmpty(p.ToolCall.Arguments)))
		}
	}
	a.endMessage()
	return a.responseObject(nil, model, created, statusOf(r.Finish), r.Finish, r.Usage, true, nil), nil
}

// statusOf is the response status of a finish reason.
func statusOf(f ir.FinishReason) string {
	if f == ir.FinishLength || f == ir.FinishContentFilter {
		return "incomplete"
	}
	return "completed"
}
