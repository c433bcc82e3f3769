package devrun

import (
	"fmt"
	"strings"

	"github.com/detour-proxy/detour/policy"
	"github.com/detour-proxy/detour/rewrite"
)

// sdkBaseURL is an official SDK's base-URL variable and what detour sets it
// to, relative to its own listener. The SDKs append their own paths to the
// value: openai (Node, Python, Go) a path such as /chat/completions to a base
// that ends in /v1; the Anthropic SDKs /v1/messages to the bare host; Google's
// genai SDKs /v1beta/models/… to the bare host. detour's base-URL mode maps
// the first path segment back to the vendor host (proxy/server.go).
type sdkBaseURL struct {
	Name string // the variable
	Host string // the vendor host whose requests it carries
	Path string // appended to detour's listener URL
}

// sdkBaseURLs are the variables `detour run` sets. They reach runtimes that
// ignore HTTPS_PROXY (Node before 22.21, whose fetch never reads it) through
// the SDK alone, with no change to the app; a runtime that does honour the
// proxy gets there by the base URL too, which is the same chain.
var sdkBaseURLs = []sdkBaseURL{
	{"OPENAI_BASE_URL", rewrite.OpenAI.DefaultHost(), "/openai/v1"},
	{"ANTHROPIC_BASE_URL", rewrite.Anthropic.DefaultHost(), "/anthropic"},
	{"GOOGLE_GEMINI_BASE_URL", rewrite.Gemini.DefaultHost(), "/gemini"},
}

// baseURLs returns the base-URL variables to set for CMD, and one note per
// variable the user had already set. A variable is set only for a host the
// policy routes: for any other host detour is a tunnel it never decrypts,
// and pointing the SDK at detour's base URL would hand it the app's key and
// prompts in the clear for a vendor the policy does not govern. A value the
// user set (non-empty) is never replaced: it is where they want that SDK to
// go, and detour still sees those requests through HTTPS_PROXY when the
// runtime honours it.
func baseURLs(pol *policy.Compiled, proxyURL string, env []string) (set [][2]string, notes []string) {
	for _, b := range sdkBaseURLs {
		if !pol.Intercepts(b.Host) {
			continue
		}
		if prev := lookupEnv(env, b.Name); strings.TrimSpace(prev) != "" {
			notes = append(notes, fmt.Sprintf("%s is already set (%s): left as it is, so an SDK that reads it goes there, through HTTPS_PROXY only if its runtime honours it", b.Name, prev))
			continue
		}
		set = append(set, [2]string{b.Name, proxyURL + b.Path})
	}
	return set, notes
}
