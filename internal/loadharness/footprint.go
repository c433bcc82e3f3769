package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// footprint measures what the sidecar costs before it does any work: the
// size of the binary as shipped (static, stripped, as the Dockerfile builds
// it) and unstripped (and the size of detour-webhook, the image's other
// binary), and, over N starts of `detour serve`, the time from
// exec to the first 200 from /readyz and the resident memory once it is
// idle. The figures are medians over the runs; the first start, which
// creates the CA and warms the page cache, is not counted.
//
//	go run ./internal/loadharness footprint [-n 21] [-settle 1s]
func footprint(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("footprint", flag.ContinueOnError)
	fs.SetOutput(stderr)
	n := fs.Int("n", 21, "starts of detour serve to measure")
	settle := fs.Duration("settle", time.Second, "how long detour idles after ready before its RSS is read")
	bin := fs.String("detour", "", "stripped detour binary to measure; empty: build the module's main package (and its unstripped twin)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *n < 1 {
		return errors.New("-n must be at least 1")
	}
	dir, err := os.MkdirTemp("", "detour-footprint-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	type built struct{ name, path string }
	var sizes []built
	if *bin == "" {
		// As the Dockerfile builds it: static, no cgo, trimmed paths.
		for _, b := range []struct {
			name, out, pkg string
			flags          []string
		}{
			{"detour (stripped, as shipped)", "detour", ".", []string{"-ldflags=-s -w"}},
			{"detour (unstripped)", "detour-full", ".", nil},
			// The injector's binary, which `detour inject` execs: the
			// image's other file, never in a sidecar's memory.
			{"detour-webhook (stripped, as shipped)", "detour-webhook", "./cmd/detour-webhook", []string{"-ldflags=-s -w"}},
		} {
			out := filepath.Join(dir, b.out)
			args := append(append([]string{"build", "-trimpath"}, b.flags...), "-o", out, b.pkg)
			build := exec.Command("go", args...)
			build.Env = append(os.Environ(), "CGO_ENABLED=0")
			build.Stdout, build.Stderr = stderr, stderr
			if err := build.Run(); err != nil {
				return fmt.Errorf("go build (run from the module root): %w", err)
			}
			sizes = append(sizes, built{b.name, out})
		}
		*bin = sizes[0].path
	} else {
		sizes = append(sizes, built{"detour (given)", *bin})
	}

	pol := `{
  "version": "footprint",
  "listen": "127.0.0.1:0", "admin_listen": "127.0.0.1:0",
  "ca": {"cert_file": "ca.pem", "key_file": "ca-key.pem"},
  "upstreams": {
    "openai":    {"shape": "openai",    "base_url": "https://api.openai.com/v1", "auth": {"from": "client"}},
    "anthropic": {"shape": "anthropic", "base_url": "https://api.anthropic.com", "auth": {"from": "client"}},
    "gemini":    {"shape": "gemini",    "base_url": "https://generativelanguage.googleapis.com", "auth": {"from": "client"}}
  },
  "routes": [
    {"name": "openai-chat",        "match": {"host": "api.openai.com", "path": "/v1/chat/completions"}, "chain": ["openai"]},
    {"name": "anthropic-messages", "match": {"host": "api.anthropic.com", "path": "/v1/messages"},     "chain": ["anthropic"]},
    {"name": "gemini-generate",    "match": {"host": "generativelanguage.googleapis.com", "path": "/v1beta/models/*"}, "chain": ["gemini"]}
  ]
}`
	polPath := filepath.Join(dir, "policy.json")
	if err := os.WriteFile(polPath, []byte(pol), 0o644); err != nil {
		return err
	}

	var readyMs, rssMiB []float64
	for i := 0; i <= *n; i++ {
		ready, rss, err := startOnce(*bin, polPath, *settle)
		if err != nil {
			return fmt.Errorf("start %d: %w", i, err)
		}
		if i == 0 {
			continue // created the CA and warmed the page cache
		}
		readyMs = append(readyMs, float64(ready.Microseconds())/1000)
		rssMiB = append(rssMiB, rss)
	}

	fmt.Fprintf(stdout, "detour footprint (%d starts of detour serve, CA already on disk; medians, [min–max])\n\n", *n)
	fmt.Fprintf(stdout, "| binary | bytes | MB |\n|---|---|---|\n")
	for _, b := range sizes {
		fi, err := os.Stat(b.path)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "| %s | %d | %.1f |\n", b.name, fi.Size(), float64(fi.Size())/1e6)
	}
	fmt.Fprintf(stdout, "\n| measure | median | range |\n|---|---|---|\n")
	lo, med, hi := spread(readyMs)
	fmt.Fprintf(stdout, "| exec → /readyz 200 | %.1f ms | %.1f–%.1f ms |\n", med, lo, hi)
	lo, med, hi = spread(rssMiB)
	fmt.Fprintf(stdout, "| idle RSS, %s after ready | %.1f MiB | %.1f–%.1f MiB |\n", *settle, med, lo, hi)
	return nil
}

// startOnce starts `detour serve`, times it from exec to its first 200 from
// /readyz, lets it idle for settle, reads its VmRSS and stops it.
func startOnce(bin, policyPath string, settle time.Duration) (time.Duration, float64, error) {
	cmd := exec.Command(bin, "serve", "--policy", policyPath)
	cmd.Dir = filepath.Dir(policyPath)
	out, err := cmd.StderrPipe()
	if err != nil {
		return 0, 0, err
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, 0, err
	}
	defer func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}()

	// The admin port is chosen by the kernel: the "detour is listening"
	// line names it.
	admin := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		sent := false
		for sc.Scan() {
			var m map[string]any
			if !sent && json.Unmarshal(sc.Bytes(), &m) == nil && m["message"] == "detour is listening" {
				admin <- strings.TrimPrefix(fmt.Sprint(m["admin"]), "http://")
				sent = true
			}
		}
		if !sent {
			close(admin)
		}
	}()
	var addr string
	select {
	case a, ok := <-admin:
		if !ok {
			return 0, 0, errors.New("detour exited before listening")
		}
		addr = a
	case <-time.After(30 * time.Second):
		return 0, 0, errors.New("detour did not say it was listening within 30s")
	}

	client := &http.Client{Timeout: 5 * time.Second}
	deadline := time.Now().Add(30 * time.Second)
	var ready time.Duration
	for {
		resp, err := client.Get("http://" + addr + "/readyz")
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				ready = time.Since(start)
				break
			}
		}
		if time.Now().After(deadline) {
			return 0, 0, fmt.Errorf("/readyz not 200 within 30s (last error %v)", err)
		}
		time.Sleep(200 * time.Microsecond)
	}
	client.CloseIdleConnections()

	time.Sleep(settle) // a measurement's idle period, not a synchronisation
	rss, err := vmRSS(cmd.Process.Pid)
	return ready, rss, err
}

// vmRSS reads a process's resident set size, in MiB.
func vmRSS(pid int) (float64, error) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb / 1024, err
		}
	}
	return 0, errors.New("no VmRSS in /proc status")
}

// spread returns the minimum, median and maximum of xs.
func spread(xs []float64) (lo, med, hi float64) {
	s := slices.Sorted(slices.Values(xs))
	return s[0], s[len(s)/2], s[len(s)-1]
}
