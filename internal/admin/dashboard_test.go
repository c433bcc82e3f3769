package admin_test

// The Grafana dashboard and the alerting rules in charts/detour query
// detour's metrics by name; a renamed metric or a typo would leave a panel
// empty or an alert silent without any error. These tests check every
// query against the names a real detour exports on /metrics, after a
// request that fell over so that the labelled vectors have children, and
// run the rules through promtool.

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/detour-proxy/detour/internal/detourtest"
	fv "github.com/detour-proxy/detour/internal/fakevendor"
)

const (
	chartDir      = "../../charts/detour"
	dashboardFile = chartDir + "/dashboards/detour.json"
	rulesFile     = chartDir + "/rules/detour.rules.yaml"
	rulesTestFile = chartDir + "/rules/detour.rules.test.yaml"
)

// pendingMetrics are queried by the dashboard but exported only by code
// not merged yet; empty while everything the dashboard shows is built. A
// name on it that a live detour exports fails the test, so the list cannot
// outlive its reason.
var pendingMetrics = []string{}

// liveMetricNames runs detour, sends one request that falls over from a
// quota-exhausted primary to the backup, scrapes /metrics and returns the
// sample names it holds (histograms as their _bucket, _sum and _count).
func liveMetricNames(t *testing.T) map[string]bool {
	t.Helper()
	s := newSetup(t)
	// The backup is priced, so that its answer has a cost to count.
	pol := strings.Replace(s.policy("v1", "primary", "backup"), `"backup":  {"shape": "openai",`, `"backup":  {"shape": "openai", "prices": {"*": {"input": 1, "output": 2}},`, 1)
	h := detourtest.Start(t, pol)
	waitUntil(t, "readyz 200", func() bool { code, _ := get(t, h, "/readyz"); return code == 200 })
	s.primary.Script(fv.Fault{Kind: fv.Status, Status: 429, Class: fv.ClassInsufficientQuota})
	if by := chat(t, h); by != "backup" {
		t.Fatalf("answered by %q; want backup", by)
	}
	h.WaitRecords(t, 1)
	_, text := get(t, h, "/metrics")
	names := map[string]bool{}
	for _, line := range strings.Split(text, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if i := strings.IndexAny(line, "{ "); i > 0 {
			names[line[:i]] = true
		}
	}
	// The vectors the dashboard needs children of, as a guard on the drive.
	for _, n := range []string{"detour_failovers_total", "detour_attempts_total", "detour_upstream_latency_seconds_bucket",
		"detour_overhead_seconds_bucket", "detour_tokens_total", "detour_chain_last_upstream", "detour_cooldown_active"} {
		if !names[n] {
			t.Fatalf("the scrape after a failover lacks %s:\n%s", n, text)
		}
	}
	return names
}

var (
	promqlString   = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	promqlSelector = regexp.MustCompile(`\{[^}]*\}|\[[^\]]*\]`)
	promqlGrouping = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	grafanaVar     = regexp.MustCompile(`\$\{?\w+\}?`)
	promqlIdent    = regexp.MustCompile(`[A-Za-z_:][A-Za-z0-9_:]*`)
	labelValues    = regexp.MustCompile(`^label_values\(\s*([A-Za-z_:][A-Za-z0-9_:]*)`)
	promqlKeywords = []string{"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring", "group_left", "group_right", "inf", "nan"}
)

// metricNames returns the metric names a PromQL expression (or a Grafana
// label_values() query) selects: what is left once strings, label
// matchers, ranges, grouping clauses, Grafana variables, keywords and
// function calls are taken out. It is no full parser, but every
// expression of the dashboard and the rules is written so that it reads
// them all; each expression must name at least one metric, so one it
// cannot read fails rather than passes.
func metricNames(expr string) []string {
	if m := labelValues.FindStringSubmatch(strings.TrimSpace(expr)); m != nil {
		return []string{m[1]}
	}
	e := promqlString.ReplaceAllString(expr, " ")
	e = grafanaVar.ReplaceAllString(e, " ")
	e = promqlSelector.ReplaceAllString(e, " ")
	e = promqlGrouping.ReplaceAllString(e, " ")
	var out []string
	for _, loc := range promqlIdent.FindAllStringIndex(e, -1) {
		id := e[loc[0]:loc[1]]
		if loc[0] > 0 && (e[loc[0]-1] >= '0' && e[loc[0]-1] <= '9' || e[loc[0]-1] == '.') {
			continue // the exponent or unit of a number: 1e3, 5m
		}
		if slices.Contains(promqlKeywords, strings.ToLower(id)) {
			continue
		}
		if rest := strings.TrimLeft(e[loc[1]:], " \t\n"); strings.HasPrefix(rest, "(") {
			continue // a function or an aggregation
		}
		out = append(out, id)
	}
	return out
}

