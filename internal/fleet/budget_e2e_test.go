package fleet_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/detour-proxy/detour/internal/detourtest"
	"github.com/detour-proxy/detour/internal/testsupport"
	"github.com/detour-proxy/detour/rewrite"
)

// budgetOf is the daily period of the named budget in h's /status.
func budgetOf(t *testing.T, h *detourtest.Harness, name string) (spent float64, exhausted bool) {
	t.Helper()
	resp, err := http.Get(h.AdminURL.String() + "/status")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st struct {
		Budgets []struct {
			Name  string `json:"name"`
			Daily *struct {
				SpentUSD  float64 `json:"spent_usd"`
				Exhausted bool    `json:"exhausted"`
			} `json:"daily"`
		} `json:"budgets"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	for _, b := range st.Budgets {
		if b.Name == name && b.Daily != nil {
			return b.Daily.SpentUSD, b.Daily.Exhausted
		}
	}
	t.Fatalf("no daily budget %q in /status", name)
	return 0, false
}

// TestFleetBudgetIsSpentOnce: two detours share one Redis and a daily
// budget on the primary that one answer uses up. After one detour spends
// it, the other sees the fleet's spend and skips the primary too: a budget
// holds for the fleet, not per pod.
func TestFleetBudgetIsSpentOnce(t *testing.T) {
	t.Parallel()
	r := testsupport.StartRedis(t)
	primary := detourtest.NewVendor(t, rewrite.OpenAI, "primary")
	backup := detourtest.NewVendor(t, rewrite.OpenAI, "backup")
	pol := fleetPolicy(r.URL(), "e2e-budget:", primary, backup)
	pol = strings.Replace(pol, `"primary": {"shape": "openai",`, `"primary": {"shape": "openai", "prices": {"*": {"input": 1000, "output": 1000}},`, 1)
	pol = strings.Replace(pol, `"routes":`, `"budgets": [{"name": "primary-daily", "upstream": "primary", "daily": 0.000001}],
  "routes":`, 1)
	hs := []*detourtest.Harness{detourtest.Start(t, pol), detourtest.Start(t, pol)}
	for _, h := range hs {
		testsupport.Eventually(t, 10*time.Second, "the state backend is up", func() bool {
			return strings.Contains(metrics(t, h), "\ndetour_state_backend_up 1\n")
		})
	}
	c := &http.Client{}
	if st, by, err := ask(c, hs[0]); err != nil || st != 200 || by != "primary" {
		t.Fatalf("first request: %d answered by %q, %v; want 200 from the primary", st, by, err)
	}
	testsupport.Eventually(t, 10*time.Second, "the other detour sees the fleet's spend", func() bool {
		_, exhausted := budgetOf(t, hs[1], "primary-daily")
		return exhausted
	})
	if st, by, err := ask(c, hs[1]); err != nil || st != 200 || by != "backup" {
		t.Errorf("second detour: %d answered by %q, %v; want 200 from the backup (the fleet's budget is spent)", st, by, err)
	}
	if n := primary.Calls(); n != 1 {
		t.Errorf("the primary was called %d times; want 1", n)
	}
	if spent, _ := budgetOf(t, hs[1], "primary-daily"); spent <= 0.000001 {
		t.Errorf("second detour's spend %v; want the first detour's answer counted", spent)
	}
}
