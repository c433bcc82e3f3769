package cli

import (
	"errors"
	"strings"
	"testing"
)

// TestRunTransparentFlags: --ports belongs to --transparent and takes TCP
// ports; both are in the usage. (The run itself is tested in
// internal/devrun, as root.)
func TestRunTransparentFlags(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--policy", "p.json", "--ports", "443", "--", "true"}, "--ports says which ports --transparent redirects: add --transparent"},
		{[]string{"--policy", "p.json", "--transparent", "--ports", "443,http", "--", "true"}, `--ports: "http" is not a TCP port`},
		{[]string{"--policy", "p.json", "--transparent", "--ports", "0", "--", "true"}, `--ports: "0" is not a TCP port`},
	} {
		_, stderr, err := detourRun(t, tc.args...)
		if !errors.Is(err, ErrUsage) {
			t.Errorf("detour run %q: err = %v; want ErrUsage", tc.args, err)
		}
		if !strings.Contains(stderr, tc.want) {
			t.Errorf("detour run %q: stderr\n%s\nwant %q", tc.args, stderr, tc.want)
		}
	}
	out, _, err := detourRun(t, "-h")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"[--transparent [--ports 443,80]]", "-transparent", "CAP_NET_ADMIN", "-ports"} {
		if !strings.Contains(out, want) {
			t.Errorf("detour run -h lacks %q:\n%s", want, out)
		}
	}
}
