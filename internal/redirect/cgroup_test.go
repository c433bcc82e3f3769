package redirect

import (
	"os"
	"slices"
	"strings"
	"testing"
)

func TestInstallCgroupValidates(t *testing.T) {
	t.Parallel()
	ok := CgroupRules{Table: RunTablePrefix + "1", CgroupID: 7, Levels: []uint32{1}, ToPort: 15001}
	for _, tc := range []struct {
		name string
		edit func(*CgroupRules)
		want string
	}{
		{"a table of another name", func(r *CgroupRules) { r.Table = "detour" }, "starts with"},
		{"no cgroup", func(r *CgroupRules) { r.CgroupID = 0 }, "cgroup's id"},
		{"no level", func(r *CgroupRules) { r.Levels = nil }, "level"},
		{"no port to go to", func(r *CgroupRules) { r.ToPort = 0 }, "port to redirect to"},
		{"a loop", func(r *CgroupRules) { r.Ports = []uint16{15001} }, "cannot be redirected"},
	} {
		r := ok
		tc.edit(&r)
		if err := InstallCgroup(r); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: InstallCgroup = %v; want an error with %q", tc.name, err, tc.want)
		}
	}
}

// TestCgroupTableRoundTrip installs a run's table in the test's own network
// namespace (its cgroup id matches no cgroup, so it redirects nothing),
// reads it back, finds it among the run tables, and removes it twice.
func TestCgroupTableRoundTrip(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipped: needs root to program nftables (CI runs as root)")
	}
	name := RunName(os.Getpid(), 1000)
	t.Cleanup(func() { _ = RemoveTable(name) })
	err := InstallCgroup(CgroupRules{Table: name, CgroupID: 1 << 62, CgroupPath: "detour-run-test", Levels: []uint32{1, 2},
		ToPort: 15001, Ports: []uint16{443, 8443}, ExcludeMarks: []uint32{0x1e7}})
	if err != nil {
		t.Fatal(err)
	}
	rules, err := ShowTable(name)
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	for _, r := range rules {
		texts = append(texts, r.Text)
	}
	want := []string{
		`output: socket cgroupv2 level 1 "detour-run-test" (id 4611686018427387904) jump cmd`,
		`output: socket cgroupv2 level 2 "detour-run-test" (id 4611686018427387904) jump cmd`,
		"cmd: meta mark 0x000001e7 return",
		"cmd: ip daddr 127.0.0.0/8 return",
		"cmd: ip6 daddr ::1/128 return",
		"cmd: ip daddr 169.254.0.0/16 return",
		"cmd: ip6 daddr fe80::/10 return",
		"cmd: tcp dport 443 redirect to :15001",
		"cmd: tcp dport 8443 redirect to :15001",
	}
	slices.Sort(texts)
	slices.Sort(want)
	if !slices.Equal(texts, want) {
		t.Errorf("rules:\n%s\nwant:\n%s", strings.Join(texts, "\n"), strings.Join(want, "\n"))
	}
	tables, err := ListRunTables()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(tables, RunTable{Name: name, PID: os.Getpid()}) {
		t.Errorf("ListRunTables = %v; want it to hold %s", tables, name)
	}
	for range 2 { // removing what is gone succeeds
		if err := RemoveTable(name); err != nil {
			t.Fatal(err)
		}
	}
	if rules, err := ShowTable(name); err != nil || rules != nil {
		t.Errorf("after RemoveTable: %v, %v; want nothing", rules, err)
	}
}

func TestParseRunName(t *testing.T) {
	t.Parallel()
	if got := RunName(42, 3); got != "detour-run-42-3" {
		t.Errorf("RunName(42, 3) = %q; want detour-run-42-3", got)
	}
	for name, want := range map[string]int{
		"detour-run-42-3": 42, "detour-run-42": 42,
		"detour": 0, "detour-run-": 0, "detour-run-x-1": 0, "detour-run-42-x": 0, "detour-run-0-1": 0, "detour-runner-1": 0,
	} {
		pid, ok := ParseRunName(name)
		if pid != want || ok != (want != 0) {
			t.Errorf("ParseRunName(%q) = %d, %v; want %d, %v", name, pid, ok, want, want != 0)
		}
	}
}
