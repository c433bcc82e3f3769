package ir

import (
	"strings"
	"unicode/utf8"
)

// PromptStats describes the request's prompt for logs and policy, without
// any vendor's tokenizer:
//
//   - lastUser is the text of the latest user turn that has text, its text
//     parts joined with "\n". A user turn holding only tool results
//     (Anthropic and Gemini send results as user turns) is not what the
//     user said, so it is passed over for the one before it; "" when no
//     user turn has text.
//   - inputChars counts the runes of all input text: the system prompts,
//     every message's text parts (the assistant's earlier answers too: they
//     go to the model again) and the tool results' content. Thinking,
//     tool-call arguments and tool declarations are left out: they are not
//     prose anyone wrote, and vendors count them differently.
//   - files counts the media parts of the whole request: images and
//     documents (PDFs, audio and other files all decode to PartDocument).
func (r *Request) PromptStats() (lastUser string, inputChars, files int) {
	if r == nil {
		return "", 0, 0
	}
	for _, s := range r.System {
		inputChars += utf8.RuneCountInString(s)
	}
	last := -1
	for i := range r.Messages {
		m := &r.Messages[i]
		hasText := false
		for j := range m.Parts {
			p := &m.Parts[j]
			switch p.Kind {
			case PartText:
				inputChars += utf8.RuneCountInString(p.Text)
				hasText = hasText || p.Text != ""
			case PartToolResult:
				if p.ToolResult != nil {
					inputChars += utf8.RuneCountInString(p.ToolResult.Content)
				}
			case PartImage, PartDocument:
				files++
			}
		}
		if m.Role == RoleUser && hasText {
			last = i
		}
	}
	if last < 0 {
		return "", inputChars, files
	}
	var b strings.Builder
	for _, p := range r.Messages[last].Parts {
		if p.Kind != PartText || p.Text == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(p.Text)
	}
	return b.String(), inputChars, files
}
