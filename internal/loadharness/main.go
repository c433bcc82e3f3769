// Command loadharness measures a real detour process from outside: it builds
// detour, runs it as a child process against an in-process fake vendor on
// loopback, drives load through it, and reads the child's resource use from
// /proc and its admin /metrics. It is a measuring tool for people, not a test:
// the figures it prints go in README and in issue notes, and nothing asserts
// on them.
//
//	go run ./internal/loadharness streams -n 1000
//	go run ./internal/loadharness bodies -n 16 -size 30000000 [-retry] [-chunked]
//	go run ./internal/loadharness compare [-readme README.md]
//	go run ./internal/loadharness profile [-c 16] [-for 2s] [-reps 8] [-strace] [-b BIN | -b-env ENV]
//
// streams opens N streaming chat requests through detour (base-URL mode),
// waits until every one has received its first content event, and reports
// the child's RSS, goroutines and open file descriptors while they are held,
// then closes them all and reports the same figures after a settle period.
//
// bodies sends N concurrent requests with large bodies through detour to a
// sink that reads them whole, and reports the answers' statuses and the
// child's peak RSS: what buffering bodies for replay costs, and whether
// limits.buffered_bytes holds it.
//
// compare measures detour (base-URL mode) beside a bare
// httputil.ReverseProxy with a BufferPool, both child processes pinned to
// one core, against one fake vendor on loopback, with the load generated
// from the other core: added latency at c=1, requests per second at c=16
// and c=64, CPU per request, allocations per request (proxy's
// BenchmarkAllocsPerRequest), time to first token and per-event transit of
// a 200-event stream (from a vendor that writes its opening event and
// first content together, and from one that pauses between them), RSS
// with 1,000 open streams (the median of five starts) and time to ready,
// each as detour, bare and their ratio. It prints the README's generated
// "Measured" block; -readme rewrites it in place. -b BIN measures a second
// detour binary in the same runs, beside the first (a before/after
// comparison, not for the README). A run takes about three minutes. The stream phase also prints, to stderr, where each variant's
// time to first token goes as the client and the vendor see it
// (streamsplit.go), and -stream-warm (a diagnostic, never for the README)
// calls each proxy once, unstreamed, right before each of its streams.
//
// profile runs compare's requests-per-second load against detour and the
// bare proxy and writes each one's CPU profile and runtime counts over the
// measured runs (profile.go): where the CPU per request goes.
//
// Linux only (it reads /proc). The proxy may be pinned to one core with
// --cpu (taskset), so that its figures do not depend on the load generator.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/detour-proxy/detour/internal/fakevendor"
	"github.com/detour-proxy/detour/rewrite"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "loadharness:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintln(stdout, "usage: go run ./internal/loadharness streams [-n N] [--settle 5s] [--cpu 1] [--detour BIN]")
		fmt.Fprintln(stdout, "       go run ./internal/loadharness bodies [-n N] [-size BYTES] [-chunked] [-retry] [-policy-extra JSON] [--cpu 1] [--detour BIN]")
		fmt.Fprintln(stdout, "       go run ./internal/loadharness compare [-readme README.md] [-phases latency,rps,stream,rss] [-bench-n 300] [-rss-reps 5] [-cpu 1] [-gen-cpu 0] [-stream-warm] [-detour BIN] [-b BIN]")
		fmt.Fprintln(stdout, "       go run ./internal/loadharness profile [-c 16] [-for 2s] [-reps 8] [-out DIR] [-strace] [-b SERVECHILD] [-b-env ENV] [-detour-env ENV]")
		return nil
	}
	switch args[0] {
	case "streams":
		return streams(args[1:], stdout, stderr)
	case "bodies":
		return bodies(args[1:], stdout, stderr)
	case "footprint":
		return footprint(args[1:], stdout, stderr)
	case "compare":
		return compare(args[1:], stdout, stderr)
	case "bare":
		return bare(args[1:], stderr)
	case "profile":
		return profile(args[1:], stdout, stderr)
	default:
		return fmt.Errorf("unknown command %q (known: streams, bodies, compare, footprint, profile)", args[0])
	}
}

