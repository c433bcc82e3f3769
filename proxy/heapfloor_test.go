package proxy

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
)

// goal is the runtime's heap goal for a live heap, its roots and a GOGC.
func goal(live, roots uint64, percent int) uint64 {
	return max(runtimeHeapMinimum*uint64(percent)/100, live+(live+roots)*uint64(percent)/100)
}

func TestHeapFloorPercent(t *testing.T) {
	t.Parallel()
	const mib = 1 << 20
	for _, c := range []struct {
		live, roots uint64
		want        int
	}{
		{0, 0, 400},                     // nothing known: the percent whose minimum is the floor
		{2 * mib, mib / 2, 400},         // detour under load: the runtime's minimum at 400 is the floor
		{6 * mib, mib / 2, 153},         // 6 + 6.5×1.53 ≈ 16 MiB
		{8 * mib, mib / 2, 100},         // the default already reaches the floor
		{16 * mib, mib / 2, 100},        // at or over the floor: the default
		{200 * mib, 2 * mib, 100},       // open streams: the default
		{3 * mib, 13 * mib / 10, 302},   // 3 + 4.3×3.02 ≈ 16 MiB
		{15 * mib, 10 * mib, 100},       // large roots: never below the default
		{mib, 0, 400},                   // clamped at the top
		{4 * mib, 12 * mib, 100},        // q = 75: the default
		{12 * mib, 0, 100},              // q = 33: the default
		{7 * mib, mib / 10, 126},        // 7 + 7.1×1.26 ≈ 16 MiB
		{5 * mib, 1 * mib, 183},         // 5 + 6×1.83 ≈ 16 MiB
		{1 * mib / 2, 1 * mib / 2, 400}, // clamped at the top
	} {
		got := heapFloorPercent(c.live, c.roots, 16*mib, 100)
		if got != c.want {
			t.Errorf("heapFloorPercent(live %d KiB, roots %d KiB) = %d, want %d", c.live>>10, c.roots>>10, got, c.want)
		}
	}
	// Another base scales the top with it (the runtime's minimum does).
	if got := heapFloorPercent(0, 0, 16*mib, 200); got != 800 {
		t.Errorf("base 200, nothing live: %d, want 800", got)
	}
	// A floor at or under the runtime's own minimum changes nothing.
	if got := heapFloorPercent(mib, 0, 4*mib, 100); got != 100 {
		t.Errorf("floor 4 MiB: %d, want 100", got)
	}

	// Over a range of heaps: the goal is about the floor while the
	// default's is below it, and never above the larger of the two.
	for live := uint64(0); live < 40*mib; live += mib / 4 {
		for _, roots := range []uint64{0, mib / 4, mib, 4 * mib} {
			p := heapFloorPercent(live, roots, 16*mib, 100)
			g, def := goal(live, roots, p), goal(live, roots, 100)
			if def < 16*mib && (g < 16*mib-(live+roots)/100-1 || g > 16*mib) {
				t.Fatalf("live %d KiB, roots %d KiB: percent %d, goal %d KiB, want about 16 MiB", live>>10, roots>>10, p, g>>10)
			}
			if def >= 16*mib && g != def {
				t.Fatalf("live %d KiB, roots %d KiB: percent %d, goal %d KiB, want the default's %d KiB", live>>10, roots>>10, p, g>>10, def>>10)
			}
		}
	}
}

// TestHeapFloorFollowsCollections runs a gcFloor in this process: after a
// collection it has set GOGC for the live heap found, and stop puts the
// default back. Not parallel: it sets the process's GOGC, and tests that
// are run in parallel wait until the sequential ones are done.
func TestHeapFloorFollowsCollections(t *testing.T) {
	t.Setenv("GOGC", "")
	base := gcPercent()
	if base != 100 {
		t.Skipf("GOGC is %d in this process, not the default", base)
	}
	live := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	runtime.GC()
	metrics.Read(live)
	// A floor well above this test binary's heap, so that the percent it
	// asks for is over the default whatever the heap holds.
	floor := live[0].Value.Uint64() + 64<<20
	f := newGCFloor(floor)
	if f == nil {
		t.Fatal("newGCFloor: nil with GOGC unset")
	}
	f.arm()
	defer f.stop()
	runtime.GC()
	deadline := time.Now().Add(10 * time.Second)
	for gcPercent() == base {
		if time.Now().After(deadline) {
			t.Fatal("GOGC still the default 10s after a collection")
		}
		time.Sleep(time.Millisecond)
		runtime.GC() // the cleanup runs after a collection that found the sentinel gone
	}
	top := int(uint64(base) * floor / runtimeHeapMinimum)
	if p := gcPercent(); p <= base || p > top {
		t.Fatalf("GOGC %d after a collection, want between %d and %d", p, base, top)
	}
	f.stop()
	if p := gcPercent(); p != base {
		t.Fatalf("GOGC %d after stop, want %d", p, base)
	}
	// A collection after stop changes nothing (its cleanup sees stopped).
	runtime.GC()
	f.mu.Lock()
	p := f.percent
	f.mu.Unlock()
	if got := gcPercent(); got != base {
		t.Fatalf("GOGC %d after a collection past stop (floor's last %d), want %d", got, p, base)
	}
}

func TestHeapFloorLeavesAnExplicitGOGC(t *testing.T) {
	t.Setenv("GOGC", "100")
	if f := newGCFloor(heapFloor); f != nil {
		t.Fatal("newGCFloor with GOGC set: not nil")
	}
	prev := debug.SetGCPercent(-1)
	defer debug.SetGCPercent(prev)
	t.Setenv("GOGC", "")
	if f := newGCFloor(heapFloor); f != nil {
		t.Fatal("newGCFloor with the collector off: not nil")
	}
}
