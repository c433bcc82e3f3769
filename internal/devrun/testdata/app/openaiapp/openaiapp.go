// Package openaiapp is the body of an unmodified OpenAI app for the
// `detour run` tests: it configures nothing. The key comes from
// OPENAI_API_KEY and the way to detour from OPENAI_BASE_URL (openai-go
// reads both; without the base URL, HTTPS_PROXY and SSL_CERT_FILE, which
// Go's standard transport and crypto/x509 read), exactly as in any Go
// program that calls OpenAI.
//
// It is a package rather than only a main so that the devrun test binary
// can run it as its own child (TestMain re-execs the test binary with an
// environment variable set): one openai-go program is linked per test run
// instead of two. testdata/app is the same app as a standalone command.
package openaiapp

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/openai/openai-go/v3"
)

// Main asks for one chat completion and prints the answer; it returns the
// process's exit code.
func Main() int {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := openai.NewClient()
	resp, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model:    "gpt-4o",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Say hello.")},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "app:", err)
		return 1
	}
	fmt.Println(resp.Choices[0].Message.Content)
	return 0
}
