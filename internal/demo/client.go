package demo

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// client is the demo's app: an OpenAI chat-completions client in plain
// net/http. It sends what openai-go sends (the same JSON body, the bearer
// key, the content type) and treats the answer the way openai-go does: a
// status other than 2xx is an error, a body that is not JSON is an error,
// and a stream is read event by event until [DONE] or its end, an event
// carrying an "error" member or one that is not JSON being an error. The
// package's tests hold it to the requests and answer verdicts recorded in
// testdata/openai_go.json, and internal/sdkcheck holds openai-go itself to
// the same file, so the demo's test binary need not link the SDK.
type client struct {
	baseURL string // ends in /
	apiKey  string
	http    *http.Client
}

// chatRequest is the body openai-go sends for the demo's question, with the
// members in the order it writes them.
type chatRequest struct {
	Messages []chatMessage `json:"messages"`
	Model    string        `json:"model"`
	Stream   bool          `json:"stream,omitempty"`
}

type chatMessage struct {
	Content string `json:"content"`
	Role    string `json:"role"`
}

// ask sends one chat completion, streamed or not, and reads the whole answer.
func (c *client) ask(ctx context.Context, stream bool) error {
	body, err := json.Marshal(chatRequest{
		Messages: []chatMessage{{Content: "Say hello.", Role: "user"}},
		Model:    "gpt-4o",
		Stream:   stream,
	})
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.baseURL+"chat/completions", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.apiKey)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		return fmt.Errorf("POST %s: %s: %s", req.URL, resp.Status, bytes.TrimSpace(b))
	}
	if !stream {
		var completion struct {
			Choices []json.RawMessage `json:"choices"`
		}
		return json.NewDecoder(resp.Body).Decode(&completion)
	}
	return readStream(resp.Body)
}

// readStream reads a chat-completions event stream to its end.
func readStream(r io.Reader) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	var data []string
	event := func() (done bool, err error) {
		if len(data) == 0 {
			return false, nil
		}
		d := strings.Join(data, "\n")
		data = data[:0]
		if strings.HasPrefix(d, "[DONE]") {
			return true, nil
		}
		var chunk map[string]json.RawMessage
		if err := json.Unmarshal([]byte(d), &chunk); err != nil {
			return false, fmt.Errorf("stream event: %w", err)
		}
		if e, ok := chunk["error"]; ok {
			return false, fmt.Errorf("received error while streaming: %s", e)
		}
		return false, nil
	}
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			if done, err := event(); done || err != nil {
				return err
			}
			continue
		}
		if v, ok := strings.CutPrefix(line, "data:"); ok {
			data = append(data, strings.TrimPrefix(v, " "))
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if _, err := event(); err != nil {
		return err
	}
	return nil
}
