package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/detour-proxy/detour/internal/fakevendor"
	"github.com/detour-proxy/detour/internal/loadharness/profwin"
	"github.com/detour-proxy/detour/rewrite"
)

// profile runs the rps phase's load (non-stream chat calls, closed loop,
// compare's vendor and policy) against detour and the bare proxy, each a
// child process pinned to one core as in compare, and records for each,
// over the measured runs only: a CPU profile, what the Go runtime counted
// (bytes and objects allocated, GC cycles and GC CPU, goroutines created,
// what a GC cycle scans), the OS context switches of its threads and,
// with -strace, its system calls (strace -c -f, over the first run).
// detour runs as internal/loadharness/servechild, proxy.Serve with the
// options `detour serve` gives it, so that the profile has the module's
// symbols; the bare proxy is this harness's own, run from a copy of its
// executable in -out (bare-proxy), as in compare.
//
//	go run ./internal/loadharness profile -c 16 -for 5s -out /tmp/prof
//	go tool pprof -top -cum /tmp/prof/servechild /tmp/prof/detour.prof
//	go tool pprof -top -diff_base /tmp/prof/bare.prof /tmp/prof/detour.prof
func profile(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("profile", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c := fs.Int("c", 16, "concurrent clients")
	runFor := fs.Duration("for", 5*time.Second, "length of one measured run")
	reps := fs.Int("reps", 2, "measured runs per proxy, alternating")
	cpu := fs.String("cpu", "1", "core the proxies are pinned to (taskset)")
	genCPU := fs.String("gen-cpu", "0", "core of this process: load generator and vendor")
	out := fs.String("out", "", "directory for the profiles and figures (default: a new temporary one, kept)")
	child := fs.String("servechild", "", "servechild binary; empty: go build ./internal/loadharness/servechild into -out")
	memRate := fs.Int("memprofilerate", 0, "detour's runtime.MemProfileRate, for a finer heap profile (slows its allocations)")
	detourEnv := fs.String("detour-env", "", "environment for detour's process, space-separated KEY=VALUE (e.g. GOGC=200 GODEBUG=gctrace=1)")
	childB := fs.String("b", "", "a second servechild binary, measured beside the first in the same runs as detour-b (a before/after comparison)")
	envB := fs.String("b-env", "", "environment for detour-b (with no -b: the same binary as detour)")
	hz := fs.Int("hz", 0, "CPU profile rate of every proxy (0: pprof's 100 Hz; above the kernel's tick rate samples are lost)")
	strace := fs.Bool("strace", false, "count each proxy's system calls over its first measured run (strace -c -f); ptrace slows that run, and the profile with it")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" {
		d, err := os.MkdirTemp("", "detour-profile-")
		if err != nil {
			return err
		}
		*out = d
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	if *child == "" {
		*child = filepath.Join(*out, "servechild")
		build := exec.Command("go", "build", "-o", *child, "./internal/loadharness/servechild")
		build.Stdout, build.Stderr = stderr, stderr
		if err := build.Run(); err != nil {
			return fmt.Errorf("go build servechild (run from the module root): %w", err)
		}
	}
	bareBin, err := bareBinary(*out)
	if err != nil {
		return err
	}
	if *genCPU != "" {
		if o, err := exec.Command("taskset", "-a", "-p", "-c", *genCPU, strconv.Itoa(os.Getpid())).CombinedOutput(); err != nil {
			return fmt.Errorf("taskset: %v: %s", err, o)
		}
	}
	load, _ := os.ReadFile("/proc/loadavg")

	// compare's vendor: its answer carries 200 words.
	words := strings.TrimSpace(strings.Repeat("word ", 200))
	vendor := fakevendor.New(rewrite.OpenAI, fakevendor.Options{Name: "compare", Text: words, Chunks: 200})
	vsrv := httptest.NewServer(vendor)
	defer vsrv.Close()
	pol := fmt.Sprintf(`{
  "listen": "127.0.0.1:0", "admin_listen": "127.0.0.1:0",
  "ca": {"cert_file": "ca.pem", "key_file": "ca-key.pem"},
  "upstreams": {"fake": {"shape": "openai", "base_url": "%s/v1", "auth": {"from": "client"}, "timeouts": {"idle": "1h"}}},
  "routes": [{"name": "chat", "match": {"host": "api.openai.com", "path": "/v1/chat/completions"}, "chain": ["fake"]}]
}`, vsrv.URL)
	polPath := filepath.Join(*out, "policy.json")
	if err := os.WriteFile(polPath, []byte(pol), 0o644); err != nil {
		return err
	}

	bc, err := startChild([]string{bareBin, "bare", "-upstream", vsrv.URL, "-window", filepath.Join(*out, "bare"), "-hz", strconv.Itoa(*hz)}, *out, *cpu,
		func(line []byte) (string, string, bool) {
			a, ok := bytes.CutPrefix(line, []byte(bareReadyLine))
			return string(a), "", ok
		})
	if err != nil {
		return fmt.Errorf("bare proxy: %w", err)
	}
	defer bc.stop()
	vs := []*variant{{name: "bare", child: bc, url: "http://" + bc.listen + "/v1/chat/completions", cl: newClient()}}
	startServe := func(name, bin, env string) error {
		var args []string
		if env != "" {
			// env execs the child in the same process, so the pid is still
			// the one taskset started.
			args = append([]string{"env"}, strings.Fields(env)...)
		}
		args = append(args, bin, "-policy", polPath, "-window", filepath.Join(*out, name), "-memprofilerate", strconv.Itoa(*memRate), "-hz", strconv.Itoa(*hz))
		dc, err := startDetourArgs(args, *out, *cpu)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		vs = append(vs, &variant{name: name, child: dc, url: "http://" + dc.listen + "/openai/v1/chat/completions", cl: newClient()})
		return nil
	}
	defer func() {
		for _, v := range vs[1:] {
			v.child.stop()
		}
	}()
	if err := startServe("detour", *child, *detourEnv); err != nil {
		return err
	}
	if *childB != "" || *envB != "" {
		if *childB == "" {
			*childB = *child
		}
		if err := startServe("detour-b", *childB, *envB); err != nil {
			return err
		}
	}

	// Warm up (connections, pools, heap size), then open the windows.
	for _, v := range vs {
		if _, _, err := closedLoop(v, *c, time.Second); err != nil {
			return err
		}
	}
	for _, v := range vs {
		// A stats file of an earlier run in the same directory would be
		// read as this one's.
		if err := os.Remove(filepath.Join(*out, v.name+".stats")); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		if err := v.child.cmd.Process.Signal(syscall.SIGUSR1); err != nil {
			return err
		}
	}
	// The child opens its window on the signal; a pause before the load
	// (a measurement's, not a synchronisation: the window only has to
	// cover the runs, and its counts are divided by the requests in it).
	time.Sleep(200 * time.Millisecond)

	type tally struct {
		n        int64
		wall     time.Duration
		cpu      time.Duration
		switches int64
		// Per run: CPU per request, requests per second, and both as a
		// ratio to the bare proxy's run just before (the same round).
		cpuPer, rps, cpuRatio, rpsRatio []float64
	}
	got := map[string]*tally{}
	for rep := range *reps {
		for _, v := range vs {
			var st *exec.Cmd
			if *strace && rep == 0 {
				st = exec.Command("strace", "-c", "-f", "-o", filepath.Join(*out, v.name+".strace"), "-p", strconv.Itoa(v.child.pid()))
				if err := st.Start(); err != nil {
					return fmt.Errorf("strace: %w", err)
				}
				time.Sleep(300 * time.Millisecond) // strace attaching to every thread
			}
			before, err := cpuTime(v.child.pid())
			if err != nil {
				return err
			}
			sw0 := contextSwitches(v.child.pid())
			n, d, err := closedLoop(v, *c, *runFor)
			if err != nil {
				return err
			}
			after, err := cpuTime(v.child.pid())
			if err != nil {
				return err
			}
			sw1 := contextSwitches(v.child.pid())
			if st != nil {
				_ = st.Process.Signal(os.Interrupt)
				_ = st.Wait()
				if err := os.WriteFile(filepath.Join(*out, v.name+".strace.n"), []byte(strconv.FormatInt(n, 10)+"\n"), 0o644); err != nil {
					return err
				}
			}
			t := got[v.name]
			if t == nil {
				t = &tally{}
				got[v.name] = t
			}
			t.n += n
			t.wall += d
			t.cpu += after - before
			t.switches += sw1 - sw0
			t.cpuPer = append(t.cpuPer, float64((after-before).Nanoseconds())/1e3/float64(n))
			t.rps = append(t.rps, float64(n)/d.Seconds())
			if b := got["bare"]; v.name != "bare" {
				t.cpuRatio = append(t.cpuRatio, t.cpuPer[rep]/b.cpuPer[rep])
				t.rpsRatio = append(t.rpsRatio, t.rps[rep]/b.rps[rep])
			}
		}
	}
	for _, v := range vs {
		if err := v.child.cmd.Process.Signal(syscall.SIGUSR2); err != nil {
			return err
		}
	}
	stats := map[string]profwin.Stats{}
	for _, v := range vs {
		s, err := profwin.Wait(filepath.Join(*out, v.name))
		if err != nil {
			return fmt.Errorf("%s: %w", v.name, err)
		}
		stats[v.name] = s
	}

	fmt.Fprintf(stdout, "profile: c=%d, %d×%s per proxy, load average at start %s\n\n", *c, *reps, *runFor, strings.TrimSpace(string(load)))
	fmt.Fprintln(stdout, "| | requests | rps | CPU/req µs (/proc) | context switches/req | B/req | objects/req | GC cycles/1k req | GC CPU µs/req (runtime's estimate) | goroutines/req |")
	fmt.Fprintln(stdout, "|---|---|---|---|---|---|---|---|---|---|")
	for _, v := range vs {
		t, s := got[v.name], stats[v.name]
		per := func(x float64) float64 { return x / float64(t.n) }
		fmt.Fprintf(stdout, "| %s | %d | %.0f | %.1f | %.2f | %.0f | %.1f | %.2f | %.1f | %.2f |\n", v.name, t.n,
			float64(t.n)/t.wall.Seconds(), float64(t.cpu.Microseconds())/float64(t.n), per(float64(t.switches)),
			per(s.Bytes), per(s.Objects), 1000*per(s.GCCycles), 1e6*per(s.GCCPU), per(s.Goroutines))
	}
	fmt.Fprintln(stdout)
	fmt.Fprintln(stdout, "Per run, median over the runs (each proxy's run beside the bare proxy's of the same round):")
	fmt.Fprintln(stdout)
	fmt.Fprintln(stdout, "| | CPU/req µs | rps | CPU/req ÷ bare's | rps ÷ bare's |")
	fmt.Fprintln(stdout, "|---|---|---|---|---|")
	for _, v := range vs {
		t := got[v.name]
		fmt.Fprintf(stdout, "| %s | %.1f | %.0f | %.3f | %.3f |\n", v.name, median(t.cpuPer), median(t.rps), median(t.cpuRatio), median(t.rpsRatio))
	}
	fmt.Fprintln(stdout)
	fmt.Fprintln(stdout, "| | RSS MiB | peak RSS MiB | live heap KiB | heap goal KiB | GOGC | forced GC cycles | GC scans: globals KiB | stacks KiB | heap KiB |")
	fmt.Fprintln(stdout, "|---|---|---|---|---|---|---|---|---|---|")
	for _, v := range vs {
		s := stats[v.name]
		// The bare proxy has no admin listener: sample reads /proc only.
		m, _ := (&detourChild{cmd: v.child.cmd}).sample()
		fmt.Fprintf(stdout, "| %s | %.1f | %.1f | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f |\n", v.name, m.rssMiB, m.hwmMiB, s.Live/1024, s.Goal/1024, s.GOGC, s.Forced,
			s.ScanGlobals/1024, s.ScanStacks/1024, s.ScanHeap/1024)
	}
	fmt.Fprintf(stdout, "\nprofiles: %s/{detour,detour-b,bare}.prof (binaries: %s, %s)", *out, *child, bareBin)
	if *strace {
		fmt.Fprintf(stdout, "; system calls: %s/{detour,bare}.strace (first run; requests in it: *.strace.n)", *out)
	}
	fmt.Fprintln(stdout)
	return nil
}

// startDetourArgs starts a detour process (args[0] and its arguments) and
// waits for its ready line, as startDetour does for `detour serve`.
func startDetourArgs(args []string, dir, cpu string) (*detourChild, error) {
	return startChild(args, dir, cpu, func(line []byte) (listen, admin string, ok bool) {
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

// contextSwitches is the sum of the voluntary and involuntary context
// switches of every thread of a process so far (0 if unreadable).
func contextSwitches(pid int) int64 {
	tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	var n int64
	for _, t := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/status", pid, t.Name()))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "voluntary_ctxt_switches:"); ok {
				k, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				n += k
			} else if v, ok := strings.CutPrefix(line, "nonvoluntary_ctxt_switches:"); ok {
				k, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				n += k
			}
		}
	}
	return n
}
