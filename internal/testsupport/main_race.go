//go:build race

package testsupport

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"syscall"
	"time"
)

// raceExitWait is how long exitAfterTests waits for goroutines the tests
// left running: the race runtime's own default atexit_sleep_ms.
const raceExitWait = time.Second

// exitAfterTests ends a test binary whose tests passed, under -race.
//
// os.Exit(0) would run the race runtime's finaliser, which sleeps
// atexit_sleep_ms (one second by default) whenever another goroutine
// exists — in a test binary, always — so that a goroutine still running can
// finish a race report, and then exits 66 if any race was reported. The
// sleep is the same second whether anything is left to report or not, and
// it is paid by each of the suite's test binaries.
//
// Here the wait is for what can still race: the goroutines the tests
// started (those not alive before m.Run). Once none is left, no instrumented
// code is running but this goroutine and the ones that were there before
// the tests (the runtime's are not instrumented), so no report can still be
// on its way: a race is counted by the goroutine that makes it, before that
// goroutine moves on. A goroutine that stays (an idle connection, a leaked
// loop) gets the full second, as the race runtime would give it. Then the
// same check: any race reported at all fails the binary. m.Run has already
// failed every test during which a race was reported, and the run if one
// was reported outside a test; this covers the time after it returned.
func exitAfterTests(before map[string]bool) {
	Poll(raceExitWait, func() bool { return !leftOver(before) })
	if n := runtime.RaceErrors(); n > 0 {
		fmt.Fprintf(os.Stderr, "testsupport: %d data race report(s); failing the test binary\n", n)
		os.Exit(66) // the race runtime's own exit status for a reported race
	}
	// syscall.Exit, not os.Exit: os.Exit(0) would run the finaliser and
	// its sleep. Nothing else runs at a clean exit of a test binary without
	// coverage (Main sends those to os.Exit).
	syscall.Exit(0)
}

// leftOver reports whether a goroutine not in before is alive, other than
// the caller and the standard library's idle loops.
func leftOver(before map[string]bool) bool {
	self := currentID()
	for id, top := range goroutines() {
		if id != self && !before[id] && !idleLoops[top] {
			return true
		}
	}
	return false
}

// idleLoops are goroutines the standard library starts on first use and
// keeps for the life of the process, parked in the runtime until it has
// work for them: os/signal's delivery loop (signal.Notify) and the runner of
// runtime.AddCleanup's cleanups. They run no code until a signal arrives or
// the collector frees an object with a cleanup, neither of which the race
// runtime's idle second at exit would bring about, so they are not waited
// for.
//
// A helper of internal/chain that writes a stream's commit point, parked
// for the next one (chain.firstWriter, in a process whose Runner keeps
// them), is one too: it runs no code until a commit point hands it a
// write, and a stream still running would be waited for itself. Its top
// frame is the runtime's, so goroutines names it by parkedFirstWriter.
var idleLoops = map[string]bool{
	"os/signal.signal_recv": true,
	"runtime.runCleanups":   true,
	parkedFirstWriter:       true,
}

// parkedFirstWriter is what goroutines gives as the top of a parked
// chain.firstWriter.
const parkedFirstWriter = "parked chain.firstWriter"

// firstWriterFrame is the frame of a parked chain.firstWriter, below the
// runtime's channel receive.
var firstWriterFrame = []byte("github.com/detour-proxy/detour/internal/chain.firstWriter(")

// goroutineIDs is the set of live goroutines' ids.
func goroutineIDs() map[string]bool {
	ids := map[string]bool{}
	for id := range goroutines() {
		ids[id] = true
	}
	return ids
}

// goroutines maps each live goroutine's id to the function at the top of
// its stack, read from a full stack dump (runtime.Stack lists every
// goroutine but the runtime's own).
func goroutines() map[string]string {
	buf := make([]byte, 1<<16)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	gs := map[string]string{}
	lines := bytes.Split(buf, []byte("\n"))
	for i, line := range lines {
		if id, ok := stackID(line); ok && i+1 < len(lines) {
			top, _, _ := bytes.Cut(lines[i+1], []byte("("))
			gs[id] = string(top)
			if bytes.Contains(line, []byte("[chan receive")) && parkedInFirstWriter(lines[i+1:]) {
				gs[id] = parkedFirstWriter
			}
		}
	}
	return gs
}

// parkedInFirstWriter reports whether the frames of one goroutine, from
// its top down to the blank line that ends them, are the runtime's channel
// receive called from chain.firstWriter.
func parkedInFirstWriter(frames [][]byte) bool {
	for _, f := range frames {
		switch {
		case len(f) == 0:
			return false
		case bytes.HasPrefix(f, []byte("\t")), bytes.HasPrefix(f, []byte("runtime.")):
			// A frame's file line, or the runtime's own frames above it.
		default:
			return bytes.HasPrefix(f, firstWriterFrame)
		}
	}
	return false
}

// currentID is the calling goroutine's id.
func currentID() string {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	id, _ := stackID(buf)
	return id
}

// stackID reads the id from a stack dump's header line, "goroutine 7 [running]:".
func stackID(line []byte) (string, bool) {
	rest, ok := bytes.CutPrefix(line, []byte("goroutine "))
	if !ok {
		return "", false
	}
	id, _, ok := bytes.Cut(rest, []byte(" "))
	return string(id), ok
}
