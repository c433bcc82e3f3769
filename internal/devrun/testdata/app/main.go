// Command app is an unmodified OpenAI app for the `detour run` tests: it
// configures nothing. The key comes from OPENAI_API_KEY (openai-go reads
// it), the proxy from HTTPS_PROXY and the trust from SSL_CERT_FILE (Go's
// standard transport and crypto/x509 read them), exactly as in any Go
// program that calls OpenAI.
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/openai/openai-go/v3"
)

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