func streams(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("streams", flag.ContinueOnError)
	fs.SetOutput(stderr)
	n := fs.Int("n", 1000, "streams held open at once")
	settle := fs.Duration("settle", 5*time.Second, "wait after closing the streams before measuring again")
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

	// The vendor stalls every stream after its first content events until
	// the client goes away: a held, committed stream, as a long generation is.
	vendor := fakevendor.New(rewrite.OpenAI, fakevendor.Options{Name: "harness"})
	vendor.SetDefault(fakevendor.Fault{Kind: fakevendor.StreamStall, Delay: time.Hour})
	vln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	vsrv := &http.Server{Handler: vendor, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = vsrv.Serve(vln) }()
	defer vsrv.Close()

	pol := fmt.Sprintf(`{
  "listen": "127.0.0.1:0", "admin_listen": "127.0.0.1:0",
  "ca": {"cert_file": "ca.pem", "key_file": "ca-key.pem"},
  "upstreams": {"fake": {"shape": "openai", "base_url": "http://%s/v1", "auth": {"none": true}, "timeouts": {"idle": "1h"}}},
  "routes": [{"name": "chat", "match": {"host": "api.openai.com", "path": "/v1/chat/completions"}, "chain": ["fake"]}]
}`, vln.Addr())
	polPath := filepath.Join(dir, "policy.json")
	if err := os.WriteFile(polPath, []byte(pol), 0o644); err != nil {
		return err
	}

	child, err := startDetour(*bin, polPath, *cpu, stderr)
	if err != nil {
		return err
	}
	defer child.stop()

	before, err := child.sample()
	if err != nil {
		return err
	}

	ctx, cancel := context.WithCancel(context.Background())
	tr := &http.Transport{MaxIdleConnsPerHost: -1, DisableCompression: true}
	client := &http.Client{Transport: tr}
	var wg sync.WaitGroup
	committed := make(chan error, *n)
	body := `{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"Say hello."}]}`
	for i := 0; i < *n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+child.listen+"/openai/v1/chat/completions", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			resp, err := client.Do(req)
			if err != nil {
				committed <- err
				return
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				committed <- fmt.Errorf("status %d", resp.StatusCode)
				return
			}
			r := bufio.NewReader(resp.Body)
			for {
				line, err := r.ReadString('\n')
				if err != nil {
					committed <- fmt.Errorf("stream ended before its first content: %w", err)
					return
				}
				if strings.Contains(line, `"content"`) {
					break
				}
			}
			committed <- nil
			_, _ = io.Copy(io.Discard, r) // hold until cancelled
		}()
	}
	deadline := time.After(2 * time.Minute)
	for i := 0; i < *n; i++ {
		select {
		case err := <-committed:
			if err != nil {
				cancel()
				return fmt.Errorf("stream %d: %w", i, err)
			}
		case <-deadline:
			cancel()
			return fmt.Errorf("only %d of %d streams committed within 2m", i, *n)
		}
	}
	held, err := child.sample()
	if err != nil {
		cancel()
		return err
	}
	cancel()
	wg.Wait()
	tr.CloseIdleConnections()
	time.Sleep(*settle) // a measurement's settle period, not a synchronisation
	after, err := child.sample()
	if err != nil {
		return err
	}

	fmt.Fprintf(stdout, "detour with %d open streams (base-URL mode, one fake OpenAI vendor on loopback)\n\n", *n)
	fmt.Fprintf(stdout, "| when | RSS MiB | peak RSS MiB | goroutines | open fds |\n|---|---|---|---|---|\n")
	for _, s := range []struct {
		name string
		s    sample
	}{{"idle, before", before}, {fmt.Sprintf("%d streams held", *n), held}, {fmt.Sprintf("%s after close", *settle), after}} {
		fmt.Fprintf(stdout, "| %s | %.1f | %.1f | %d | %d |\n", s.name, s.s.rssMiB, s.s.hwmMiB, s.s.goroutines, s.s.fds)
	}
	fmt.Fprintf(stdout, "\nper stream while held: %.1f KiB RSS, %.1f goroutines\n",
		(held.rssMiB-before.rssMiB)*1024/float64(*n), float64(held.goroutines-before.goroutines)/float64(*n))
	return nil
}

// detourBinary returns bin, or builds the module's detour into dir when bin
// is empty.
func detourBinary(bin, dir string, stderr io.Writer) (string, error) {
	if bin != "" {
		return bin, nil
	}
	bin = filepath.Join(dir, "detour")
	build := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, ".")
	build.Stdout, build.Stderr = stderr, stderr
	if err := build.Run(); err != nil {
		return "", fmt.Errorf("go build (run from the module root): %w", err)
	}
	return bin, nil
}

