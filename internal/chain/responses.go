package chain

import (
	"github.com/detour-proxy/detour/policy"
	"github.com/detour-proxy/detour/rewrite"
	"github.com/detour-proxy/detour/rewrite/sse"
)

// wire is the shape of the upstream's answer bytes: the upstream's own when
// the attempt translates, else the app's. The two differ on the
// untranslated path only for a Responses request sent to an OpenAI
// upstream, which answers in the Responses API's events, not in chat
// chunks (rewrite.SameWire).
func (a *attempt) wire() rewrite.Shape {
	if a.conv == nil {
		return a.s.app
	}
	return a.u.Shape
}

// endsResponses reports whether ev ends a Responses stream, which has no
// terminator of its own: response.completed and response.incomplete
// (response.failed is an error event and ends it as one).
func endsResponses(ev sse.Event) bool {
	return ev.Name == "response.completed" || ev.Name == "response.incomplete"
}

// sameWire reports whether u takes the app's request untranslated: a
// Responses request goes as it is to an openai upstream unless the policy
// says it has only Chat Completions (chat_only).
func (s *session) sameWire(u *policy.Upstream) bool {
	if s.app == rewrite.OpenAIResponses && u.ChatOnly {
		return false
	}
	return rewrite.SameWire(s.app, u.Shape)
}
