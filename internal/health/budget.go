package health

import (
	"runtime"
	"sync"
	"time"
	"weak"
)

// Budgets: what each spend budget has spent in its current period, by
// period key (policy.Period.Key: the budget's name, daily or monthly, and
// the period's first day). The key changes when the period ends, so spend
// resets by itself; the period's end comes with every Add, so that a
// backend can let a finished period's key expire.

// SpendStore keeps spend per period key. It is the seam for a state
// backend shared by a fleet of detours (a Redis INCRBYFLOAT with an
// EXPIREAT at periodEnd does both): the registry holds one, memory-backed
// unless SetSpendStore replaces it. Implementations must be safe for
// concurrent use.
type SpendStore interface {
	// Add adds usd to key's spend; periodEnd is when key's period ends
	// (after it, nobody asks for key again).
	Add(key string, usd float64, periodEnd time.Time)
	// Spent is key's spend so far; 0 for a key never added to.
	Spent(key string) float64
}

// MemorySpend is the per-process SpendStore.
type MemorySpend struct {
	mu sync.Mutex
	m  map[string]spendEntry
}

type spendEntry struct {
	usd float64
	end time.Time
}

// NewMemorySpend returns an empty MemorySpend.
func NewMemorySpend() *MemorySpend { return &MemorySpend{m: map[string]spendEntry{}} }

// longestPeriod bounds a period's length (a month of 31 days and a DST
// hour), for forgetting finished periods without a clock of its own.
const longestPeriod = 32 * 24 * time.Hour

// Add implements SpendStore. A key whose period ended more than a period
// before this one's end is dropped on the way: every period still running
// ends within longestPeriod of now, and this one ends after now.
func (m *MemorySpend) Add(key string, usd float64, periodEnd time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.m[key]
	e.usd += usd
	e.end = periodEnd
	m.m[key] = e
	for k, o := range m.m {
		if o.end.Before(periodEnd.Add(-longestPeriod)) {
			delete(m.m, k)
		}
	}
}

// Spent implements SpendStore.
func (m *MemorySpend) Spent(key string) float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.m[key].usd
}

// budgetState is a registry's budget state. It is kept beside the
// Registry, in a table of this file's own, rather than in a field of it, so
// that budgets live in one file of the package; the fleet-wide backend
// replaces the store, not this.
type budgetState struct {
	mu    sync.Mutex
	store SpendStore
	// warned holds the notices already given (FirstNotice), with the end
	// of the period they are about.
	warned map[string]time.Time
}

// budgetStates maps a Registry (weakly: a registry nobody holds any more
// takes its entry with it) to its budget state.
var budgetStates sync.Map // weak.Pointer[Registry] → *budgetState

func (r *Registry) budgets() *budgetState {
	k := weak.Make(r)
	if v, ok := budgetStates.Load(k); ok {
		return v.(*budgetState)
	}
	v, loaded := budgetStates.LoadOrStore(k, &budgetState{store: NewMemorySpend(), warned: map[string]time.Time{}})
	if !loaded {
		runtime.AddCleanup(r, func(k weak.Pointer[Registry]) { budgetStates.Delete(k) }, k)
	}
	return v.(*budgetState)
}

// SetSpendStore makes s the registry's budget spend store (a shared
// backend); spend already counted in the previous store stays there.
func (r *Registry) SetSpendStore(s SpendStore) {
	b := r.budgets()
	b.mu.Lock()
	defer b.mu.Unlock()
	b.store = s
}

func (r *Registry) spendStore() SpendStore {
	b := r.budgets()
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.store
}

// AddSpend adds usd to a budget period's spend and returns the spend
// after it. periodEnd is when the period ends.
func (r *Registry) AddSpend(key string, usd float64, periodEnd time.Time) float64 {
	st := r.spendStore()
	if usd > 0 {
		st.Add(key, usd, periodEnd)
	}
	return st.Spent(key)
}

// Spent is a budget period's spend so far.
func (r *Registry) Spent(key string) float64 { return r.spendStore().Spent(key) }

// FirstNotice reports whether this is the first call for notice (say, a
// budget period's key with "/warn") in this process: a warning is logged
// once per period, not on every answer after the threshold. periodEnd is
// when the notice stops mattering, so that old ones are forgotten. In a
// fleet each detour gives its own notice once.
func (r *Registry) FirstNotice(notice string, periodEnd time.Time) bool {
	b := r.budgets()
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, done := b.warned[notice]; done {
		return false
	}
	for k, end := range b.warned {
		if end.Before(periodEnd.Add(-longestPeriod)) {
			delete(b.warned, k)
		}
	}
	b.warned[notice] = periodEnd
	return true
}