// bareBinary copies this executable into dir and returns the copy's path,
// which the bare proxy child runs from. Run from the harness's own file,
// the child would share its program text with the harness: the same
// physical pages, whose cache lines the load generator and the vendor,
// running the same net/http code on the other core, keep warm in the
// shared cache between the child's requests. detour runs from a file of
// its own, whose code nothing else warms, and so should the baseline. (In
// one run of the stream phase, the same bare proxy served from the
// harness's file added 389 µs to the time to first token and from a
// copy 451 µs; the way in of the request was 226 µs against 299 µs.)
func bareBinary(dir string) (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", err
	}
	src, err := os.Open(self)
	if err != nil {
		return "", err
	}
	defer src.Close()
	path := filepath.Join(dir, "bare-proxy")
	dst, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o755)
	if err != nil {
		return "", err
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return "", err
	}
	return path, dst.Close()
}

// detourChild is a running child process: detour, or the bare proxy
// compare measures it against.
type detourChild struct {
	cmd    *exec.Cmd
	listen string
	admin  string // "" when the child has no admin listener (the bare proxy)
	// ready is the time from starting the process to its ready line.
	ready time.Duration
	done  chan error
}

// startDetour runs `detour serve` and waits for its "detour is listening"
// line, which names the ports it got.
func startDetour(bin, policyPath, cpu string, stderr io.Writer) (*detourChild, error) {
	return startChild([]string{bin, "serve", "--policy", policyPath}, filepath.Dir(policyPath), cpu, func(line []byte) (listen, admin string, ok bool) {
		// Only the ready line is decoded: detour writes a log line per
		// request, and decoding them all would load the harness's core.
		if !bytes.Contains(line, []byte(`"detour is listening"`)) {
			return "", "", false
		}
		var m map[string]any
		if json.Unmarshal(line, &m) != nil || m["message"] != "detour is listening" {
			return "", "", false
		}
		listen, _ = m["listen"].(string)
		return listen, strings.TrimPrefix(fmt.Sprint(m["admin"]), "http://"), true
	})
}

// startChild runs args (under taskset when cpu is set) in dir and waits
// until ready recognises a line of its stderr; the rest of stderr is read
// and dropped.
func startChild(args []string, dir, cpu string, ready func(line []byte) (listen, admin string, ok bool)) (*detourChild, error) {
	if cpu != "" {
		args = append([]string{"taskset", "-c", cpu}, args...)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir = dir
	out, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &detourChild{cmd: cmd, done: make(chan error, 1)}
	type addrs struct{ listen, admin string }
	lines := make(chan addrs, 1)
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		found := false
		for sc.Scan() {
			if found {
				continue
			}
			if l, a, ok := ready(sc.Bytes()); ok {
				found = true
				lines <- addrs{l, a}
			}
		}
		close(lines)
		c.done <- cmd.Wait()
	}()
	select {
	case a, ok := <-lines:
		if !ok {
			return nil, fmt.Errorf("%s exited before it was ready", filepath.Base(args[len(args)-1]))
		}
		c.ready = time.Since(start)
		c.listen, c.admin = a.listen, a.admin
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		return nil, fmt.Errorf("%s was not ready within 30s", args[0])
	}
	return c, nil
}

func (c *detourChild) stop() {
	_ = c.cmd.Process.Signal(os.Interrupt)
	select {
	case <-c.done:
	case <-time.After(40 * time.Second):
		_ = c.cmd.Process.Kill()
	}
}

// sample is the child's resource use at one moment.
type sample struct {
	rssMiB, hwmMiB float64
	// anonMiB and fileMiB split the RSS: the heap, stacks and runtime
	// (anonymous memory) and the pages of the binary that were touched.
	anonMiB, fileMiB float64
	goroutines       int
	fds              int
}

func (c *detourChild) pid() int {
	// Under taskset the child is taskset until it execs detour, which has the
	// same pid.
	return c.cmd.Process.Pid
}

func (c *detourChild) sample() (sample, error) {
	var s sample
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", c.pid()))
	if err != nil {
		return s, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
		switch k {
		case "VmRSS":
			s.rssMiB = kb / 1024
		case "VmHWM":
			s.hwmMiB = kb / 1024
		case "RssAnon":
			s.anonMiB = kb / 1024
		case "RssFile":
			s.fileMiB = kb / 1024
		}
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", c.pid()))
	if err != nil {
		return s, err
	}
	s.fds = len(fds)
	if c.admin == "" {
		return s, nil
	}
	resp, err := http.Get("http://" + c.admin + "/metrics")
	if err != nil {
		return s, fmt.Errorf("scraping detour's metrics: %w", err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "go_goroutines "); ok {
			s.goroutines, _ = strconv.Atoi(strings.TrimSpace(v))
		}
	}
	return s, sc.Err()
}
