// Command app is an unmodified OpenAI app for the `detour run` tests: it
// configures nothing (see package openaiapp, which holds its body; the
// devrun tests run that body as a re-exec of their own test binary).
package main

import (
	"os"

	"github.com/detour-proxy/detour/internal/devrun/testdata/app/openaiapp"
)

func main() {
	os.Exit(openaiapp.Main())
}
