package admin

import (
	"encoding/json"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/detour-proxy/detour/internal/health"
	"github.com/detour-proxy/detour/policy"
)

// TestStatusShowsEachBudgetsSpendAndWhatIsLeft: per budget and period,
// /status says what was spent, of what limit, what is left (never below
// 0) and when it resets.
func TestStatusShowsEachBudgetsSpendAndWhatIsLeft(t *testing.T) {
	t.Parallel()
	c, err := policy.Compile("policy.json", []byte(`{
  "upstreams": {"o": {"shape": "openai", "base_url": "https://api.openai.com/v1", "auth": {"from": "client"},
    "prices": {"*": {"input": 2.5, "output": 10}}}},
  "routes": [{"name": "r", "match": {"host": "api.openai.com"}, "chain": ["o"]}],
  "budgets": [{"name": "o-spend", "upstream": "o", "daily": 10, "monthly": 20}]
}`), policy.Options{BaseDir: t.TempDir(), DefaultCADir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	hr := health.New()
	var buf [2]policy.Period
	for _, p := range c.Budgets[0].Periods(now, &buf) {
		spend := 2.5
		if p.Kind != policy.PeriodDaily {
			spend = 25 // over the monthly limit
		}
		hr.AddSpend(p.Key, spend, p.End)
	}
	h := NewHandler(Options{Store: policy.NewStore(c), Health: hr, Now: func() time.Time { return now }})
	_, _, body := do(t, h, local(httptest.NewRequest("GET", "http://127.0.0.1:8788/status", nil)))
	var st StatusJSON
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Budgets) != 1 || st.Budgets[0].Name != "o-spend" || st.Budgets[0].Upstream != "o" {
		t.Fatalf("budgets = %+v; want o-spend on o", st.Budgets)
	}
	d, m := st.Budgets[0].Daily, st.Budgets[0].Monthly
	if d == nil || d.SpentUSD != 2.5 || d.LimitUSD != 10 || d.LeftUSD != 7.5 || d.Exhausted || !d.ResetsAt.Equal(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("daily = %+v; want 2.5 of 10 spent, 7.5 left, resetting at midnight", d)
	}
	if m == nil || m.SpentUSD != 25 || m.LimitUSD != 20 || m.LeftUSD != 0 || !m.Exhausted || !m.ResetsAt.Equal(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("monthly = %+v; want 25 of 20 spent, 0 left, exhausted, resetting on the 1st", m)
	}
}
