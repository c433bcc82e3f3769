// Package profwin is the measuring window of the load harness's profile
// mode, run inside each profiled child process: SIGUSR1 opens it (a CPU
// profile starts, the runtime's counters are noted), SIGUSR2 closes it
// (the profile is written, the counters' growth goes to a stats file, and
// a heap profile is written beside it).
package profwin

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"syscall"
	"time"
)

// Stats is what the runtime counted between a child's SIGUSR1 and
// SIGUSR2.
type Stats struct {
	Bytes, Objects, GCCycles, GCCPU, Goroutines float64
	// At the window's end: the live heap after the last GC, and what a
	// GC cycle scans (globals, stacks, heap).
	Live, ScanGlobals, ScanStacks, ScanHeap float64
	// Forced is how many of the window's cycles were started by a call
	// (runtime.GC), not by the heap's growth; Goal is the heap goal and
	// GOGC the percent in effect at the window's end.
	Forced, Goal, GOGC float64
}

var names = []string{
	"/gc/heap/allocs:bytes",
	"/gc/heap/allocs:objects",
	"/gc/cycles/total:gc-cycles",
	"/cpu/classes/gc/total:cpu-seconds",
	"/sched/goroutines-created:goroutines",
	"/gc/heap/live:bytes",
	"/gc/scan/globals:bytes",
	"/gc/scan/stack:bytes",
	"/gc/scan/heap:bytes",
	"/gc/cycles/forced:gc-cycles",
	"/gc/heap/goal:bytes",
	"/gc/gogc:percent",
}

func read() []float64 {
	s := make([]metrics.Sample, len(names))
	for i, n := range names {
		s[i].Name = n
	}
	metrics.Read(s)
	v := make([]float64, len(s))
	for i := range s {
		switch s[i].Value.Kind() {
		case metrics.KindUint64:
			v[i] = float64(s[i].Value.Uint64())
		case metrics.KindFloat64:
			v[i] = s[i].Value.Float64()
		}
	}
	return v
}

// Run serves the window until ctx ends: SIGUSR1 starts a CPU profile into
// prefix.prof and notes the runtime's counts, SIGUSR2 stops it and writes
// the counts' growth to prefix.stats (whole: written aside, then renamed).
// hz is the profile's sampling rate (0: pprof's 100 Hz).
func Run(ctx context.Context, prefix string, hz int) {
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, syscall.SIGUSR1, syscall.SIGUSR2)
	defer signal.Stop(sig)
	var f *os.File
	var start []float64
	for {
		select {
		case <-ctx.Done():
			if f != nil {
				pprof.StopCPUProfile()
				_ = f.Close()
			}
			return
		case s := <-sig:
			if s == syscall.SIGUSR1 && f == nil {
				var err error
				if f, err = os.Create(prefix + ".prof"); err != nil {
					fmt.Fprintln(os.Stderr, "profile:", err)
					continue
				}
				if hz > 0 && hz != 100 {
					// Set before StartCPUProfile, which then keeps it
					// (and says on stderr that it could not set its own).
					runtime.SetCPUProfileRate(hz)
				}
				if err := pprof.StartCPUProfile(f); err != nil {
					fmt.Fprintln(os.Stderr, "profile:", err)
				}
				start = read()
				continue
			}
			if s == syscall.SIGUSR2 && f != nil {
				end := read()
				pprof.StopCPUProfile()
				_ = f.Close()
				f = nil
				// What the live heap holds, as of the last GC.
				if h, err := os.Create(prefix + ".heap"); err == nil {
					_ = pprof.Lookup("heap").WriteTo(h, 0)
					_ = h.Close()
				}
				d := make([]float64, len(end))
				for i := range end {
					d[i] = end[i] - start[i]
				}
				b, _ := json.Marshal(Stats{Bytes: d[0], Objects: d[1], GCCycles: d[2], GCCPU: d[3], Goroutines: d[4],
					Live: end[5], ScanGlobals: end[6], ScanStacks: end[7], ScanHeap: end[8],
					Forced: d[9], Goal: end[10], GOGC: end[11]})
				tmp := prefix + ".stats.tmp"
				if os.WriteFile(tmp, b, 0o644) == nil {
					_ = os.Rename(tmp, prefix+".stats")
				}
			}
		}
	}
}

// Wait waits, bounded, for a child's stats file (prefix.stats) and
// decodes it.
func Wait(prefix string) (Stats, error) {
	var s Stats
	path := prefix + ".stats"
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, err := os.ReadFile(path)
		if err == nil {
			return s, json.Unmarshal(b, &s)
		}
		if time.Now().After(deadline) {
			return s, fmt.Errorf("no %s within 30s: %w", path, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
