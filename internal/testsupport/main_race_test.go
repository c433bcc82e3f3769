//go:build race

package testsupport

import (
	"runtime"
	"strings"
	"testing"
)

// TestParkedFirstWriterIsIdle: a goroutine parked in a channel receive
// under chain.firstWriter is told from one parked elsewhere, on the stack
// dump the runtime really prints.
func TestParkedFirstWriterIsIdle(t *testing.T) {
	dump := "goroutine 9 [chan receive]:\n" +
		"runtime.gopark(0x0?, 0x0?, 0x0?, 0x0?, 0x0?)\n" +
		"\t/usr/local/go/src/runtime/proc.go:460 +0xce\n" +
		"runtime.chanrecv(0xc000100060, 0xc00004e7a0, 0x1)\n" +
		"\t/usr/local/go/src/runtime/chan.go:667 +0x445\n" +
		"runtime.chanrecv1(0x0?, 0x0?)\n" +
		"\t/usr/local/go/src/runtime/chan.go:509 +0x12\n" +
		"github.com/detour-proxy/detour/internal/chain.firstWriter({0x0?, {0x0?, 0x0?, 0x0?}})\n" +
		"\t/work/internal/chain/stream_first.go:92 +0x10f\n" +
		"created by github.com/detour-proxy/detour/internal/chain.(*streamOut).writeFirst in goroutine 8\n\n"
	lines := strings.Split(dump, "\n")
	var frames [][]byte
	for _, l := range lines[1:] {
		frames = append(frames, []byte(l))
	}
	if !parkedInFirstWriter(frames) {
		t.Errorf("a parked chain.firstWriter is not told as one")
	}
	// The same receive in another function is not.
	other := strings.ReplaceAll(dump, "internal/chain.firstWriter(", "internal/chain.pump(")
	frames = frames[:0]
	for _, l := range strings.Split(other, "\n")[1:] {
		frames = append(frames, []byte(l))
	}
	if parkedInFirstWriter(frames) {
		t.Errorf("a receive under another function is told as a parked chain.firstWriter")
	}

	// And a goroutine of this test parked in a receive, read from the
	// runtime's own dump, is not one either (its frames are this
	// package's).
	ch := make(chan struct{})
	done := make(chan struct{})
	go func() { <-ch; close(done) }()
	Poll(raceExitWait, func() bool {
		buf := make([]byte, 1<<16)
		return strings.Contains(string(buf[:runtime.Stack(buf, true)]), "[chan receive")
	})
	for _, top := range goroutines() {
		if top == parkedFirstWriter {
			t.Errorf("a goroutine of this test is told as a parked chain.firstWriter")
		}
	}
	close(ch)
	<-done
}
