package ir

import (
	"encoding/base64"
	"fmt"
	"regexp"
	"strings"
)

// anthropicID is the charset Anthropic accepts for tool_use ids
// (docs/vendors.md#tool-ids, bifrost #5097).
var anthropicID = regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)

// safePrefix marks an id that SafeToolID had to encode.
const safePrefix = "dtr_"

// SafeToolID returns id unchanged when it fits Anthropic's id charset, else
// a reversible encoding that does ("dtr_" + unpadded base64url, whose
// alphabet is exactly [A-Za-z0-9_-]). Reversible without state, so a tool
// result sent back in a later request maps to the same id.
func SafeToolID(id string) string {
	if anthropicID.MatchString(id) && !strings.HasPrefix(id, safePrefix) {
		return id
	}
	return safePrefix + base64.RawURLEncoding.EncodeToString([]byte(id))
}

// OriginalToolID reverses SafeToolID.
func OriginalToolID(id string) string {
	if !strings.HasPrefix(id, safePrefix) {
		return id
	}
	b, err := base64.RawURLEncoding.DecodeString(id[len(safePrefix):])
	if err != nil {
		return id
	}
	return string(b)
}

// GeneratedToolID makes a stable id for a tool call that came without one
// (Gemini before version 3): the same response decodes to the same ids, so
// a retry or a later turn that echoes them matches.
func GeneratedToolID(scope string, n int) string {
	if scope == "" {
		scope = "x"
	}
	return fmt.Sprintf("call_%s_%d", SafeToolID(scope), n)
}
