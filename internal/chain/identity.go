package chain

// identityHeaders name the app's account rather than prove it: its
// organization, project, workspace, quota project, or a session cookie. They
// travel with the app's own credential and nowhere else — to an upstream
// with auth "client" (which is always of the app's shape), and untouched on
// passthrough, where the request goes to the vendor the app addressed. Every
// other upstream (detour's own key, no key, another vendor) never sees them,
// for two reasons:
//
//   - sent beside another key they make the vendor refuse the request:
//     OpenAI answers 401 mismatched_organization to an OpenAI-Organization
//     the key does not belong to, and Anthropic requires
//     anthropic-workspace-id to match the key's workspace;
//   - they tell a third party who the app is, and a cookie can be a login
//     session to the app's own gateway.
//
// The SDKs send them: openai-go WithOrganization / WithProject; anthropic-sdk-go
// the WorkspaceID and UserProfileID request fields; go-genai
// X-Goog-User-Project for a credential's quota project. Canonical names.
var identityHeaders = []string{
	"Cookie",
	"Openai-Organization", "Openai-Project",
	"Anthropic-Workspace-Id", "Anthropic-User-Profile-Id",
	"X-Goog-User-Project",
}
