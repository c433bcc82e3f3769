package chain

import (
	"testing"
	"time"
)

// TestClocks: without a clock of its own the Runner's time is the wall
// clock's one reading; with one, the wall clock is still read for the
// record's durations and the Runner's clock for everything else.
func TestClocks(t *testing.T) {
	t.Parallel()
	before := time.Now()
	wall, now := (&Runner{}).clocks()
	if wall != now || wall.Before(before) {
		t.Errorf("no clock of its own: wall %v, now %v (before %v)", wall, now, before)
	}
	virtual := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	wall, now = (&Runner{Now: func() time.Time { return virtual }}).clocks()
	if !now.Equal(virtual) || wall.Before(before) || wall.Equal(virtual) {
		t.Errorf("a virtual clock: wall %v, now %v", wall, now)
	}
}