func TestMetricNamesReadsPromQL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		expr string
		want []string
	}{
		{`sum by (route) (rate(detour_failovers_total{namespace=~"$namespace"}[$__rate_interval])) / sum by (route) (rate(detour_requests_total{outcome!="passthrough"}[5m])) > 0.10`,
			[]string{"detour_failovers_total", "detour_requests_total"}},
		{`max by (a) (x_total * ignoring (route) group_left () y_active) > 0`, []string{"x_total", "y_active"}},
		{`histogram_quantile(0.99, sum by (le) (rate(h_bucket[5m]))) > 1e-3`, []string{"h_bucket"}},
		{`label_values(detour_policy_reloads_total{namespace=~"$namespace"}, pod)`, []string{"detour_policy_reloads_total"}},
		{`rate(a[5m]) * 3600 and on (instance) b{result="ok"}`, []string{"a", "b"}},
	} {
		if got := metricNames(tc.expr); !slices.Equal(got, tc.want) {
			t.Errorf("metricNames(%q) = %q; want %q", tc.expr, got, tc.want)
		}
	}
}

// dashboardQueries returns every PromQL expression of the dashboard, with
// where it is: each target's expr and each query variable's query.
func dashboardQueries(t *testing.T) map[string]string {
	t.Helper()
	data, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Title  string `json:"title"`
		UID    string `json:"uid"`
		Panels []struct {
			ID         int    `json:"id"`
			Type       string `json:"type"`
			Title      string `json:"title"`
			Datasource *struct {
				UID string `json:"uid"`
			} `json:"datasource"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Name  string          `json:"name"`
				Type  string          `json:"type"`
				Query json.RawMessage `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("%s does not parse: %v", dashboardFile, err)
	}
	if d.Title == "" || d.UID == "" {
		t.Errorf("dashboard title %q uid %q: both are needed for import and provisioning", d.Title, d.UID)
	}
	queries := map[string]string{}
	ids := map[int]bool{}
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel %q repeats id %d", p.Title, p.ID)
		}
		ids[p.ID] = true
		if p.Type == "row" {
			continue
		}
		// The data source is a variable, so that the dashboard imports into
		// any Grafana whatever its Prometheus is called.
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q: datasource %+v; want the ${datasource} variable", p.Title, p.Datasource)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for i, tg := range p.Targets {
			queries[p.Title+"#"+string(rune('A'+i))] = tg.Expr
		}
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q struct {
			Query string `json:"query"`
		}
		if err := json.Unmarshal(v.Query, &q); err != nil {
			t.Fatalf("variable %s: query %s: %v", v.Name, v.Query, err)
		}
		queries["variable "+v.Name] = q.Query
	}
	return queries
}

type ruleFile struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []struct {
			Alert       string            `json:"alert"`
			Expr        string            `json:"expr"`
			For         string            `json:"for"`
			Labels      map[string]string `json:"labels"`
			Annotations map[string]string `json:"annotations"`
		} `json:"rules"`
	} `json:"groups"`
}

func readRules(t *testing.T) ruleFile {
	t.Helper()
	data, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	var rf ruleFile
	if err := yaml.UnmarshalStrict(data, &rf); err != nil {
		t.Fatalf("%s: %v", rulesFile, err)
	}
	return rf
}

// TestDashboardAndRulesQueryOnlyExportedMetrics: every query of the
// dashboard and every alert expression names only metrics that a live
// detour's /metrics has (or that pendingMetrics lists).
func TestDashboardAndRulesQueryOnlyExportedMetrics(t *testing.T) {
	t.Parallel()
	queries := dashboardQueries(t)
	for _, g := range readRules(t).Groups {
		for _, r := range g.Rules {
			queries["alert "+r.Alert] = r.Expr
		}
	}
	live := liveMetricNames(t)
	for _, p := range pendingMetrics {
		if live[p] {
			t.Errorf("%s is exported now: take it off pendingMetrics", p)
		}
	}
	used := map[string]bool{}
	where := make([]string, 0, len(queries))
	for w := range queries {
		where = append(where, w)
	}
	sort.Strings(where)
	for _, w := range where {
		names := metricNames(queries[w])
		if len(names) == 0 {
			t.Errorf("%s: no metric name found in %q", w, queries[w])
		}
		for _, n := range names {
			used[n] = true
			if !live[n] && !slices.Contains(pendingMetrics, n) {
				t.Errorf("%s: %s is not a metric detour exports (query %q)", w, n, queries[w])
			}
		}
	}
	for _, p := range pendingMetrics {
		if !used[p] {
			t.Errorf("pendingMetrics lists %s, which no query uses", p)
		}
	}
}

