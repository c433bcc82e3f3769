//go:build ignore

// measure_bodyrss measures how much memory a detour process needs while it
// buffers large request bodies: it starts the given detour binary as a child
// process with a policy whose one upstream is a loopback sink, sends N
// concurrent requests of SIZE bytes each through base-URL mode, and prints
// the answers' statuses and the child's peak resident set size (VmHWM from
// /proc/PID/status). Linux only.
//
//	go build -o /tmp/detour . && go run ./proxy/measure_bodyrss.go -detour /tmp/detour -n 16 -size 30000000
//
// It is a measurement, not a test: the figures depend on the machine and the
// Go runtime, and are reported in the issue that asked for them.
package main

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"
)

func main() {
	bin := flag.String("detour", "", "detour binary to measure (required)")
	n := flag.Int("n", 16, "concurrent requests")
	size := flag.Int("size", 30_000_000, "bytes of each request body")
	chunked := flag.Bool("chunked", false, "send the bodies chunked (no Content-Length)")
	retry := flag.Bool("retry", false, "retry a 503 after its retry-after, as the SDKs do, until every request is answered")
	extra := flag.String("policy-extra", "", `extra top-level policy members, e.g. '"limits": {"buffered_bytes": 67108864},'`)
	flag.Parse()
	if *bin == "" {
		fmt.Fprintln(os.Stderr, "usage: go run ./proxy/measure_bodyrss.go -detour BINARY [-n 16] [-size 30000000] [-chunked]")
		os.Exit(2)
	}
	if err := run(*bin, *n, *size, *chunked, *retry, *extra); err != nil {
		fmt.Fprintln(os.Stderr, "measure_bodyrss:", err)
		os.Exit(1)
	}
}

func run(bin string, n, size int, chunked, retry bool, extra string) error {
	// The sink reads every body whole and answers a minimal completion.
	sink := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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

	// detour listens where the policy says; a port free a moment ago is
	// good enough for a measurement.
	probe, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	addr := probe.Addr().String()
	probe.Close()

	dir, err := os.MkdirTemp("", "bodyrss")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	pol := fmt.Sprintf(`{"listen": %q, "admin_listen": "off", %s
  "ca": {"cert_file": "ca.pem", "key_file": "ca-key.pem"},
  "upstreams": {"sink": {"shape": "openai", "base_url": "http://%s/v1", "auth": {"none": true}}},
  "routes": [{"name": "chat", "match": {"host": "api.openai.com", "path": "/v1/chat/completions"}, "chain": ["sink"]}],
  "log": {"level": "error"}}`, addr, extra, sinkLn.Addr())
	polPath := filepath.Join(dir, "policy.json")
	if err := os.WriteFile(polPath, []byte(pol), 0o644); err != nil {
		return err
	}
	cmd := exec.Command(bin, "serve", "--policy", polPath)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
	}()
	if err := waitListening(addr, 10*time.Second); err != nil {
		return err
	}
	idle, _ := vmHWM(cmd.Process.Pid)

	body := make([]byte, 0, size)
	body = append(body, `{"model":"gpt-4o","messages":[{"role":"user","content":"`...)
	tail := `"}]}`
	body = append(body, bytes.Repeat([]byte("a"), size-len(body)-len(tail))...)
	body = append(body, tail...)

	client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 0, DisableKeepAlives: true}}
	url := "http://" + addr + "/openai/v1/chat/completions"
	var wg sync.WaitGroup
	var mu sync.Mutex
	statuses := map[string]int{}
	start := time.Now()
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for tries := 0; ; tries++ {
				var rd io.Reader = bytes.NewReader(body)
				if chunked {
					// Hiding the length makes the client send it chunked.
					rd = io.MultiReader(rd)
				}
				req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, url, rd)
				req.Header.Set("Content-Type", "application/json")
				resp, err := client.Do(req)
				key := ""
				again := false
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
				if !retry || !again || tries == 60 {
					return
				}
				time.Sleep(time.Second)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	peak, err := vmHWM(cmd.Process.Pid)
	if err != nil {
		return err
	}
	keys := make([]string, 0, len(statuses))
	for k := range statuses {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	mode := "Content-Length"
	if chunked {
		mode = "chunked"
	}
	fmt.Printf("binary %s\n%d concurrent bodies of %d bytes (%s) in %s\n", bin, n, size, mode, elapsed.Round(time.Millisecond))
	for _, k := range keys {
		fmt.Printf("  %3d × %s\n", statuses[k], k)
	}
	fmt.Printf("peak RSS (VmHWM): %d MiB (%d MiB at idle)\n", peak>>20, idle>>20)
	return nil
}

func waitListening(addr string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
		if err == nil {
			c.Close()
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("detour did not listen on %s within %s", addr, within)
}

// vmHWM reads a process's peak resident set size, in bytes.
func vmHWM(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			var kb int64
			if _, err := fmt.Sscanf(strings.TrimSpace(v), "%d kB", &kb); err != nil {
				return 0, err
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("no VmHWM in /proc/%d/status", pid)
}
