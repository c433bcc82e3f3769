package chain

import (
	"sync"
	"testing"
	"time"
)

func TestBodyBudgetReservesUpToItsCapacity(t *testing.T) {
	t.Parallel()
	var b bodyBudget
	b.collect = func() {}
	if !b.reserve(60, 100) || !b.reserve(40, 100) {
		t.Fatal("refused bytes that fit")
	}
	if b.reserve(1, 100) {
		t.Fatal("took a byte over the capacity")
	}
	// A reload that lowers the capacity leaves what is held alone and
	// refuses more until enough is given back.
	b.release(40, 100)
	if b.reserve(1, 50) {
		t.Fatal("took a byte over a lowered capacity")
	}
	b.release(30, 50)
	if !b.reserve(20, 50) || b.used.Load() != 50 {
		t.Fatalf("used %d; want 50", b.used.Load())
	}
}

func TestBodyBudgetHoldsUnderConcurrentUse(t *testing.T) {
	t.Parallel()
	var b bodyBudget
	b.collect = func() {}
	var wg sync.WaitGroup
	var mu sync.Mutex
	peak := int64(0)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 1000 {
				if b.reserve(30, 100) {
					mu.Lock()
					peak = max(peak, b.used.Load())
					mu.Unlock()
					b.release(30, 100)
				}
			}
		}()
	}
	wg.Wait()
	if peak > 100 || b.used.Load() != 0 {
		t.Errorf("peak %d (capacity 100), left %d; want ≤ 100 and 0", peak, b.used.Load())
	}
}

// TestBodyBudgetCollectsAsBodiesAreReleased: a collection starts once an
// eighth of the capacity has been given back, not on every release.
func TestBodyBudgetCollectsAsBodiesAreReleased(t *testing.T) {
	t.Parallel()
	var b bodyBudget
	collected := make(chan struct{}, 10)
	b.collect = func() { collected <- struct{}{} }
	b.reserve(800, 800)
	b.release(50, 800) // 50 of the 100 that start one
	select {
	case <-collected:
		t.Fatal("collected after 50 of 800 bytes released")
	default:
	}
	b.release(50, 800)
	select {
	case <-collected:
	case <-time.After(5 * time.Second):
		t.Fatal("no collection after an eighth of the capacity was released")
	}
}
