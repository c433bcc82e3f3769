package metrics

import (
	"fmt"
	"sync"
	"testing"
)

// TestWithLabelValuesConcurrentMakesOneChildPerValues: label sets made and
// looked up from many goroutines at once (the lookup reads the published
// index without a lock) each get exactly one child, the same one for every
// caller, and each lists every child once.
func TestWithLabelValuesConcurrentMakesOneChildPerValues(t *testing.T) {
	t.Parallel()
	v := newVec(NewDesc("t_total", "h", KindCounter, "a", "b"), func() *Counter { return new(Counter) })
	const sets, workers = 64, 8
	got := make([][]*Counter, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[w] = make([]*Counter, sets)
			for i := range sets {
				// Each worker starts at another set, so that makers race.
				j := (i + w*7) % sets
				got[w][j] = v.WithLabelValues(fmt.Sprint("x", j), fmt.Sprint(j%3))
			}
		}()
	}
	wg.Wait()
	for j := range sets {
		for w := 1; w < workers; w++ {
			if got[w][j] != got[0][j] {
				t.Fatalf("set %d: worker %d got another child", j, w)
			}
		}
		if again := v.WithLabelValues(fmt.Sprint("x", j), fmt.Sprint(j%3)); again != got[0][j] {
			t.Fatalf("set %d: a later lookup got another child", j)
		}
	}
	seen := map[string]int{}
	v.each(func(values []string, m *Counter) { seen[fmt.Sprint(values)]++ })
	if len(seen) != sets {
		t.Fatalf("each listed %d sets, want %d", len(seen), sets)
	}
	for k, n := range seen {
		if n != 1 {
			t.Errorf("each listed %s %d times", k, n)
		}
	}
}
