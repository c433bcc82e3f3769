// Command app is an unmodified OpenAI app for the `detour run` tests: it
// configures nothing. The key comes from OPENAI_API_KEY and the way to
// detour from OPENAI_BASE_URL (openai-go reads both; without the base URL,
// HTTPS_PROXY and SSL_CERT_FILE, which Go's standard transport and
// crypto/x509 read), exactly as in any Go program that calls OpenAI.
//
// The tests build it once into a file kept between runs (appCommand in
// internal/devrun/openaiapp_test.go): their race test binary links no
// openai-go.
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/openai/openai-go/v3"
)

// main asks for one chat completion and prints the answer.
func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := openai.NewClient()
	resp, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model:    "gpt-4o",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Say hello.")},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "app:", err)
		os.Exit(1)
	}
	fmt.Println(resp.Choices[0].Message.Content)
}
