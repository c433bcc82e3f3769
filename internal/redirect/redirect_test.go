package redirect

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

func TestParsePorts(t *testing.T) {
	t.Parallel()
	got, err := ParsePorts("443, 80,8443")
	if err != nil || !slices.Equal(got, []uint16{443, 80, 8443}) {
		t.Errorf("ParsePorts = %v, %v; want [443 80 8443]", got, err)
	}
	for _, bad := range []string{"", "0", "65536", "http", "443,-1", "44 3"} {
		if _, err := ParsePorts(bad); err == nil {
			t.Errorf("ParsePorts(%q) = nil error; want one", bad)
		}
	}
}

func TestInstallRefusesALoop(t *testing.T) {
	t.Parallel()
	if err := Install(Rules{ToPort: 443}); err == nil || !strings.Contains(err.Error(), "loop") {
		t.Errorf("Install redirecting 443 to 443: %v; want a loop refusal", err)
	}
	if err := Install(Rules{}); err == nil || !strings.Contains(err.Error(), "--to-port") {
		t.Errorf("Install without a port: %v; want it to ask for --to-port", err)
	}
}

// testNetNS creates a network namespace and returns an open descriptor of
// it, skipping when the test cannot.
func testNetNS(t *testing.T) (fd int, name string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("skipped: needs root to create a network namespace (CI runs as root)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("skipped: ip is not installed (.ci/run installs iproute2)")
	}
	name = fmt.Sprintf("detour-redirect-%d", os.Getpid()%16000)
	_ = exec.Command("ip", "netns", "del", name).Run()
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v\n%s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", name).Run() })
	f, err := os.Open("/run/netns/" + name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	// A kernel without nf_tables is a reason to skip, not a failure here.
	if _, err := Show(int(f.Fd())); err != nil {
		t.Skipf("skipped: nf_tables over netlink is not available: %v", err)
	}
	return int(f.Fd()), name
}

// Installing twice leaves one set of rules; removing twice succeeds and
// leaves nothing.
func TestInstallIsIdempotentAndRemoveLeavesNothing(t *testing.T) {
	ns, _ := testNetNS(t)
	r := Rules{ToPort: 15001, Ports: []uint16{443, 80}, ExcludeUIDs: []uint32{1337}, ExcludeMarks: []uint32{0x1e7},
		ExcludeCIDRs: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8")}, NetNS: ns}
	for i := 0; i < 2; i++ {
		if err := Install(r); err != nil {
			t.Fatalf("install #%d: %v", i+1, err)
		}
	}
	rules, err := Show(ns)
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	for _, r := range rules {
		texts = append(texts, r.Text)
	}
	want := []string{
		"meta skuid 1337 return",
		"meta mark 0x000001e7 return",
		"ip daddr 127.0.0.0/8 return",
		"ip6 daddr ::1/128 return",
		"ip daddr 169.254.0.0/16 return",
		"ip6 daddr fe80::/10 return",
		"ip daddr 10.0.0.0/8 return",
		"ip6 daddr fd00::/8 return",
		"tcp dport 443 redirect to :15001",
		"tcp dport 80 redirect to :15001",
	}
	if !slices.Equal(texts, want) {
		t.Errorf("rules after installing twice:\n%s\nwant\n%s", strings.Join(texts, "\n"), strings.Join(want, "\n"))
	}
	for i := 0; i < 2; i++ {
		if err := Remove(ns); err != nil {
			t.Fatalf("remove #%d: %v", i+1, err)
		}
	}
	if rules, err := Show(ns); err != nil || len(rules) != 0 {
		t.Errorf("after remove: %v, %v; want no rules", rules, err)
	}
}
