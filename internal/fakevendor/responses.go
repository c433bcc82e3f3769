package fakevendor

import (
	"encoding/json"
	"strconv"

	"github.com/detour-proxy/detour/rewrite"
)

// OpenAI Responses API wire types (POST /v1/responses), in the field order
// of docs/vendors.md#openai-responses and
// docs/vendors.md#openai-responses-stream.
type (
	responsesObject struct {
		ID                string          `json:"id"`
		Object            string          `json:"object"`
		CreatedAt         int64           `json:"created_at"`
		Status            string          `json:"status"`
		Background        bool            `json:"background"`
		Error             json.RawMessage `json:"error"`
		IncompleteDetails json.RawMessage `json:"incomplete_details"`
		Instructions      json.RawMessage `json:"instructions"`
		MaxOutputTokens   json.RawMessage `json:"max_output_tokens"`
		Model             string          `json:"model"`
		Output            []any           `json:"output"`
		ParallelToolCalls bool            `json:"parallel_tool_calls"`
		PreviousResponse  json.RawMessage `json:"previous_response_id"`
		Reasoning         json.RawMessage `json:"reasoning"`
		Store             bool            `json:"store"`
		Temperature       float64         `json:"temperature"`
		Text              json.RawMessage `json:"text"`
		ToolChoice        string          `json:"tool_choice"`
		Tools             []any           `json:"tools"`
		TopP              float64         `json:"top_p"`
		Truncation        string          `json:"truncation"`
		Usage             json.RawMessage `json:"usage"`
		User              json.RawMessage `json:"user"`
		Metadata          struct{}        `json:"metadata"`
	}
	responsesMessage struct {
		ID      string                `json:"id"`
		Type    string                `json:"type"`
		Status  string                `json:"status"`
		Role    string                `json:"role"`
		Content []responsesOutputText `json:"content"`
	}
	responsesOutputText struct {
		Type        string `json:"type"`
		Text        string `json:"text"`
		Annotations []any  `json:"annotations"`
	}
	responsesFunctionCall struct {
		Type      string `json:"type"`
		ID        string `json:"id"`
		CallID    string `json:"call_id"`
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
		Status    string `json:"status"`
	}
	responsesUsage struct {
		InputTokens        int `json:"input_tokens"`
		InputTokensDetails struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"input_tokens_details"`
		OutputTokens        int `json:"output_tokens"`
		OutputTokensDetails struct {
			ReasoningTokens int `json:"reasoning_tokens"`
		} `json:"output_tokens_details"`
		TotalTokens int `json:"total_tokens"`
	}
	// responsesEvent is a stream event; only the members of its type are
	// set (omitempty), type and sequence_number first as OpenAI sends them.
	responsesEvent struct {
		Type           string `json:"type"`
		SequenceNumber int    `json:"sequence_number"`
		Response       any    `json:"response,omitempty"`
		ItemID         string `json:"item_id,omitempty"`
		OutputIndex    *int   `json:"output_index,omitempty"`
		ContentIndex   *int   `json:"content_index,omitempty"`
		Item           any    `json:"item,omitempty"`
		Part           any    `json:"part,omitempty"`
		Delta          string `json:"delta,omitempty"`
		Text           string `json:"text,omitempty"`
		Name           string `json:"name,omitempty"`
		Arguments      string `json:"arguments,omitempty"`
	}
	// responsesErrorEvent is the stream's error event.
	responsesErrorEvent struct {
		Type           string  `json:"type"`
		SequenceNumber int     `json:"sequence_number"`
		Code           *string `json:"code"`
		Message        string  `json:"message"`
		Param          *string `json:"param"`
	}
)

// responsesID is the response id of call c.
func responsesID(c call) string { return "resp_fake" + pad(c.n) }

// responsesItemID is the id of output item i of call c: msg_… or fc_….
func responsesItemID(prefix string, c call, i int) string {
	return prefix + "fake" + pad(c.n) + "_" + strconv.Itoa(i)
}

// responsesOutput is c's output items, with their statuses as in the
// final response.
func responsesOutput(c call) []any {
	if len(c.plan.calls) == 0 {
		return []any{responsesMessage{
			ID: responsesItemID("msg_", c, 0), Type: "message", Status: "completed", Role: "assistant",
			Content: []responsesOutputText{{Type: "output_text", Text: c.plan.text, Annotations: []any{}}},
		}}
	}
	out := make([]any, len(c.plan.calls))
	for i, tc := range c.plan.calls {
		out[i] = responsesFunctionCall{Type: "function_call", ID: responsesItemID("fc_", c, i), CallID: tc.ID, Name: tc.Name, Arguments: tc.Arguments, Status: "completed"}
	}
	return out
}

// responsesObjectFor is the response object of c in the given status;
// in_progress has no output and no usage yet.
func (v *Vendor) responsesObjectFor(c call, status string, created int64) responsesObject {
	o := responsesObject{
		ID: responsesID(c), Object: "response", CreatedAt: created, Status: status,
		Error: json.RawMessage("null"), IncompleteDetails: json.RawMessage("null"),
		Instructions: json.RawMessage("null"), MaxOutputTokens: json.RawMessage("null"),
		Model: c.model, Output: []any{}, ParallelToolCalls: true, PreviousResponse: json.RawMessage("null"),
		Reasoning: json.RawMessage(`{"effort":null,"summary":null}`), Store: true, Temperature: 1, Text: json.RawMessage(`{"format":{"type":"text"}}`),
		ToolChoice: "auto", Tools: []any{}, TopP: 1, Truncation: "disabled", Usage: json.RawMessage("null"), User: json.RawMessage("null"),
	}
	if status == "completed" {
		out := c.plan.outputTokens()
		o.Output = responsesOutput(c)
		o.Usage = marshal(responsesUsage{InputTokens: c.promptTokens, OutputTokens: out, TotalTokens: c.promptTokens + out})
	}
	return o
}

// responsesBody is the whole response answering c.
func (v *Vendor) responsesBody(c call) []byte {
	return marshal(v.responsesObjectFor(c, "completed", v.now().Unix()))
}

// responsesScript is the Responses event stream answering c, each event's
// `event:` line its type: response.created and response.in_progress;
// for text, the message's output_item.added and content_part.added, one
// output_text.delta per piece, then output_text.done, content_part.done and
// output_item.done; for tool calls, each call's output_item.added, its
// function_call_arguments.delta fragments, .done and output_item.done; and
// response.completed. The in-stream error is an `error` event, numbered as
// if it came in the middle of the deltas.
func (v *Vendor) responsesScript(c call, errClass string) script {
	created := v.now().Unix()
	seq := 0
	ev := func(e responsesEvent) event {
		e.SequenceNumber = seq
		seq++
		return event{name: e.Type, data: marshal(e)}
	}
	idx := func(i int) *int { return &i }
	var s script
	s.open = []event{
		ev(responsesEvent{Type: "response.created", Response: v.responsesObjectFor(c, "in_progress", created)}),
		ev(responsesEvent{Type: "response.in_progress", Response: v.responsesObjectFor(c, "in_progress", created)}),
	}
	final := responsesOutput(c)
	if len(c.plan.calls) == 0 {
		id := responsesItemID("msg_", c, 0)
		s.lead = []event{
			ev(responsesEvent{Type: "response.output_item.added", OutputIndex: idx(0), Item: responsesMessage{ID: id, Type: "message", Status: "in_progress", Role: "assistant", Content: []responsesOutputText{}}}),
			ev(responsesEvent{Type: "response.content_part.added", ItemID: id, OutputIndex: idx(0), ContentIndex: idx(0), Part: responsesOutputText{Type: "output_text", Text: "", Annotations: []any{}}}),
		}
		for _, p := range c.plan.pieces {
			s.deltas = append(s.deltas, ev(responsesEvent{Type: "response.output_text.delta", ItemID: id, OutputIndex: idx(0), ContentIndex: idx(0), Delta: p}))
		}
		failSeq := len(s.open) + len(s.lead) + s.cut()
		s.close = []event{
			ev(responsesEvent{Type: "response.output_text.done", ItemID: id, OutputIndex: idx(0), ContentIndex: idx(0), Text: c.plan.text}),
			ev(responsesEvent{Type: "response.content_part.done", ItemID: id, OutputIndex: idx(0), ContentIndex: idx(0), Part: responsesOutputText{Type: "output_text", Text: c.plan.text, Annotations: []any{}}}),
			ev(responsesEvent{Type: "response.output_item.done", OutputIndex: idx(0), Item: final[0]}),
		}
		s.fail = responsesFail(errClass, c.model, failSeq, v)
	} else {
		for i, tc := range c.plan.calls {
			id := responsesItemID("fc_", c, i)
			added := ev(responsesEvent{Type: "response.output_item.added", OutputIndex: idx(i), Item: responsesFunctionCall{Type: "function_call", ID: id, CallID: tc.ID, Name: tc.Name, Arguments: "", Status: "in_progress"}})
			if i == 0 {
				s.lead = append(s.lead, added)
			} else {
				s.deltas = append(s.deltas, added)
			}
			for _, frag := range splitArgs(tc.Arguments) {
				s.deltas = append(s.deltas, ev(responsesEvent{Type: "response.function_call_arguments.delta", ItemID: id, OutputIndex: idx(i), Delta: frag}))
			}
			done := []event{
				ev(responsesEvent{Type: "response.function_call_arguments.done", ItemID: id, OutputIndex: idx(i), Name: tc.Name, Arguments: tc.Arguments}),
				ev(responsesEvent{Type: "response.output_item.done", OutputIndex: idx(i), Item: final[i]}),
			}
			if i == len(c.plan.calls)-1 {
				s.close = append(s.close, done...)
			} else {
				s.deltas = append(s.deltas, done...)
			}
		}
		s.fail = responsesFail(errClass, c.model, len(s.open)+len(s.lead)+s.cut(), v)
	}
	s.close = append(s.close, ev(responsesEvent{Type: "response.completed", Response: v.responsesObjectFor(c, "completed", created)}))
	return s
}

// responsesFail is the stream's error event for class: the code and message
// of the OpenAI error for that class.
func responsesFail(class, model string, seq int, v *Vendor) event {
	_, body := errorBody(rewrite.OpenAIResponses, Fault{Class: class}, model, "", v.now())
	var e openaiErrorBody
	_ = json.Unmarshal(body, &e)
	code := e.Error.Code
	if code == nil {
		code = ptr(e.Error.Type)
	}
	return event{name: "error", data: marshal(responsesErrorEvent{Type: "error", SequenceNumber: seq, Code: code, Message: e.Error.Message})}
}

// parseResponsesTools reads tools[] (function tools), tool_choice,
// parallel_tool_calls and the trailing function_call_output items of
// input.
func parseResponsesTools(body []byte) toolRequest {
	var req struct {
		Tools []struct {
			Type       string          `json:"type"`
			Name       string          `json:"name"`
			Parameters json.RawMessage `json:"parameters"`
		} `json:"tools"`
		ToolChoice        json.RawMessage `json:"tool_choice"`
		ParallelToolCalls *bool           `json:"parallel_tool_calls"`
		Input             json.RawMessage `json:"input"`
	}
	_ = json.Unmarshal(body, &req)
	var tr toolRequest
	for _, t := range req.Tools {
		if t.Type == "function" && t.Name != "" {
			tr.tools = append(tr.tools, toolDecl{name: t.Name, schema: t.Parameters})
		}
	}
	var mode string
	var named struct {
		Type string `json:"type"`
		Name string `json:"name"`
	}
	switch {
	case json.Unmarshal(req.ToolChoice, &mode) == nil:
		tr.choice = mode
	case json.Unmarshal(req.ToolChoice, &named) == nil && named.Name != "":
		tr.choice = named.Name
		tr.allowed = []string{named.Name}
	case len(req.ToolChoice) > 0 && string(req.ToolChoice) != "null":
		tr.choice = "auto"
	}
	tr.noParallel = req.ParallelToolCalls != nil && !*req.ParallelToolCalls
	var items []struct {
		Type   string          `json:"type"`
		CallID string          `json:"call_id"`
		Name   string          `json:"name"`
		Output json.RawMessage `json:"output"`
	}
	if json.Unmarshal(req.Input, &items) != nil {
		return tr
	}
	names := map[string]string{}
	for _, it := range items {
		if it.Type == "function_call" {
			names[it.CallID] = it.Name
		}
	}
	first := len(items)
	for first > 0 && items[first-1].Type == "function_call_output" {
		first--
	}
	for _, it := range items[first:] {
		tr.results = append(tr.results, ToolResult{ID: it.CallID, Name: names[it.CallID], Content: responsesOutputContent(it.Output)})
	}
	return tr
}

// responsesOutputContent is a function_call_output's text: the string, or
// its input_text parts concatenated.
func responsesOutputContent(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	_ = json.Unmarshal(raw, &parts)
	out := ""
	for _, p := range parts {
		if p.Type == "input_text" {
			out += p.Text
		}
	}
	return out
}
