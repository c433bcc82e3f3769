package ir

import "testing"

func TestPromptStats(t *testing.T) {
	text := func(s string) Part { return Part{Kind: PartText, Text: s} }
	image := Part{Kind: PartImage, Media: &Media{MediaType: "image/png", Data: "iVBORw0KGgo="}}
	pdf := Part{Kind: PartDocument, Media: &Media{MediaType: "application/pdf", URL: "https://example.com/a.pdf"}}
	result := func(s string) Part {
		return Part{Kind: PartToolResult, ToolResult: &ToolResult{CallID: "c1", Content: s}}
	}
	call := Part{Kind: PartToolCall, ToolCall: &ToolCall{ID: "c1", Name: "get_weather", Arguments: []byte(`{"city":"Paris"}`)}}

	tests := []struct {
		name     string
		req      *Request
		lastUser string
		chars    int
		files    int
	}{
		{"nil request", nil, "", 0, 0},
		{"empty", &Request{}, "", 0, 0},
		{"system only", &Request{System: []string{"Be brief.", "Use °C."}}, "", 9 + 7, 0},
		{
			"one user turn, text parts joined",
			&Request{Messages: []Message{{Role: RoleUser, Parts: []Part{text("Hello"), image, text("what is this?")}}}},
			"Hello\nwhat is this?", 5 + 13, 1,
		},
		{
			"latest user turn wins; assistant text counts as input",
			&Request{
				System: []string{"sys"},
				Messages: []Message{
					{Role: RoleUser, Parts: []Part{text("first")}},
					{Role: RoleAssistant, Parts: []Part{text("reply")}},
					{Role: RoleUser, Parts: []Part{text("second")}},
				},
			},
			"second", 3 + 5 + 5 + 6, 0,
		},
		{
			"a tool-result-only user turn (Anthropic, Gemini) is passed over",
			&Request{Messages: []Message{
				{Role: RoleUser, Parts: []Part{text("Weather in Paris?")}},
				{Role: RoleAssistant, Parts: []Part{text("Checking."), call}},
				{Role: RoleUser, Parts: []Part{result(`{"temp":18}`)}},
			}},
			"Weather in Paris?", 17 + 9 + 11, 0,
		},
		{
			"an OpenAI tool message is not a user turn",
			&Request{Messages: []Message{
				{Role: RoleUser, Parts: []Part{text("Weather?")}},
				{Role: RoleAssistant, Parts: []Part{call}},
				{Role: RoleTool, Parts: []Part{result("sunny")}},
			}},
			"Weather?", 8 + 5, 0,
		},
		{
			"a user turn with results and text: the text",
			&Request{Messages: []Message{
				{Role: RoleUser, Parts: []Part{result("42"), text("thanks, and now?")}},
			}},
			"thanks, and now?", 2 + 16, 0,
		},
		{
			"empty text parts are not text",
			&Request{Messages: []Message{
				{Role: RoleUser, Parts: []Part{text("real")}},
				{Role: RoleUser, Parts: []Part{text(""), image}},
			}},
			"real", 4, 1,
		},
		{
			"empty text parts are not joined",
			&Request{Messages: []Message{{Role: RoleUser, Parts: []Part{text(""), text("a"), text(""), text("b")}}}},
			"a\nb", 2, 0,
		},
		{
			"runes, not bytes",
			&Request{System: []string{"日本語"}, Messages: []Message{{Role: RoleUser, Parts: []Part{text("héllo 👋")}}}},
			"héllo 👋", 3 + 7, 0,
		},
		{
			"files across the whole request; thinking and tool calls are not input text",
			&Request{Messages: []Message{
				{Role: RoleUser, Parts: []Part{image, pdf, text("compare")}},
				{Role: RoleAssistant, Parts: []Part{{Kind: PartThinking, Text: "hmm", Signature: "sig"}, call}},
				{Role: RoleUser, Parts: []Part{result("ok"), image, {Kind: PartDocument}}},
			}},
			"compare", 7 + 2, 4,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			last, chars, files := tt.req.PromptStats()
			if last != tt.lastUser || chars != tt.chars || files != tt.files {
				t.Errorf("PromptStats() = %q, %d, %d; want %q, %d, %d", last, chars, files, tt.lastUser, tt.chars, tt.files)
			}
		})
	}
}
