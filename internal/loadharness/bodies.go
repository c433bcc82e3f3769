package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"
)

// bodies measures what buffering large request bodies costs: N concurrent
// requests of size bytes each, through base-URL mode to a sink that reads
// every body whole. It prints the answers' statuses and the child's peak
// RSS (VmHWM).
func bodies(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bodies", flag.ContinueOnError)
	fs.SetOutput(stderr)
	n := fs.Int("n", 16, "concurrent requests")
	size := fs.Int("size", 30_000_000, "bytes of each request body")
	chunked := fs.Bool("chunked", false, "send the bodies chunked (no Content-Length)")
	retry := fs.Bool("retry", false, "retry a 503 after its retry-after, as the SDKs do, until every request is answered")
	extra := fs.String("policy-extra", "", `extra top-level policy members, e.g. '"limits": {"buffered_bytes": 67108864},'`)
	cpu := fs.String("cpu", "", "pin detour to this CPU list with taskset (e.g. 1); empty: not pinned")
	bin := fs.String("detour", "", "detour binary to measure; empty: go build the module's main package")
	if err := fs.Parse(args); err != nil {
		return err
	}

	dir, err := os.MkdirTemp("", "detour-loadharness-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if *bin, err = detourBinary(*bin, dir, stderr); err != nil {
		return err
	}

	// The sink reads every body whole and answers a minimal completion.
	sink := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"x","object":"chat.completion","created":1,"model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`)
	})}
	sinkLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	go func() { _ = sink.Serve(sinkLn) }()
	defer sink.Close()

	pol := fmt.Sprintf(`{"listen": "127.0.0.1:0", "admin_listen": "127.0.0.1:0", %s
  "ca": {"cert_file": "ca.pem", "key_file": "ca-key.pem"},
  "upstreams": {"sink": {"shape": "openai", "base_url": "http://%s/v1", "auth": {"none": true}}},
  "routes": [{"name": "chat", "match": {"host": "api.openai.com", "path": "/v1/chat/completions"}, "chain": ["sink"]}]}`, *extra, sinkLn.Addr())
	polPath := filepath.Join(dir, "policy.json")
	if err := os.WriteFile(polPath, []byte(pol), 0o644); err != nil {
		return err
	}
	child, err := startDetour(*bin, polPath, *cpu, stderr)
	if err != nil {
		return err
	}
	defer child.stop()
	idle, err := child.sample()
	if err != nil {
		return err
	}

	body := make([]byte, 0, *size)
	body = append(body, `{"model":"gpt-4o","messages":[{"role":"user","content":"`...)
	tail := `"}]}`
	body = append(body, bytes.Repeat([]byte("a"), *size-len(body)-len(tail))...)
	body = append(body, tail...)

	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	url := "http://" + child.listen + "/openai/v1/chat/completions"
	var wg sync.WaitGroup
	var mu sync.Mutex
	statuses := map[string]int{}
	start := time.Now()
	for i := 0; i < *n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for tries := 0; ; tries++ {
				var rd io.Reader = bytes.NewReader(body)
				if *chunked {
					// Hiding the length makes the client send it chunked.
					rd = io.MultiReader(rd)
				}
				req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, url, rd)
				req.Header.Set("Content-Type", "application/json")
				resp, err := client.Do(req)
				key, again := "", false
				if err != nil {
					key = "error: " + err.Error()
				} else {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					key = resp.Status
					again = resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get("Retry-After") != ""
				}
				mu.Lock()
				statuses[key]++
				mu.Unlock()
				if !*retry || !again || tries == 60 {
					return
				}
				time.Sleep(time.Second) // the answer's retry-after: 1, as an SDK waits it
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	peak, err := child.sample()
	if err != nil {
		return err
	}
	keys := make([]string, 0, len(statuses))
	for k := range statuses {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	mode := "Content-Length"
	if *chunked {
		mode = "chunked"
	}
	fmt.Fprintf(stdout, "%d concurrent bodies of %d bytes (%s) in %s\n", *n, *size, mode, elapsed.Round(time.Millisecond))
	for _, k := range keys {
		fmt.Fprintf(stdout, "  %3d × %s\n", statuses[k], k)
	}
	fmt.Fprintf(stdout, "peak RSS (VmHWM): %.0f MiB (%.0f MiB at idle)\n", peak.hwmMiB, idle.hwmMiB)
	return nil
}
