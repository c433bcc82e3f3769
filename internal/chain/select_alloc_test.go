//go:build !race

// Under the race detector sync.Pool drops a share of what is put back, on
// purpose, so the pooled selection state would be allocated again now and
// then: the allocation count is checked without it.

package chain

import "testing"

// The choice allocates nothing for a chain of up to eight upstreams.
func TestSelectDoesNotAllocate(t *testing.T) {
	for _, sel := range []string{
		`{"strategy": "weighted", "weights": {"u0": 9, "u1": 1}}`,
		`{"strategy": "weighted", "weights": {"u0": 9, "u1": 1}, "sticky": true}`,
		`{"strategy": "scored"}`,
	} {
		s := benchSession(t, sel)
		if n := testing.AllocsPerRun(100, func() { s.selectChain(s.route.Chain); releaseSelection(s.rec) }); n != 0 {
			t.Errorf("%s: %v allocations per choice; want 0", sel, n)
		}
	}
}