// TestDashboardCoversTheIssueList: the dashboard has a panel for each thing
// an operator looks for first, by the metric it reads.
func TestDashboardCoversTheIssueList(t *testing.T) {
	t.Parallel()
	used := map[string]bool{}
	for _, q := range dashboardQueries(t) {
		for _, n := range metricNames(q) {
			used[n] = true
		}
	}
	for _, n := range []string{"detour_requests_total", "detour_failovers_total", "detour_attempts_total",
		"detour_upstream_latency_seconds_bucket", "detour_breaker_state", "detour_cooldown_active", "detour_chain_last_upstream",
		"detour_cache_total", "detour_tokens_total", "detour_cost_usd_total", "detour_policy_reloads_total",
		"detour_overhead_seconds_bucket", "detour_state_backend_up"} {
		if !used[n] {
			t.Errorf("no dashboard panel reads %s", n)
		}
	}
}

// promtool finds promtool (Debian's prometheus package installs
// /usr/bin/promtool; .ci/run installs it). Missing: skipped locally, a
// failure in CI.
func promtool(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("promtool"); err == nil {
		return p
	}
	msg := "promtool not found on PATH (apt-get install prometheus, which .ci/run does)"
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// TestAlertRulesPassPromtool: the rule file is valid for Prometheus, and
// its unit tests, in which each alert fires and a near miss does not, pass.
func TestAlertRulesPassPromtool(t *testing.T) {
	t.Parallel()
	bin := promtool(t)
	for _, args := range [][]string{{"check", "rules", filepath.Base(rulesFile)}, {"test", "rules", filepath.Base(rulesTestFile)}} {
		cmd := exec.Command(bin, args...)
		cmd.Dir = filepath.Dir(rulesFile)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// TestAlertRulesUnitTestsCoverEveryAlert: promtool only runs the cases it
// is given, so this checks that each alert has a case where it fires, the
// file has at least one where an alert must stay silent, and every alert
// carries a severity, a summary and a runbook_url into docs/runbook.md.
func TestAlertRulesUnitTestsCoverEveryAlert(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(rulesTestFile)
	if err != nil {
		t.Fatal(err)
	}
	var tf struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string           `json:"alertname"`
				ExpAlerts []map[string]any `json:"exp_alerts"`
			} `json:"alert_rule_test"`
		} `json:"tests"`
	}
	if err := yaml.Unmarshal(data, &tf); err != nil {
		t.Fatal(err)
	}
	fires, silent := map[string]bool{}, 0
	for _, tc := range tf.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			} else {
				silent++
			}
		}
	}
	if silent == 0 {
		t.Error("no case where an alert must not fire")
	}
	n := 0
	for _, g := range readRules(t).Groups {
		for _, r := range g.Rules {
			n++
			if !fires[r.Alert] {
				t.Errorf("alert %s fires in no case of %s", r.Alert, rulesTestFile)
			}
			want := "https://github.com/detour-proxy/detour/blob/main/docs/runbook.md#" + strings.ToLower(r.Alert)
			if r.Labels["severity"] == "" || r.Annotations["summary"] == "" || r.Annotations["runbook_url"] != want {
				t.Errorf("alert %s: severity %q summary %q runbook_url %q; want all three, the runbook at %s",
					r.Alert, r.Labels["severity"], r.Annotations["summary"], r.Annotations["runbook_url"], want)
			}
		}
	}
	if n != 6 {
		t.Errorf("%d alerts; want the six of the runbook", n)
	}
}

// grafanaValues stand in for the dashboard's variables when its queries are
// handed to promtool: Grafana substitutes them before Prometheus sees a
// query.
var grafanaValues = strings.NewReplacer("$__rate_interval", "5m", "$namespace", ".*", "$pod", ".*", "$phase", "commit")

// TestDashboardQueriesParse: every panel query is valid PromQL, checked by
// promtool as the expressions of a throw-away rule file (promtool has no
// command that parses a bare query).
func TestDashboardQueriesParse(t *testing.T) {
	t.Parallel()
	bin := promtool(t)
	var rules []map[string]string
	for where, q := range dashboardQueries(t) {
		if strings.HasPrefix(where, "variable ") {
			continue // label_values(), Grafana's own function
		}
		rules = append(rules, map[string]string{"record": fmt.Sprintf("dashboard:query_%d", len(rules)), "expr": grafanaValues.Replace(q)})
	}
	data, err := yaml.Marshal(map[string]any{"groups": []any{map[string]any{"name": "dashboard", "rules": rules}}})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "dashboard.rules.yaml")
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, "check", "rules", file).CombinedOutput(); err != nil {
		t.Errorf("promtool check rules on the dashboard's queries: %v\n%s", err, out)
	}
}
