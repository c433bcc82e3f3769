package health

import (
	"testing"
	"time"
)

func TestSpendAddsUpPerKeyAndRegistriesAreApart(t *testing.T) {
	t.Parallel()
	end := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	r, other := New(), New()
	if got := r.AddSpend("b/daily/2026-11-30", 1.5, end); got != 1.5 {
		t.Errorf("after one add: %g", got)
	}
	if got := r.AddSpend("b/daily/2026-11-30", 2, end); got != 3.5 {
		t.Errorf("after two adds: %g", got)
	}
	if got := r.AddSpend("b/daily/2026-11-30", 0, end); got != 3.5 {
		t.Errorf("adding 0 changed the spend: %g", got)
	}
	if got := r.Spent("b/daily/2026-12-01"); got != 0 {
		t.Errorf("the next day starts at %g; want 0", got)
	}
	if got := other.Spent("b/daily/2026-11-30"); got != 0 {
		t.Errorf("another registry sees %g; want 0", got)
	}
}

func TestMemorySpendForgetsFinishedPeriods(t *testing.T) {
	t.Parallel()
	m := NewMemorySpend()
	nov := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	m.Add("b/monthly/2026-11", 5, nov)
	m.Add("b/daily/2026-11-30", 1, nov)
	// A day well over a month later: November's keys cannot be current.
	m.Add("b/daily/2027-01-05", 1, time.Date(2027, 1, 6, 0, 0, 0, 0, time.UTC))
	if got := m.Spent("b/monthly/2026-11"); got != 0 {
		t.Errorf("a finished month is still kept: %g", got)
	}
	if n := len(m.m); n != 1 {
		t.Errorf("%d keys kept; want 1", n)
	}
	// A period still running (this month) is kept beside today's.
	m.Add("b/monthly/2027-01", 3, time.Date(2027, 2, 1, 0, 0, 0, 0, time.UTC))
	if got := m.Spent("b/daily/2027-01-05"); got != 1 {
		t.Errorf("today's spend lost: %g", got)
	}
}

func TestFirstNoticeOncePerKey(t *testing.T) {
	t.Parallel()
	r := New()
	end := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	if !r.FirstNotice("b/daily/2026-11-30/warn", end) {
		t.Fatal("first notice refused")
	}
	if r.FirstNotice("b/daily/2026-11-30/warn", end) {
		t.Error("second notice given")
	}
	if !r.FirstNotice("b/daily/2026-12-01/warn", end.Add(24*time.Hour)) {
		t.Error("the next period's notice refused")
	}
}

// countingStore is a SpendStore that is not the memory one: the seam a
// shared backend plugs into.
type countingStore struct {
	adds  int
	spent map[string]float64
	ends  map[string]time.Time
}

func (c *countingStore) Add(key string, usd float64, end time.Time) {
	c.adds++
	c.spent[key] += usd
	c.ends[key] = end
}
func (c *countingStore) Spent(key string) float64 { return c.spent[key] }

func TestSetSpendStoreReplacesTheBackend(t *testing.T) {
	t.Parallel()
	r := New()
	s := &countingStore{spent: map[string]float64{}, ends: map[string]time.Time{}}
	r.SetSpendStore(s)
	end := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	if got := r.AddSpend("k", 2, end); got != 2 || s.adds != 1 || !s.ends["k"].Equal(end) {
		t.Errorf("AddSpend = %g; store adds %d, end %s", got, s.adds, s.ends["k"])
	}
	if got := r.Spent("k"); got != 2 {
		t.Errorf("Spent = %g", got)
	}
}
