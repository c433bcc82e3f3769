package cidr

import (
	"net/netip"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want, err string }{
		{in: "10.0.0.0/8", want: "10.0.0.0/8"},
		{in: "fd00::/8", want: "fd00::/8"},
		{in: "192.168.1.7", want: "192.168.1.7/32"},
		{in: "::ffff:10.1.2.3", want: "10.1.2.3/32"}, // an IPv4-mapped address is the IPv4 one
		{in: "2001:db8::1", want: "2001:db8::1/128"},
		{in: "10.0.0.1/8", err: `"10.0.0.1/8" has bits set past its /8: did you mean 10.0.0.0/8?`},
		{in: "10.0.0.0/33", err: `"10.0.0.0/33" is not a CIDR`},
		{in: "cluster.local", err: `"cluster.local" is not a CIDR such as 10.0.0.0/8 or an address`},
		{in: "", err: `"" is not a CIDR`},
	} {
		p, err := Parse(tc.in)
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Parse(%q) = %v, %v; want an error containing %q", tc.in, p, err, tc.err)
			}
		case err != nil || p != netip.MustParsePrefix(tc.want):
			t.Errorf("Parse(%q) = %v, %v; want %s", tc.in, p, err, tc.want)
		}
	}
}
